"""Ranking of retrieval candidates: fusion, decay, composite score. Pure functions.

The store returns candidates found by any strategy (vector, keyword, reference, time
window, one-hop link walk, open questions, pinned) with their per-strategy ranks.
Here they are:

1. filtered by the relevance floor: a candidate whose only evidence is its
   embedding (found by the vector strategy alone) must reach the similarity floor; a
   keyword, reference, time-window, context or link hit stands on its own;
2. fused with weighted Reciprocal Rank Fusion over the union:
   ``fused = Σ_s w_s / (rrf_k + rank_s + 1)`` over vector, keyword, ref and time;
3. spread one hop over links: a memory linked to candidates inherits
   ``w_link × max(fused(neighbour) − last_place)``, the best neighbour's margin over
   the last place of a list (``1 / (rrf_k + candidates_per_source)``), so a memory
   found only through a link can outrank weaker direct hits, and a link to a
   mediocre hit adds nearly nothing, at any k;
   then focused on the subjects the query names: a memory about someone (its typed
   ``subject``) the query does not name, when the query names another candidate's
   subject, keeps ``subject_focus`` of its score (``subject_focus``);
4. scored with the weighted composite (``RankingWeights``;
   relevance = the above over its maximum), multiplied by the decay weight and the
   authoring agent's trust. Pinned memories bypass ranking; open questions, open loops due
   now (source ``due``) and standing preferences (source ``standing``) are added after
   the ranked ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from langmem_layer.read.rerank import (
    RerankItem,
    RerankQuery,
    features,
    load_reranker,
    probability,
)
from langmem_layer.settings import MemorySettings
from langmem_layer.sql.sources import RECALL_SOURCES
from langmem_layer.sql.transitions import HALF_LIFE_KINDS, MAX_DECAY_EXPONENT, MAX_HALVINGS
from langmem_layer.store.ops import Candidate
from langmem_layer.types import (
    Kind,
    Layer,
    LoopStatus,
    MemoryRecord,
    Recalled,
    normalize_ref,
    to_utc,
)

__all__ = [
    "DEFAULT_SOURCE_WEIGHTS",
    "HALF_LIFE_KINDS",
    "UNASKED_SOURCES",
    "Facts",
    "Rankable",
    "decay_score",
    "decay_weight",
    "link_scores",
    "rank_candidates",
    "rrf_scores",
    "subject_focus",
    "subject_of",
    "urgency",
]

#: Strategies fused by RRF; "link" is spread separately (see ``link_scores``).
_FUSED_SOURCES = tuple(s.name for s in RECALL_SOURCES if s.fused)
#: Evidence of relevance besides the embedding: such a candidate skips the floor.
_LEXICAL_SOURCES = frozenset(s.name for s in RECALL_SOURCES if s.lexical)
#: Strategies whose memories come back whatever the question, after the ranked ones.
UNASKED_SOURCES = frozenset(s.name for s in RECALL_SOURCES if s.unasked)
#: What shows that a memory matches the question itself (a search's test): a word or a
#: reference it names, its period, an open question it answers. Not a link: the walk
#: brings a hit's conversational neighbours, which a search did not ask for.
_MATCHING_SOURCES = frozenset({"keyword", "ref", "time", "open_question"})
DEFAULT_SOURCE_WEIGHTS: Mapping[str, float] = {
    s.name: s.default_weight for s in RECALL_SOURCES if s.default_weight is not None
}
#: Decay deprioritises but never hides: a fully decayed memory keeps this weight.
MIN_DECAY_WEIGHT = 0.25


class Rankable(Protocol):
    """What ranking reads of a memory: a ``MemoryRecord`` or its ``Facts``."""

    @property
    def kind(self) -> Kind: ...
    @property
    def layer(self) -> Layer: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def confidence(self) -> float: ...
    @property
    def loop_status(self) -> LoopStatus | None: ...
    @property
    def due_at(self) -> datetime | None: ...
    @property
    def last_accessed_at(self) -> datetime: ...
    @property
    def access_count(self) -> int: ...


def _when(text: str | None) -> datetime | None:
    return None if text is None else to_utc(datetime.fromisoformat(text))


@dataclass(frozen=True, slots=True)
class Facts:
    """The fields ranking reads, taken from a stored value without validating the rest.

    Ranking scores every candidate but returns a few, so only the returned ones are
    validated into a ``MemoryRecord`` (pydantic validation of each candidate was
    most of ranking's time).
    """

    kind: Kind
    layer: Layer
    pinned: bool
    confidence: float
    salience: float
    loop_status: LoopStatus | None
    due_at: datetime | None
    occurred_at: datetime
    last_accessed_at: datetime
    access_count: int
    agent_id: str | None

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> Facts:
        """Read a stored value; a malformed one raises the full validation error."""
        try:
            loop = value.get("loop_status")
            return cls(
                kind=Kind(value["kind"]),
                layer=Layer(value["layer"]),
                pinned=value.get("pinned") is True,
                confidence=float(value.get("confidence", 0.8)),
                salience=float(value.get("salience", 0.5)),
                loop_status=None if loop is None else LoopStatus(loop),
                due_at=_when(value.get("due_at")),
                occurred_at=to_utc(datetime.fromisoformat(value["occurred_at"])),
                last_accessed_at=to_utc(datetime.fromisoformat(value["last_accessed_at"])),
                access_count=int(value.get("access_count", 0)),
                agent_id=(value.get("source") or {}).get("agent_id"),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            # Raises the precise error; a value pydantic accepts is read in its
            # canonical form.
            return cls.of(MemoryRecord.model_validate(value).to_value())


def _days(later: datetime, earlier: datetime) -> float:
    return max(0.0, (to_utc(later) - to_utc(earlier)).total_seconds() / 86400.0)


def decay_score(record: Rankable, now: datetime, *, half_life_days: float = 180.0) -> float:
    """The decay score (1.0 means no decay).

    The lifecycle job stores the same score, computed in SQL
    (``langmem_layer.sql.transitions.decay_expression``); tests hold the two equal.

    Semantic, procedural and identity memories: ``confidence × e^(−t/S)`` with ``t``
    days since last access and ``S = 1 + 0.5 × access_count``. Summaries and
    reflections: ``confidence × 0.5^(t / half_life)``. Episodic events do not decay.
    """
    if record.layer == Layer.EPISODIC:
        return record.confidence
    t = _days(now, record.last_accessed_at)
    if record.kind in HALF_LIFE_KINDS:
        return record.confidence * 0.5 ** min(t / half_life_days, MAX_HALVINGS)
    stability = 1.0 + 0.5 * record.access_count
    return record.confidence * math.exp(-min(t / stability, MAX_DECAY_EXPONENT))


def decay_weight(record: Rankable, now: datetime, *, half_life_days: float = 180.0) -> float:
    """Multiplier applied to the composite score: the decay without confidence, floored."""
    if record.layer == Layer.EPISODIC or record.pinned:
        return 1.0
    raw = decay_score(record, now, half_life_days=half_life_days)
    base = raw / record.confidence if record.confidence > 0 else 0.0
    return max(MIN_DECAY_WEIGHT, base)


def urgency(record: Rankable, now: datetime) -> float:
    """Open-loop urgency in [0, 1]: 1 when due within a day or overdue, fading over 14 days."""
    if record.kind != Kind.OPEN_LOOP or record.loop_status == LoopStatus.CLOSED:
        return 0.0
    if record.due_at is None:
        return 0.3
    days_left = (to_utc(record.due_at) - to_utc(now)).total_seconds() / 86400.0
    if days_left <= 1.0:
        return 1.0
    return max(0.0, 1.0 - (days_left - 1.0) / 14.0)


def _weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    return {**DEFAULT_SOURCE_WEIGHTS, **(weights or {})}


def rrf_scores(
    candidates: Sequence[Candidate], k: int = 60, weights: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Weighted Reciprocal Rank Fusion over the union: ``Σ w_s / (k + rank_s + 1)``.

    Ranks are 0-based (so the best of a list adds ``w / (k + 1)``). Sources: vector,
    keyword, ref and time; a weight left out of ``weights`` is its default (1.0).
    """
    w = _weights(weights)
    return {
        c.key: sum(w[s] / (k + c.ranks[s] + 1) for s in _FUSED_SOURCES if s in c.ranks)
        for c in candidates
    }


def link_scores(
    fused: Mapping[str, float],
    links: Mapping[str, Iterable[str]],
    weight: float,
    floor: float = 0.0,
) -> dict[str, float]:
    """What each memory inherits from its linked neighbours (one hop).

    ``weight × max(fused[n] − floor)`` over the neighbours ``n`` with a fused score
    above ``floor``. ``rank_candidates`` passes as ``floor`` the score of the last
    place of one list, ``1 / (rrf_k + candidates_per_source)``: what a neighbour passes
    on is its margin over a barely-found memory, so that with a large RRF constant
    (flat scores) being next to any candidate is not worth half a hit.

    Args:
        fused: Fused scores of the candidates (see ``rrf_scores``).
        links: For each memory, the keys it is linked to (either direction).
        weight: The share inherited (``source_weights["link"]``).
        floor: The score that passes nothing on.
    """
    if weight <= 0:
        return {}
    out: dict[str, float] = {}
    for key, neighbours in links.items():
        best = max((fused.get(n, 0.0) - floor for n in neighbours), default=0.0)
        if best > 0:
            out[key] = weight * best
    return out


def subject_of(value: Mapping[str, Any]) -> str | None:
    """A memory's typed ``subject`` (whom it is about, or who said it), normalised as
    references are (``normalize_ref``); ``None`` without one."""
    subject = value.get("subject")
    return normalize_ref(subject) if isinstance(subject, str) and subject.strip() else None


def subject_focus(scores: Mapping[str, float], subjects: Mapping[str, str | None],
                  names: Iterable[str], factor: float) -> dict[str, float]:
    """``scores`` with the memories about subjects the query does not name scaled by
    ``factor``.

    Only when the query names (``names``, normalised references) the subject of one of
    the memories (``subjects``: each key's subject or ``None``); a memory without a
    subject keeps its score. A question about one person gathers what is known of that
    person, and beside it sit memories about others sharing its words: in a LoCoMo
    conversation (each turn's subject its speaker) 97 % of the evidence of a question
    naming one speaker is that speaker's turns, yet a third of the top ten was the
    other speaker's.
    """
    wanted = set(names)
    if factor >= 1 or not wanted:
        return dict(scores)
    if wanted.isdisjoint(s for s in subjects.values() if s):
        return dict(scores)
    return {key: score * factor if subjects.get(key) and subjects[key] not in wanted
            else score for key, score in scores.items()}


def rank_candidates(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    settings: MemorySettings,
    limit: int,
    trust: Mapping[str, float] | None = None,
    links: Mapping[str, Iterable[str]] | None = None,
    learned: Any = None,
    names: Iterable[str] = (),
    search_floor: float | None = None,
    query: RerankQuery | None = None,
) -> list[Recalled]:
    """Filter, fuse and score candidates; pinned first, then by composite score, the
    first ``rerank_depth`` reordered by the reranker (``_reranked``).

    A candidate found only by vector search (or only by vector and time) must clear
    the similarity floor (0.72 for episodic memories); a keyword, reference or link
    hit stands on its own, so a memory found only by keywords, only by reference or
    only through a link can win. Open questions (candidates with an ``open_question``
    rank) and due open loops (a ``due`` rank) not among the ``limit`` best are appended
    after them.

    Args:
        candidates: From a ``RecallOp``.
        now: Time for decay, urgency and recency.
        settings: Weights, floors, RRF constant, source weights.
        limit: How many non-pinned memories to return (pinned are always included,
            open questions are added).
        trust: Per-agent trust in [0, 1] as configured; an agent with no history
            counts 0.5.
        learned: The user's learned trust
            (``LearnedTrust``): where it has a
            history for an agent (per kind when known), it replaces ``trust``.
        links: For each candidate key, the keys it is linked to (for the link spread).
        names: The references the query names (normalised): the subjects it asks
            about, whose memories ``subject_focus`` favours.
        query: What the reranking stage reads of the question
            (``langmem_layer.read.rerank``); ``None``: no reranking (a ranking that
            answers no question, such as the write path's look for similar memories).
        search_floor: Rank as a search: only memories that match the question come
            back (a keyword, reference, period or open-question hit, or a similarity
            of at least this), pinned ones, linked ones and those that come back
            whatever the question (due open loops, standing preferences) included.
    """
    w = settings.weights
    weights = _weights(settings.source_weights)
    # One user's candidates: their own half-life.
    half_life = (settings.half_life_days(candidates[0].namespace[1]) if candidates
                 else settings.summary_half_life_days)
    pinned: list[tuple[Candidate, Facts]] = []
    kept: list[tuple[Candidate, Facts]] = []
    for c in candidates:
        facts = Facts.of(c.value)
        if search_floor is not None and _MATCHING_SOURCES.isdisjoint(c.ranks) and (
                c.similarity is None or c.similarity < search_floor):
            continue
        if facts.pinned:
            pinned.append((c, facts))
            continue
        floor = (
            settings.episodic_similarity_floor
            if facts.layer == Layer.EPISODIC
            else settings.similarity_floor
        )
        lexical = any(s in c.ranks for s in _LEXICAL_SOURCES)
        if not lexical and (c.similarity is None or c.similarity < floor):
            continue
        kept.append((c, facts))
    fused = rrf_scores([c for c, _ in kept], settings.rrf_k, weights)
    last_place = 1.0 / (settings.rrf_k + settings.candidates_per_source)
    spread = link_scores(fused, links or {}, weights["link"], last_place)
    total = {key: fused[key] + spread.get(key, 0.0) for key in fused}
    if settings.subject_focus < 1 and names:
        total = subject_focus(total, {c.key: subject_of(c.value) for c, _ in kept}, names,
                              settings.subject_focus)
    top = max(total.values(), default=0.0) or 1.0
    scored: list[tuple[float, str, Candidate, Facts]] = []
    rest: dict[str, tuple[float, float]] = {}  # the composite without relevance; factor
    for c, f in kept:
        relevance = total[c.key] / top
        recency = math.exp(-_days(now, f.occurred_at) / 30.0)
        others = (w.salience * f.salience + w.urgency * urgency(f, now)
                  + w.confidence * f.confidence + w.recency * recency)
        composite = w.relevance * relevance + others
        # An agent with no history has trust 0.5.
        configured = (trust or {}).get(f.agent_id or "", 0.5)
        factor = decay_weight(f, now, half_life_days=half_life) * (
            configured if learned is None or not f.agent_id
            else learned.of(f.agent_id, c.value.get("kind"), configured))
        scored.append((composite * factor, c.key, c, f))
        rest[c.key] = (others, factor)
    scored.sort(key=lambda t: (-t[0], t[1]))
    if query is not None and settings.rerank_depth > 1 and len(scored) > 1:
        scored = _reranked(scored, settings, total, top, query, rest)
    best = scored[:limit]
    open_questions = [t for t in scored[limit:] if "open_question" in t[2].ranks]
    chosen = best + open_questions[: settings.open_question_limit]
    # Open loops due now and the standing preferences come back whatever the question
    # (the store bounds how many).
    taken = {t[1] for t in chosen}
    chosen += [t for t in scored[limit:]
               if not UNASKED_SOURCES.isdisjoint(t[2].ranks) and t[1] not in taken]

    def recalled(c: Candidate, f: Facts, score: float) -> Recalled:
        decayed = not f.pinned and (
            decay_score(f, now, half_life_days=half_life) < settings.decay_flag_below
        )
        return Recalled(c.key, c.namespace, MemoryRecord.model_validate(c.value), score,
                        c.similarity, dict(c.ranks), decayed=decayed,
                        relevance=None if f.pinned else total[c.key] / top)

    # The pinned weight is part of the composite; pinned memories also bypass ranking.
    first = sorted(((w.pinned + f.salience * w.salience, c.key, c, f) for c, f in pinned),
                   key=lambda t: (-t[0], t[1]))
    return [recalled(c, f, score) for score, _, c, f in first + chosen]


def _reranked(scored: list[tuple[float, str, Candidate, Facts]], settings: MemorySettings,
              total: Mapping[str, float], top: float, query: RerankQuery,
              rest: Mapping[str, tuple[float, float]]
              ) -> list[tuple[float, str, Candidate, Facts]]:
    """``scored`` (best first) with its first ``rerank_depth`` reordered by the reranker.

    The reranker's probability that a memory answers the question, over the best one's,
    takes the place of the fused relevance in the composite; salience, urgency,
    confidence, recency, decay and trust weigh as before. Only the order within the
    reranked memories changes: the scores stay the list's, the best score to the first
    place, so a memory's score still says where it stands; equal composites keep the
    fused order. ``Recalled.relevance`` stays the fused one (the block's floor).
    """
    depth = min(settings.rerank_depth, len(scored))
    head = scored[:depth]
    items = [RerankItem(key, c.ranks, c.similarity, total[key] / top, subject_of(c.value),
                        str(c.value.get("content", "")), f.occurred_at)
             for _, key, c, f in head]
    model = load_reranker(settings.rerank_model)
    chance = [probability(s) for s in model.score(features(items, query))]
    best = max(chance) or 1.0
    share = [p / best for p in chance]
    w = settings.weights.relevance
    composite = [(w * share[n] + rest[key][0]) * rest[key][1]
                 for n, (_, key, _, _) in enumerate(head)]
    order = sorted(range(depth), key=lambda n: (-composite[n], n))
    return [(head[n][0], *head[i][1:]) for n, i in enumerate(order)] + scored[depth:]
