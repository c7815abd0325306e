"""Settings: every threshold, weight and budget in one validated place.

Each field's default is the design's, and its description says what it governs. Any
field can be overridden in code (``MemorySettings(similarity_floor=0.6)``) or from
the environment with ``MemorySettings.from_env`` (``LANGMEM_SIMILARITY_FLOOR=0.6``).
"""

from __future__ import annotations

import json
import os
import warnings
from datetime import tzinfo
from typing import Annotated, Any, Literal, get_origin
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from langmem_layer.errors import ConfigurationError

__all__ = ["GateSettings", "MemorySettings", "RankingWeights", "zone"]



def zone(name: str) -> tzinfo:
    """The timezone called ``name`` (``"UTC"``, ``"Europe/Lisbon"``).

    Raises:
        ConfigurationError: No such IANA timezone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(
            f"Unknown timezone {name!r}; use an IANA name such as 'UTC' or "
            "'Europe/Lisbon'.") from None

class RankingWeights(BaseModel):
    """Weights of the composite ranking score."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    relevance: float = 0.35
    salience: float = 0.20
    pinned: float = 0.15
    urgency: float = 0.20
    confidence: float = 0.10
    recency: float = 0.10


class GateSettings(BaseModel):
    """Thresholds of the write gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # One rule for every way in (write.gate.content_problem): low enough for a short
    # memory a person writes ("Vegan.", "Age 34"), high enough to refuse "ok" and "hi".
    min_content_chars: int = Field(
        default=3, ge=1, description="Shorter content (stripped) is refused, on every way in.")
    max_content_chars: int = Field(
        default=4000, ge=1, description="Longer content (stripped) is refused, on every way in.")
    min_confidence: float = Field(default=0.4, ge=0, le=1)
    min_salience: float = Field(default=0.2, ge=0, le=1)
    ephemeral_min_salience: float = Field(
        default=0.6, ge=0, le=1, description="Ephemeral content needs salience above this."
    )
    duplicate_cosine: float = Field(
        default=0.88, ge=0, le=1, description="Cosine above which a new memory reinforces."
    )


class MemorySettings(BaseModel):
    """Settings of a ``MemoryLayer``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_profile: str = "work"
    profiles: tuple[str, ...] = ("work", "personal")
    gate: GateSettings = Field(default_factory=GateSettings)
    weights: RankingWeights = Field(default_factory=RankingWeights)
    rrf_k: int = Field(default=60, ge=1, description="Reciprocal Rank Fusion constant.")
    candidates_per_source: int = Field(
        default=20, ge=1,
        description="Length of each strategy's candidate list before fusion (LoCoMo "
        "recall@10 0.717 at 20, 0.719 at 30, 0.721 at 40; at 100k memories a turn's "
        "read path takes ~17 % less time at 20 than at 30).",
    )
    similarity_floor: float = Field(
        default=0.7, ge=-1, le=1, description="Vector hits below this are dropped."
    )
    episodic_similarity_floor: float = Field(default=0.72, ge=-1, le=1)
    search_similarity_floor: float = Field(
        default=0.7, ge=-1, le=1,
        description="What a search shows (recall(), the memory tools, the REST and CLI "
        "search): a memory found only by its embedding must reach this similarity. "
        "Higher than the block's floors, which let weak hits fill a token budget: a "
        "search for something the user never said shows nothing.")
    recall_limit: int = Field(
        default=10, ge=1, description="Memories recall() returns when no limit is passed.")
    block_target_tokens: int = Field(
        default=1200, ge=0,
        description="The memory block's ranked memories stop at this many tokens of block "
        "text (a target inside context_budget_tokens; pinned memories, documents and recent "
        "history still use the budget). 0: no target, only the budget. Chosen on LoCoMo by "
        "leave-one-conversation-out (docs: retrieval): the most evidence at <= 5 % of a "
        "conversation's tokens.",
    )
    block_memory_limit: int = Field(
        default=40, ge=1,
        description="Ranked memories the block is filled from, best first (the token target "
        "usually stops it first: on LoCoMo 40 and 60 hold the same evidence).",
    )
    rerank_depth: int = Field(
        default=40, ge=0,
        description="The reranking stage reorders this many of the best-ranked memories "
        "with a small learned model over the signals ranking computed (ranks, cosine, "
        "links, subject, dates; langmem_layer.read.rerank). 0: off. Chosen on LoCoMo by "
        "leave-one-conversation-out (docs: retrieval).",
    )
    rerank_model: str | None = Field(
        default=None,
        description="A reranker weights file (JSON) to use instead of the one the package "
        "ships; benchmarks/locomo_rerank.py writes one.",
    )
    block_min_relevance: float = Field(
        default=0.2, ge=0, le=1,
        description="A ranked memory enters the block only if its relevance (fused retrieval "
        "score over the best hit's) reaches this; pinned memories, open loops due now and "
        "standing preferences always do. With block_target_tokens, chosen on LoCoMo "
        "(docs: retrieval).",
    )
    decay_flag_below: float = Field(
        default=0.15, ge=0, le=1,
        description="A recalled memory whose decay score is below this is flagged "
        "Recalled.decayed; decay deprioritises it, it is never hidden.",
    )
    context_window_tokens: int = Field(default=128_000, ge=256)
    context_budget_fraction: float = Field(
        default=0.20, gt=0, le=1, description="Share of the window for the memory block."
    )
    semantic_share: float = Field(default=0.60, gt=0, le=1)
    encoding: str = "o200k_base"
    conflict_policy: Literal["latest", "trust", "review"] = Field(
        default="latest",
        description="Two agents disagree on a single-valued fact: the latest write "
        "wins, the more trusted agent wins, or both stay linked for human review.",
    )
    extraction_batch_size: int = Field(default=20, ge=1, description="Entries per worker pass.")
    extraction_concurrency: int = Field(
        default=4, ge=1,
        description="Users whose turns an async worker extracts side by side (each user's "
        "in order): their store calls share round trips, and up to this many extractor "
        "calls run at once. The sync worker thread takes users one after another.")
    extraction_lease_seconds: float = Field(
        default=60.0, gt=0,
        description="How long a worker holds the turns it claimed. Short, because the "
        "worker renews it between turns (a heartbeat): a crashed worker's turns come back "
        "within it. Keep it above your slowest single extraction.")
    extraction_retry_base_seconds: float = Field(
        default=30.0, ge=0, description="First retry delay; doubles per failed attempt."
    )
    extraction_max_attempts: int = Field(
        default=8, ge=1,
        description="Attempts before a failing queue entry is parked (kept, not retried); "
        "with the doubling delay, 8 attempts span about an hour from the first.",
    )
    max_query_terms: int = Field(
        default=128, ge=1,
        description="Distinct words of a message the full-text search ORs together (the "
        "longest ones when it has more). No ordinary question has this many, and it stays "
        "two orders of magnitude under the ~17k terms whose tsquery exceeds PostgreSQL's "
        "stack depth, while each term costs an index probe.",
    )
    max_extract_chars: int = Field(
        default=20_000, ge=1,
        description="Characters of each message the extractor reads (the first ones). A "
        "pasted document of megabytes stays whole in the queue and the message log, but "
        "extracting from all of it would hold a CPU (or a model's context) for minutes.",
    )
    extract_every_n_turns: int = Field(
        default=1, ge=1, description="Background extraction runs after every N turns."
    )
    embedding_batch_size: int = Field(default=100, ge=1)
    history_max_tokens: int = Field(
        default=12_000, ge=1,
        description="Token budget of the thread history the agent sees; older turns "
        "are handed to extraction and removed from the checkpointed state.",
    )
    history_min_turns: int = Field(
        default=3, ge=1, description="Turns always kept, even over the history budget."
    )
    session_ttl_seconds: float = Field(
        default=24 * 3600.0, gt=0,
        description="A thread idle longer than this is closed by the session sweeper.",
    )
    session_prune: Literal["off", "keep_latest", "delete"] = Field(
        default="off",
        description="What the sweeper does to a closed thread's checkpoints: nothing, keep "
        "only the latest (the thread stays readable), or delete the thread.",
    )
    message_log_retention_days: float = Field(
        default=90.0, gt=0, description="The per-user message log keeps this many days."
    )
    recent_history_hours: float = Field(
        default=24.0, ge=0,
        description="The memory block shows the user's messages from other threads this recent.",
    )
    recent_history_limit: int = Field(
        default=20, ge=0, description="At most this many messages from other threads (0: none)."
    )
    recent_history_line_tokens: int = Field(
        default=200, ge=8, description="Each message from another thread is cut to this."
    )
    short_term_messages: int = Field(
        default=10, ge=0, description="The active thread's last messages kept at hand."
    )

    # -- retrieval strategies and fusion; see langmem_layer.read.rank --
    keyword_ranking: Literal["bm25", "cover_density"] = Field(
        default="bm25",
        description="Full-text ranking: Okapi BM25 over the user's memories (a word most "
        "memories share weighs little), or Postgres ts_rank_cd cover density.",
    )
    source_weights: dict[str, float] = Field(
        default_factory=lambda: {"vector": 1.0, "keyword": 1.0, "ref": 1.0, "time": 1.0,
                                 "context": 1.0, "link": 0.5},
        description="Weight of each strategy in the fusion: w / (rrf_k + rank) for vector, "
        "keyword, ref, time and context; for link, the share of a linked memory's fused "
        "score (above the weakest candidate's) a memory inherits. A strategy left out "
        "weighs its default.",
    )
    link_types: tuple[str, ...] = Field(
        default=("elaborates", "caused_by", "derived_from"),
        description="Recall walks one hop over these link types from its best hits; "
        "empty: no walk.",
    )
    link_thread_memories: bool = Field(
        default=True,
        description="The write path links each memory it adds from a thread ('elaborates') "
        "to the thread's previous memory, so the link walk brings back a hit's "
        "conversational context.",
    )
    link_seeds: int = Field(
        default=10, ge=0, description="Best hits of each strategy the link walk starts from."
    )
    context_turns: int = Field(
        default=2, ge=0, le=2,
        description="A memory written into a thread (by extraction, or "
        "remember(..., thread_id=)) is also embedded with this many of the memories "
        "before it in the thread: its context vector, which recall's context strategy "
        "searches. 0: none. Chosen on LoCoMo by leave-one-conversation-out (docs: "
        "retrieval).",
    )
    context_candidates: int = Field(
        default=40, ge=0,
        description="Candidates recall's context strategy takes: the memories whose "
        "context vectors are most like the question. 0: the strategy is off. A user with "
        "an ANN index of their own is searched without it.",
    )
    context_similarity_floor: float = Field(
        default=0.25, ge=-1, le=1,
        description="The similarity to the question a context vector must reach for the "
        "context strategy to take its memory: a question like none of them brings "
        "none. Chosen on LoCoMo by leave-one-conversation-out (docs: retrieval).",
    )
    query_refs: bool = Field(
        default=True, description="Look up the references (entities) the query names."
    )
    embed_query_refs: bool = Field(
        default=False,
        description="Embed the query with the references it names (people, places, titles). "
        "Off: they are matched exactly by the reference and keyword strategies and left out "
        "of the query's embedding, so a question about a person is not pulled toward every "
        "message addressed to them.",
    )
    subject_focus: float = Field(
        default=0.5, ge=0, le=1,
        description="A memory whose subject (the typed field: whom it is about, who said "
        "it) the query does not name, when the query names the subject of another "
        "candidate, keeps this share of its retrieval score: a question about one person "
        "favours what is known of that person. 1: off.",
    )
    ref_max_share: float = Field(
        default=0.05, gt=0, le=1,
        description="A reference carried by more than this share of the user's memories (and "
        "by more than 10) does not discriminate and is not looked up.",
    )
    temporal_window: bool = Field(
        default=True,
        description="A query naming a period ('in May 2023', 'last week') also finds the "
        "memories that occurred in it (strategy 'time').",
    )
    temporal_slack_days: float = Field(
        default=7.0, ge=0, description="The named period is widened by this on both sides."
    )
    standing_preferences: int = Field(
        default=3, ge=0,
        description="Preferences on how to answer (policy 'adapt': 'prefers short answers') "
        "join every recall whatever the question, up to this many, most salient first; "
        "they shape every reply, so no question has to resemble them. 0: off.",
    )
    open_question_limit: int = Field(
        default=3, ge=0,
        description="Open loops whose references overlap the recalled memories' references "
        "are added to recall, flagged 'open_question'; 0: off.",
    )
    summary_half_life_days: float = Field(
        default=180.0, gt=0,
        description="Half-life of the decay of summaries and reflections.",
    )

    summary_half_life_by_user: dict[str, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict,
        description="Per-user half-life (days) of summaries and reflections, overriding "
        "summary_half_life_days for the users named.",
    )

    # -- the lifecycle; see langmem_layer.jobs.lifecycle_jobs --
    lifecycle_ephemeral_stale_days: float = Field(
        default=3.0, gt=0, description="Ephemeral context not referenced this long goes stale.")
    lifecycle_episodic_stale_days: float = Field(
        default=30.0, gt=0,
        description="Episodic events not reinforced (written) this long go stale.")
    lifecycle_archive_after_days: float = Field(
        default=90.0, gt=0, description="A memory stale this long is archived.")
    lifecycle_loop_grace_days: float = Field(
        default=7.0, ge=0,
        description="An open loop closes this long after its due date; until then it comes "
        "back as a follow-up.")
    lifecycle_loop_silence_days: float = Field(
        default=60.0, gt=0,
        description="An open loop without a future due date closes after this long unreferenced.")
    lifecycle_habit_min_outcomes: int = Field(
        default=5, ge=1, description="Outcomes a procedural habit needs before it can retire.")
    lifecycle_habit_max_failure_rate: float = Field(
        default=0.6, ge=0, le=1,
        description="A habit whose failure rate is above this (with enough outcomes) retires.")
    lifecycle_revalidate_after_days: float = Field(
        default=180.0, gt=0,
        description="A semantic fact not confirmed this long is flagged needs_revalidation.")
    due_window_hours: float = Field(
        default=72.0, ge=0,
        description="An open loop due within this many hours comes back in OPEN THREADS on "
        "the next turn, whatever the question (as it does, framed as a follow-up, until "
        "lifecycle_loop_grace_days after its due date).")
    due_limit: int = Field(
        default=3, ge=0, description="At most this many due open loops a turn (0: off).")

    jobs_time_of_day: str = Field(
        default="03:00", pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="Local time (HH:MM) from which a scheduled job's period is due: a "
        "daily job runs once a day from then, a weekly one from then on Mondays, a "
        "monthly one from then on the 1st.",
    )
    jobs_timezone: str = Field(
        default="UTC",
        description="IANA timezone of jobs_time_of_day and of the jobs' periods "
        "(a daily period is a local calendar day).",
    )
    jobs_pause_ms: float = Field(
        default=0.0, ge=0,
        description="A per-user job's runner waits this long after each user's commit, "
        "leaving the database to the read path in between (0: no wait). The nightly "
        "lifecycle meets its read-path target without it on the benchmark's machine; "
        "raise it where reads suffer during the run, at the cost of the run's length.",
    )

    # -- knowledge retrieval beside memory (MemoryLayer(knowledge=...)) --
    knowledge_k: int = Field(
        default=4, ge=0, description="Documents the knowledge source is asked for a turn (0: off)."
    )
    knowledge_share: float = Field(
        default=0.5, ge=0, le=1,
        description="RELEVANT DOCUMENTS may use at most this share of the block budget the "
        "memories leave (the rest stays for recent conversations).",
    )
    knowledge_doc_tokens: int = Field(
        default=200, ge=8, description="Each retrieved document is cut to this many tokens."
    )

    calibration: str = Field(
        default="auto",
        description="Which calibration profile fills the retrieval settings not set "
        "explicitly: 'auto' picks it from the store's embedding model (see "
        "langmem_layer.settings.calibration), 'defaults' keeps the uncalibrated "
        "defaults, another profile's name forces that profile. 'spec' (the former "
        "name of 'defaults') is deprecated.",
    )

    @field_validator("calibration")
    @classmethod
    def _renamed_profile(cls, name: str) -> str:
        if name == "spec":
            warnings.warn(
                "calibration='spec' is deprecated and will be removed in the next release: "
                "the profile is now called 'defaults' (calibration='defaults')",
                DeprecationWarning, stacklevel=3)
            return "defaults"
        return name

    @model_validator(mode="after")
    def _default_profile_known(self) -> MemorySettings:
        if self.default_profile not in self.profiles:
            object.__setattr__(self, "profiles", (*self.profiles, self.default_profile))
        return self

    def half_life_days(self, user_id: str) -> float:
        """The half-life of ``user_id``'s summaries and reflections."""
        return self.summary_half_life_by_user.get(user_id, self.summary_half_life_days)

    @field_validator("jobs_timezone")
    @classmethod
    def _known_timezone(cls, name: str) -> str:
        zone(name)  # raises ConfigurationError (a ValueError) naming the fix
        return name

    @property
    def context_budget_tokens(self) -> int:
        """Token budget of the memory block."""
        return int(self.context_window_tokens * self.context_budget_fraction)

    @classmethod
    def from_env(cls, prefix: str = "LANGMEM_", **overrides: Any) -> MemorySettings:
        """Build settings from ``LANGMEM_*`` environment variables plus ``overrides``.

        Top-level fields are read from the environment: lists comma-separated
        (``LANGMEM_LINK_TYPES=elaborates,caused_by``), mappings as JSON
        (``LANGMEM_SOURCE_WEIGHTS='{"link": 0.3}'``), the rest as text. Nested settings
        (``gate``, ``weights``) are passed as overrides.

        Raises:
            ConfigurationError: A mapping variable is not JSON (a ValueError).
            pydantic.ValidationError: A value is invalid (also a ValueError).
        """
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            var = prefix + name.upper()
            raw = os.environ.get(var)
            if raw is None or info.annotation in (GateSettings, RankingWeights):
                continue
            origin = get_origin(info.annotation)
            if origin is tuple:
                values[name] = tuple(p.strip() for p in raw.split(",") if p.strip())
            elif origin is dict:
                try:
                    values[name] = json.loads(raw)
                except json.JSONDecodeError as e:
                    raise ConfigurationError(
                        f"{var} must be a JSON object, e.g. '{{\"link\": 0.3}}'") from e
            else:
                values[name] = raw
        values.update(overrides)
        return cls.model_validate(values)
