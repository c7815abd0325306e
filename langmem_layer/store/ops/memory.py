"""Memory-specific store operations and their results.

The store implements only ``batch`` / ``abatch``, like LangGraph's own stores; these
NamedTuple ops travel through ``batch`` next to LangGraph's GetOp, PutOp, SearchOp
and ListNamespacesOp. Every op names its user: none reaches across tenants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

# Ops of working memory and of a memory's life live in their own modules, re-exported
# here; the write path's (the queue, exactly-once apply) in ops.queue. Callers import
# every op from the package, langmem_layer.store.ops.
from langmem_layer.store.ops.erasure import DeleteUserOp, UserDeletion
from langmem_layer.store.ops.lifecycle import (
    LifecycleOp,
    MemoryHistoryOp,
    PurgeExpiredMemoriesOp,
    RecordOutcomeOp,
)
from langmem_layer.store.ops.reextraction import (
    FallbackTurn,
    FallbackTurnsOp,
    RecordFallbackOp,
    ResolveFallbackOp,
)
from langmem_layer.store.ops.trust import LearnedTrust
from langmem_layer.store.ops.working import (
    ClearMessagesOp,
    CloseThreadOp,
    IdleThreadsOp,
    LoggedMessage,
    LogMessagesOp,
    PurgeMessagesOp,
    RecentMessagesOp,
    ThreadActivity,
    TouchThreadOp,
    TurnStartOp,
)

__all__ = [
    "AddMemoryOp",
    "AddOutcome",
    "AsOfOp",
    "Candidate",
    "ClearMessagesOp",
    "CloseThreadOp",
    "DeleteMemoryOp",
    "DeleteUserOp",
    "ExportOp",
    "ExportedItem",
    "FallbackTurn",
    "FallbackTurnsOp",
    "FindMemoryOp",
    "IdleThreadsOp",
    "ImportOp",
    "IndexUserOp",
    "LargeUsersOp",
    "LifecycleOp",
    "Link",
    "LinkManyOp",
    "LinkOp",
    "LinkThreadTailOp",
    "LinksOp",
    "LockUserWritesOp",
    "LogMessagesOp",
    "LoggedMessage",
    "MatchOp",
    "MemoryHistoryOp",
    "PurgeEmbeddingCacheOp",
    "PurgeExpiredMemoriesOp",
    "PurgeMessagesOp",
    "RecallOp",
    "RecentMessagesOp",
    "RecordFallbackOp",
    "RecordOutcomeOp",
    "ReinforceOp",
    "ResolveFallbackOp",
    "SetStatusOp",
    "SummaryCandidatesOp",
    "SweepExpiredOp",
    "ThreadActivity",
    "TouchOp",
    "TouchThreadOp",
    "TurnReads",
    "TurnReadsOp",
    "TurnStartOp",
    "UserDeletion",
    "UserExport",
]


class RecallOp(NamedTuple):
    """Hybrid candidate retrieval for one user (result: ``list[Candidate]``).

    Attributes:
        user_id: The tenant.
        scopes: Third namespace labels to search: profile names and/or ``"identity"``.
        query: Text for vector and full-text search; ``None`` returns pinned only
            (plus reference matches when ``refs`` is given).
        refs: Normalised references for exact lookup.
        statuses: Statuses eligible for retrieval.
        per_source: Candidates taken from each strategy.
        now: Time for expiry checks; the store clock when ``None``.
        keyword: Ranking of the full-text strategy: ``"bm25"`` or ``"cover_density"``.
        window: ``(start, end)``: also find memories that occurred in this period
            (strategy ``"time"``).
        link_types: Walk one hop over these link types from the best hits of the
            other strategies (strategy ``"link"``); empty: no walk.
        link_seeds: How many of each strategy's best hits seed the walk.
        seed_min_similarity: A vector hit seeds the walk only with this similarity.
        open_questions: Add up to this many open loops whose references overlap those
            of the best hits or ``refs`` (strategy ``"open_question"``).
        ref_max_share: References carried by more than this share of the user's
            memories are ignored by the reference strategy.
        due_window: ``(start, end)``: add up to ``due_limit`` open loops due in this
            period, whatever the query (strategy ``"due"``).
        due_limit: How many due open loops at most (0: none).
        standing: How many preferences on how to answer (policy ``adapt``) join the
            candidates whatever the query (strategy ``"standing"``; 0: none).
        max_terms: The full-text search ORs at most this many distinct words of
            ``query`` (its longest; see ``langmem_layer.sql.recall.cap_terms``).
        embed_text: The text embedded for the vector strategy (``None``: ``query``).
    """

    user_id: str
    scopes: tuple[str, ...]
    query: str | None = None
    refs: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ("active",)
    per_source: int = 40
    now: datetime | None = None
    keyword: str = "bm25"
    window: tuple[datetime, datetime] | None = None
    link_types: tuple[str, ...] = ()
    link_seeds: int = 10
    seed_min_similarity: float | None = None
    open_questions: int = 0
    ref_max_share: float = 1.0
    due_window: tuple[datetime, datetime] | None = None
    due_limit: int = 0
    max_terms: int = 128
    standing: int = 0
    embed_text: str | None = None


class MatchOp(NamedTuple):
    """One page of a user's items that match a query by recall's relevance floor, best
    first (result: ``list[SearchItem]``, ``score`` the cosine similarity): a word shared
    with the query, or a similarity of at least ``floor`` (``episodic_floor`` for an
    episodic memory). The memory panel's search (``langmem_layer.control.browse``).

    Attributes:
        user_id: The tenant (``namespace_prefix`` must be theirs).
        namespace_prefix: The user's namespace, or one scope of it.
        filter: A search filter on the value, as ``SearchOp``'s.
        query: The text searched for.
        floor: The similarity a vector-only match needs.
        episodic_floor: The same for an episodic memory.
        limit: Page size.
        offset: Matches to skip.
    """

    user_id: str
    namespace_prefix: tuple[str, ...]
    filter: dict[str, Any]
    query: str
    floor: float
    episodic_floor: float
    limit: int = 50
    offset: int = 0


class TouchOp(NamedTuple):
    """Reinforce retrieved memories: access count + 1, last accessed = now (result: None)."""

    user_id: str
    keys: tuple[str, ...]
    now: datetime | None = None


class SetStatusOp(NamedTuple):
    """Move memories to a status, appending a history entry with ``reason`` in the same
    statement (result: ``list[str]`` of keys that changed). With ``close_loop`` an open
    loop among them is also closed (``loop_status`` ``"closed"``)."""

    user_id: str
    keys: tuple[str, ...]
    status: str
    now: datetime | None = None
    reason: str = ""
    close_loop: bool = False


class FindMemoryOp(NamedTuple):
    """One typed memory by id, in any scope (result: ``Item | None``)."""

    user_id: str
    key: str


class DeleteMemoryOp(NamedTuple):
    """Delete a memory with its embeddings and links, atomically (result: bool)."""

    user_id: str
    key: str


class LinkOp(NamedTuple):
    """Record a typed link between two memories (result: None)."""

    user_id: str
    src_key: str
    link_type: str
    dst_key: str
    now: datetime | None = None
    metadata: dict[str, Any] | None = None


class LinkManyOp(NamedTuple):
    """Record many typed links of one user in one statement (result: None).

    ``links`` holds ``(src_key, link_type, dst_key)`` triples; a link already there (or
    given twice) is a no-op, as with ``LinkOp``.
    """

    user_id: str
    links: tuple[tuple[str, str, str], ...]
    now: datetime | None = None


class LinksOp(NamedTuple):
    """Links touching any of ``keys`` (result: ``list[Link]``)."""

    user_id: str
    keys: tuple[str, ...]


class ExportOp(NamedTuple):
    """Everything a user has: items and links (result: ``UserExport``)."""

    user_id: str


class ImportOp(NamedTuple):
    """Restore a ``UserExport`` into the store, re-embedding (result: int items)."""

    user_id: str
    data: UserExport


class PurgeEmbeddingCacheOp(NamedTuple):
    """Delete embedding-cache entries too old to be used, user by user (result: int)."""

    now: datetime | None = None


class LargeUsersOp(NamedTuple):
    """Users with at least ``threshold`` vectors and no ANN index (result: [(user, n)])."""

    threshold: int


class IndexUserOp(NamedTuple):
    """Build one user's HNSW index over their vectors (result: None)."""

    user_id: str
    now: datetime | None = None


