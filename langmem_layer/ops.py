"""Memory-specific store operations and their results.

The store implements only ``batch`` / ``abatch``, like LangGraph's own stores; these
NamedTuple ops travel through ``batch`` next to LangGraph's GetOp, PutOp, SearchOp
and ListNamespacesOp. Every op names its user: none reaches across tenants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

__all__ = [
    "ApplyOnceOp",
    "Candidate",
    "ClaimOp",
    "CompleteEntryOp",
    "DeleteMemoryOp",
    "EnqueueOp",
    "ExportOp",
    "ExportedItem",
    "FailEntryOp",
    "FindMemoryOp",
    "ImportOp",
    "IngestLogEntry",
    "IngestLogOp",
    "Link",
    "LinkOp",
    "LinksOp",
    "LogIngestOp",
    "PendingOp",
    "PurgeEmbeddingCacheOp",
    "QueueEntry",
    "RecallOp",
    "SetStatusOp",
    "SweepExpiredOp",
    "TouchOp",
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
    """

    user_id: str
    scopes: tuple[str, ...]
    query: str | None = None
    refs: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ("active",)
    per_source: int = 40
    now: datetime | None = None


class TouchOp(NamedTuple):
    """Reinforce retrieved memories: access count + 1, last accessed = now (result: None)."""

    user_id: str
    keys: tuple[str, ...]
    now: datetime | None = None


class SetStatusOp(NamedTuple):
    """Move memories to a status (result: ``list[str]`` of keys that changed)."""

    user_id: str
    keys: tuple[str, ...]
    status: str
    now: datetime | None = None


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


class LinksOp(NamedTuple):
    """Links touching any of ``keys`` (result: ``list[Link]``)."""

    user_id: str
    keys: tuple[str, ...]


class ExportOp(NamedTuple):
    """Everything a user has: items and links (result: ``UserExport``)."""

    user_id: str


class ImportOp(NamedTuple):
    """Restore a :class:`UserExport` into the store, re-embedding (result: int items)."""

    user_id: str
    data: UserExport


class PurgeEmbeddingCacheOp(NamedTuple):
    """Delete embedding-cache entries too old to be used, user by user (result: int)."""

    now: datetime | None = None


class SweepExpiredOp(NamedTuple):
    """Delete items whose TTL or expiry has passed, user by user (result: int deleted)."""

    now: datetime | None = None


class EnqueueOp(NamedTuple):
    """Queue a turn for extraction, once per ``dedupe_key`` (result: entry id or None)."""

    user_id: str
    dedupe_key: str
    profile: str
    messages: list[dict[str, Any]]
    turn_at: datetime
    thread_id: str | None = None
    agent_id: str | None = None
    now: datetime | None = None


class ClaimOp(NamedTuple):
    """Lease ready queue entries, all users or one (result: ``list[QueueEntry]``)."""

    limit: int = 20
    lease_seconds: float = 300.0
    user_id: str | None = None
    now: datetime | None = None


class CompleteEntryOp(NamedTuple):
    """Mark a queue entry done (result: None)."""

    user_id: str
    entry_id: int
    now: datetime | None = None


class FailEntryOp(NamedTuple):
    """Release a queue entry after a failure, to retry at ``retry_at`` (result: None)."""

    user_id: str
    entry_id: int
    error: str
    retry_at: datetime


class PendingOp(NamedTuple):
    """A user's unfinished queue entries (result: ``list[dict]``)."""

    user_id: str
    thread_id: str | None = None


class ApplyOnceOp(NamedTuple):
    """Run ``ops`` unless ``op_id`` was applied before (result: list of results or None).

    The check and the ops share the batch's transaction, so an operation is applied
    exactly once however often its batch is replayed.
    """

    user_id: str
    op_id: str
    ops: tuple[Any, ...]
    now: datetime | None = None


class LogIngestOp(NamedTuple):
    """Keep one ingest's gate decisions (result: None)."""

    user_id: str
    decisions: list[dict[str, Any]]
    at: datetime
    thread_id: str | None = None
    agent_id: str | None = None


class IngestLogOp(NamedTuple):
    """A user's most recent ingest decisions (result: ``list[IngestLogEntry]``)."""

    user_id: str
    limit: int = 20
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class QueueEntry:
    """A leased turn waiting for extraction."""

    user_id: str
    id: int
    profile: str
    thread_id: str | None
    agent_id: str | None
    messages: list[dict[str, Any]]
    turn_at: datetime
    attempts: int


@dataclass(frozen=True, slots=True)
class IngestLogEntry:
    """The decisions of one ingest, as kept in the database."""

    id: int
    at: datetime
    thread_id: str | None
    agent_id: str | None
    decisions: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory found by at least one retrieval strategy, before ranking.

    ``ranks`` maps strategy (``"vector"``, ``"keyword"``, ``"ref"``, ``"pinned"``) to
    the memory's 0-based rank in that strategy's list.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    similarity: float | None
    ranks: dict[str, int] = field(default_factory=dict)


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
