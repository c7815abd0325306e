"""The write path's store operations, with their handlers: the extraction queue,
exactly-once apply and the ingest log.

Re-exported by ``langmem_layer.store.ops``, where callers import them. Their SQL stays
in ``langmem_layer.sql.queue_statements``: the server's metrics (``backlog``) and the store's
error translation (``APPLIED_KEY``) use it too, and the builders with these ops and
handlers would pass the 600 lines a module may hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from langmem_layer.sql import queue_statements as qsql
from langmem_layer.store.ops.dispatch import Context, operation, own_parts
from langmem_layer.store.ops.memory import LockUserWritesOp, TouchOp, lock_user_writes, touch
from langmem_layer.store.ops.working import LogMessagesOp, log_messages
from langmem_layer.store.plan import Binding, Handler, Query, combine, writing

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


# -- handlers -----------------------------------------------------------------------------


def _apply_once(ctx: Context, op: ApplyOnceOp) -> Handler:
    gate = _mark_applied_query(ctx, op)
    return (yield from combine([ctx.handler_at(o, op.now) for o in op.ops], gate=gate))


def _mark_applied(ctx: Context, op: MarkAppliedOp) -> Handler:
    yield _mark_applied_query(ctx, op, strict=True)._replace(last=True)


def _mark_applied_query(ctx: Context, op: ApplyOnceOp | MarkAppliedOp, *,
                        strict: bool = False) -> Query:
    """The record of ``op``'s id, taking its write lock first if it carries one: in the
    same statement, or (``Query.parts``) in a statement of its own right before, as
    Citus inserts the row a ``SELECT`` gives through the coordinator."""
    now = op.now or ctx.now()
    if op.lock is None:
        return Query(*qsql.mark_applied(op.user_id, op.op_id, now, strict=strict))
    own_parts(op, [op.lock], "the write lock")
    locks = lock_user_writes(op.lock.user_id, op.lock.thread_id)
    return Query(*qsql.mark_applied(op.user_id, op.op_id, now, locks=locks, strict=strict),
                 parts=(locks, qsql.mark_applied(op.user_id, op.op_id, now, strict=strict)))


def _enqueue(ctx: Context, op: EnqueueOp) -> Handler:
    rows = yield Query(*_enqueue_sql(ctx, op), last=True)
    return rows[0]["id"] if rows else None


def _enqueue_sql(ctx: Context, op: EnqueueOp, lease_seconds: float | None = None
                 ) -> tuple[str, dict[str, Any]]:
    now = op.now or ctx.now()
    return qsql.enqueue(
        op.user_id, op.dedupe_key, profile=op.profile, thread_id=op.thread_id,
        agent_id=op.agent_id, messages_json=json.dumps(op.messages), turn_at=op.turn_at,
        now=now, lease_until=(None if lease_seconds is None
                              else now + timedelta(seconds=lease_seconds)),
    )


def _record_turn(ctx: Context, op: RecordTurnOp) -> Handler:
    own_parts(op, (op.enqueue, op.log, op.touch))
    writes = []
    if op.log is not None and op.log.messages:
        log = op.log
        writes.append(log_messages(log.user_id, log.thread_id, profile=log.profile,
                                   messages=log.messages, at=log.at))
    if op.touch is not None and op.touch.keys:
        seen = op.touch
        writes.append(touch(seen.user_id, seen.keys, seen.now or ctx.now()))
    # The queue, the message log and the memories: three tables, so no part reads
    # what another writes, and one statement does all three.
    rows = yield writing(_enqueue_sql(ctx, op.enqueue, op.lease_seconds), *writes,
                         last=True)
    if not rows:
        return TurnRecorded(None)
    if op.lease_seconds is None:
        return TurnRecorded(rows[0]["id"])
    row = dict(rows[0])
    others = bool(row.pop("others"))
    return TurnRecorded(row["id"], QueueEntry(**row), others)


def _claim(ctx: Context, op: ClaimOp) -> Handler:
    now = op.now or ctx.now()
    lease = now + timedelta(seconds=op.lease_seconds)
    if op.user_id is not None:
        users = [op.user_id]
    elif op.users:
        users = list(op.users)
    else:
        users = [r["user_id"] for r in (yield Query(*qsql.claimable_users(now, op.limit)))]
    entries: list[QueueEntry] = []
    for user in users:
        if len(entries) >= op.limit:
            break
        rows = yield Query(*qsql.claim(user, now=now, lease_until=lease,
                                       limit=op.limit - len(entries)), bind=Binding(user))
        entries.extend(QueueEntry(**r) for r in sorted(rows, key=lambda r: r["id"]))
    return entries


def _renew(ctx: Context, op: RenewLeaseOp) -> Handler:
    lease = (op.now or ctx.now()) + timedelta(seconds=op.lease_seconds)
    rows = yield Query(*qsql.renew(op.user_id, op.held, lease_until=lease))
    return [r["id"] for r in rows]


def _complete(ctx: Context, op: CompleteEntryOp) -> Handler:
    yield Query(*qsql.complete(op.user_id, op.entry_id, op.now or ctx.now()), last=True)


def _fail(ctx: Context, op: FailEntryOp) -> Handler:
    yield Query(*qsql.fail(op.user_id, op.entry_id, error=op.error, retry_at=op.retry_at,
                           outage=op.outage))


def _park(ctx: Context, op: ParkEntryOp) -> Handler:
    yield Query(*qsql.park(op.user_id, op.entry_id, error=op.error, now=op.now))


def _parked(ctx: Context, op: ParkedEntriesOp) -> Handler:
    rows = yield Query(*qsql.parked(op.user_id, op.thread_id))
    return [ParkedEntry(**r) for r in rows]


def _pending(ctx: Context, op: PendingOp) -> Handler:
    return (yield Query(*qsql.pending(op.user_id, op.thread_id)))


def _log_ingest(ctx: Context, op: LogIngestOp) -> Handler:
    log = qsql.write_ingest_log(op.user_id, at=op.at, thread_id=op.thread_id,
                                agent_id=op.agent_id, decisions_json=json.dumps(op.decisions))
    # The turn's queue entry is done and its decisions kept: different tables, so
    # neither part sees the other's change.
    done = () if op.complete is None else (
        qsql.complete(op.user_id, op.complete, op.now or ctx.now()),)
    yield writing(log, *done, last=True)


def _ingest_log(ctx: Context, op: IngestLogOp) -> Handler:
    rows = yield Query(*qsql.ingest_log(op.user_id, op.limit, op.thread_id))
    return [IngestLogEntry(**r) for r in rows]


# -- ops ----------------------------------------------------------------------------------


@operation(_enqueue, free=True)
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


@operation(_record_turn)
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


@operation(_claim)
class ClaimOp(NamedTuple):
    """Lease ready queue entries (result: ``list[QueueEntry]``): of ``user_id``, else of
    ``users``, else of every user with work ready (found by a statement spanning users).
    """

    limit: int = 20
    lease_seconds: float = 300.0
    user_id: str | None = None
    now: datetime | None = None
    users: tuple[str, ...] = ()


@operation(_renew)
class RenewLeaseOp(NamedTuple):
    """Extend a pass's leases on a user's entries it still holds (result: the ids renewed).

    ``held`` pairs each entry id with its claim's ``attempts`` (a fencing token: an
    entry another worker claimed since is not renewed).
    """

    user_id: str
    held: tuple[tuple[int, int], ...]
    lease_seconds: float
    now: datetime | None = None


@operation(_complete, free=True)
class CompleteEntryOp(NamedTuple):
    """Mark a queue entry done (result: None)."""

    user_id: str
    entry_id: int
    now: datetime | None = None


@operation(_fail)
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


@operation(_pending)
class PendingOp(NamedTuple):
    """A user's unfinished queue entries (result: ``list[dict]``)."""

    user_id: str
    thread_id: str | None = None


@operation(_apply_once)
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


@operation(_mark_applied)
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


@operation(_log_ingest, free=True)
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


@operation(_ingest_log)
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


@operation(_park)
class ParkEntryOp(NamedTuple):
    """Stop retrying a queue entry: it keeps its messages and its error and is listed by
    ``PendingOp`` and ``ParkedEntriesOp`` (result: None)."""

    user_id: str
    entry_id: int
    error: str
    now: datetime


@operation(_parked)
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