class SweepExpiredOp(NamedTuple):
    """Delete items whose TTL or expiry has passed, user by user (result: int deleted)."""

    now: datetime | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory found by at least one retrieval strategy, before ranking.

    ``ranks`` maps strategy (``"vector"``, ``"keyword"``, ``"ref"``, ``"pinned"``) to
    the memory's 0-based rank in that strategy's list. ``linked``: the keys of the
    other candidates it is linked to (either direction, the walk's link types), when
    the recall statement read them (the link walk found something); ``None`` when not
    read.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    similarity: float | None
    ranks: dict[str, int] = field(default_factory=dict)
    linked: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Link:
    """A typed link ``src --link_type--> dst``."""

    src_key: str
    link_type: str
    dst_key: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExportedItem:
    """One stored item as exported, with its original timestamps."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    is_memory: bool
    created_at: datetime
    updated_at: datetime
    ttl_minutes: float | None = None


@dataclass(frozen=True, slots=True)
class UserExport:
    """All of one user's data: items and links."""

    user_id: str
    items: list[ExportedItem]
    links: list[Link]


# -- write-path integrity: atomic counters, serialised apply, parked queue entries ---------


class ReinforceOp(NamedTuple):
    """Seen again: confidence + ``confidence_step`` (at most 1), reinforcement count + 1,
    last accessed = ``now``, in one UPDATE of the stored row (result: ``list[str]`` of
    keys reinforced), so concurrent reinforcements and touches are all counted."""

    user_id: str
    keys: tuple[str, ...]
    now: datetime
    confidence_step: float = 0.05


class AsOfOp(NamedTuple):
    """Run ``ops`` in the batch's transaction with their puts dated ``now`` (result: the
    list of their results).

    LangGraph's ``PutOp`` carries no time, so a memory written by a flow replayed with
    ``now=`` would otherwise be dated by the store's clock.
    """

    user_id: str
    ops: tuple[Any, ...]
    now: datetime


class SummaryCandidatesOp(NamedTuple):
    """A user's active temporal summaries in ``namespace`` (or below) whose period
    overlaps ``start`` .. ``end`` (UTC ISO text), newest first (result: ``list[Item]``):
    the narrative arc's candidates, read through an index of summaries only."""

    user_id: str
    namespace: tuple[str, ...]
    start: str
    end: str
    limit: int = 12
    now: datetime | None = None


class TurnReadsOp(NamedTuple):
    """The reads a turn adds to its recall, in one statement (result: ``TurnReads``):
    the user's learned trust and ``summaries``. ``summaries`` is ``user_id``'s."""

    user_id: str
    summaries: SummaryCandidatesOp


@dataclass
class TurnReads:
    """What a ``TurnReadsOp`` read."""

    learned: LearnedTrust
    summaries: list[Any]


class LockUserWritesOp(NamedTuple):
    """Wait until no other transaction applies memories for this user, and hold that
    until this batch's transaction ends (result: None). Put it first in the batch.

    With ``thread_id`` it also takes the lock ``LinkThreadTailOp`` takes for that
    thread, in the same statement; the batch's links of that thread then say
    ``locked=True``.
    """

    user_id: str
    thread_id: str | None = None


class AddMemoryOp(NamedTuple):
    """Write a new memory unless its scope holds an active memory with the same content
    hash; then reinforce that one instead (result: ``AddOutcome``).

    Run under ``LockUserWritesOp``, the check sees every memory committed by a
    concurrent writer. ``then`` (links, status changes) runs only if the memory is
    written.
    """

    user_id: str
    put: Any  # langgraph.store.base.PutOp of a typed memory
    then: tuple[Any, ...] = ()
    now: datetime | None = None
    confidence_step: float = 0.05


@dataclass(frozen=True, slots=True)
class AddOutcome:
    """What an ``AddMemoryOp`` did: ``key`` written (``created``) or reinforced."""

    key: str
    created: bool


class LinkThreadTailOp(NamedTuple):
    """Link memory ``key`` (``elaborates``) to the last memory of its thread, the tail read
    and the link written in one step under a per-(user, thread) lock, so concurrent
    writers of a thread make one chain (result: the key linked to, or None)."""

    user_id: str
    key: str
    thread_id: str
    now: datetime | None = None
    #: The batch took the thread's lock already (``LockUserWritesOp(thread_id=...)``).
    locked: bool = False

