"""Store operations of the write path: the extraction queue, exactly-once apply and the
ingest log.

Re-exported by ``langmem_layer.store.ops``, where callers import them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.store.ops.memory import LockUserWritesOp, TouchOp
from langmem_layer.store.ops.working import LogMessagesOp

__all__ = [
    "ApplyOnceOp",
    "ClaimOp",
    "CompleteEntryOp",
    "EnqueueOp",
    "FailEntryOp",
    "IngestLogEntry",
    "IngestLogOp",
    "LogIngestOp",
    "MarkAppliedOp",
    "ParkEntryOp",
    "ParkedEntriesOp",
    "ParkedEntry",
    "PendingOp",
    "QueueEntry",
    "RecordTurnOp",
    "RenewLeaseOp",
    "TurnRecorded",
]


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


class RecordTurnOp(NamedTuple):
    """A finished turn's writes in one statement (result: ``TurnRecorded``):
    ``enqueue``, the turn's messages logged (``log``) and the memories recalled for it
    reinforced (``touch``). Every part is ``user_id``'s. With ``lease_seconds`` the
    entry is leased as it is queued, for the process that queued it to extract without
    claiming it.
    """

    user_id: str
    enqueue: EnqueueOp
    log: LogMessagesOp | None = None
    touch: TouchOp | None = None
    lease_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class TurnRecorded:
    """What a ``RecordTurnOp`` did.

    Attributes:
        entry_id: The queue entry, or None when the turn was queued before.
        leased: The entry, leased (with ``lease_seconds``; None otherwise or when
            queued before).
        others: Whether the user had other entries ready to claim (unknown without a
            lease: True).
    """

    entry_id: int | None
    leased: QueueEntry | None = None
    others: bool = True


class ClaimOp(NamedTuple):
    """Lease ready queue entries (result: ``list[QueueEntry]``): of ``user_id``, else of
    ``users``, else of every user with work ready (found by a statement spanning users).
    """

    limit: int = 20
    lease_seconds: float = 300.0
    user_id: str | None = None
    now: datetime | None = None
    users: tuple[str, ...] = ()


class RenewLeaseOp(NamedTuple):
    """Extend a pass's leases on a user's entries it still holds (result: the ids renewed).

    ``held`` pairs each entry id with its claim's ``attempts`` (a fencing token: an
    entry another worker claimed since is not renewed).
    """

    user_id: str
    held: tuple[tuple[int, int], ...]
    lease_seconds: float
    now: datetime | None = None


class CompleteEntryOp(NamedTuple):
    """Mark a queue entry done (result: None)."""

    user_id: str
    entry_id: int
    now: datetime | None = None


class FailEntryOp(NamedTuple):
    """Release a queue entry after a failure, to retry at ``retry_at`` (result: None).

    With ``outage``, the failure was a service's (database, embedder), not the turn's:
    the attempt its lease counted is given back.
    """

    user_id: str
    entry_id: int
    error: str
    retry_at: datetime
    outage: bool = False


class PendingOp(NamedTuple):
    """A user's unfinished queue entries (result: ``list[dict]``)."""

    user_id: str
    thread_id: str | None = None


class ApplyOnceOp(NamedTuple):
    """Run ``ops`` unless ``op_id`` was applied before (result: list of results or None).

    The check and the ops share the batch's transaction, so an operation is applied
    exactly once however often its batch is replayed. ``lock``: the user's write lock
    (put it on the batch's first op), taken by the check's statement before it checks.
    """

    user_id: str
    op_id: str
    ops: tuple[Any, ...]
    now: datetime | None = None
    lock: LockUserWritesOp | None = None


class MarkAppliedOp(NamedTuple):
    """Record ``op_id`` as applied, in the batch's transaction (result: None).

    The optimistic twin of ``ApplyOnceOp``: the ops it stands for follow it in the
    same batch and go out in the same round trip, since nothing waits for the check.
    If ``op_id`` was applied before, the batch fails with
    ``OperationAppliedError`` and is rolled back whole: run
    it again with the ops under ``ApplyOnceOp``, which skips what was applied. For
    operations that are rarely replayed (a turn's, replayed only after a crash), one
    round trip fewer. ``lock``: the user's write lock, taken by the same statement
    before it records (put it on the batch's first op).
    """

    user_id: str
    op_id: str
    now: datetime | None = None
    lock: LockUserWritesOp | None = None


class LogIngestOp(NamedTuple):
    """Keep one ingest's gate decisions (result: None); with ``complete``, also mark that
    queue entry done, in the same statement (as ``CompleteEntryOp``, at ``now``)."""

    user_id: str
    decisions: list[dict[str, Any]]
    at: datetime
    thread_id: str | None = None
    agent_id: str | None = None
    complete: int | None = None
    now: datetime | None = None


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


class ParkEntryOp(NamedTuple):
    """Stop retrying a queue entry: it keeps its messages and its error and is listed by
    ``PendingOp`` and ``ParkedEntriesOp`` (result: None)."""

    user_id: str
    entry_id: int
    error: str
    now: datetime


class ParkedEntriesOp(NamedTuple):
    """A user's parked queue entries, with their messages (result: ``list[ParkedEntry]``)."""

    user_id: str
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class ParkedEntry:
    """A queue entry no longer retried: extraction kept failing, or its input was invalid."""

    user_id: str
    id: int
    thread_id: str | None
    messages: list[dict[str, Any]]
    turn_at: datetime
    attempts: int
    parked_at: datetime
    last_error: str | None
