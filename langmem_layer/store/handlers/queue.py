"""Store handlers for the write path: the extraction queue, exactly-once apply, ingest log.

Mixed into ``StoreCore``; like every handler they are
generators that yield requests and never do I/O themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from langmem_layer.sql import Sql, with_writes
from langmem_layer.sql import memory as msql
from langmem_layer.sql import queue as qsql
from langmem_layer.store import ops as mops
from langmem_layer.store.handlers.registry import Registry, handles, own_parts
from langmem_layer.store.ops.working import log_messages
from langmem_layer.store.plan import Binding, Handler, Plan, Query, Step

__all__ = ["QueueHandlers", "combine"]


def combine(handlers: list[Handler], *, gate: Query | None = None,
            proceed: Callable[[list[dict[str, Any]]], bool] = bool) -> Handler:
    """Run several handlers as one: their embeddings in one request, then their queries.

    With ``gate``, the gate query runs after the embeddings and before any other
    query; when ``proceed`` says no to its rows (by default: when it returns no row)
    the handlers are abandoned and the result is None.
    """
    plan = Plan([Step([i], h) for i, h in enumerate(handlers)], len(handlers), None, None)
    # One request for all inner handlers, with each document's owner, so the outer
    # plan can serve it from the per-user embedding cache.
    request = plan.embedding_request()
    doc_vecs, query_vecs = (yield request) if request is not None else ([], [])
    plan.deliver_embeddings(doc_vecs, query_vecs)
    if gate is not None:
        rows = yield gate
        if not proceed(rows):
            for step in plan.steps:
                step.gen.close()
            return None
    while (query := plan.next_query()) is not None:
        # An inner handler's last statement is this one's only if no other follows it.
        plan.deliver_rows((yield query._replace(last=query.last and plan.at_last_step())))
    return plan.results()


class QueueHandlers(Registry):
    """Handlers for queue and apply ops; expects ``now()`` from the core."""

    now: Callable[[], datetime]
    handler_at: Callable[[Any, datetime | None], Handler]

    @handles(mops.ApplyOnceOp)
    def _apply_once(self, op: mops.ApplyOnceOp) -> Handler:
        gate = Query(*self._mark_applied_sql(op))
        return (yield from combine([self.handler_at(o, op.now) for o in op.ops], gate=gate))

    @handles(mops.MarkAppliedOp)
    def _mark_applied(self, op: mops.MarkAppliedOp) -> Handler:
        yield Query(*self._mark_applied_sql(op, strict=True), last=True)

    def _mark_applied_sql(self, op: mops.ApplyOnceOp | mops.MarkAppliedOp, *,
                          strict: bool = False) -> Sql:
        """The record of ``op``'s id, taking its write lock first if it carries one."""
        locks = None
        if op.lock is not None:
            own_parts(op, [op.lock], "the write lock")
            locks = msql.lock_user_writes(op.lock.user_id, op.lock.thread_id)
        return qsql.mark_applied(op.user_id, op.op_id, op.now or self.now(), locks=locks,
                                 strict=strict)

    @handles(mops.EnqueueOp)
    def _enqueue(self, op: mops.EnqueueOp) -> Handler:
        rows = yield Query(*self._enqueue_sql(op), last=True)
        return rows[0]["id"] if rows else None

    def _enqueue_sql(self, op: mops.EnqueueOp, lease_seconds: float | None = None
                     ) -> tuple[str, dict[str, Any]]:
        now = op.now or self.now()
        return qsql.enqueue(
            op.user_id, op.dedupe_key, profile=op.profile, thread_id=op.thread_id,
            agent_id=op.agent_id, messages_json=json.dumps(op.messages), turn_at=op.turn_at,
            now=now, lease_until=(None if lease_seconds is None
                                  else now + timedelta(seconds=lease_seconds)),
        )

    @handles(mops.RecordTurnOp)
    def _record_turn(self, op: mops.RecordTurnOp) -> Handler:
        own_parts(op, (op.enqueue, op.log, op.touch))
        writes = []
        if op.log is not None and op.log.messages:
            log = op.log
            writes.append(log_messages(log.user_id, log.thread_id, profile=log.profile,
                                       messages=log.messages, at=log.at))
        if op.touch is not None and op.touch.keys:
            touch = op.touch
            writes.append(msql.touch(touch.user_id, touch.keys, touch.now or self.now()))
        # The queue, the message log and the memories: three tables, so no part reads
        # what another writes, and one statement does all three.
        rows = yield Query(*with_writes(self._enqueue_sql(op.enqueue, op.lease_seconds),
                                        *writes), last=True)
        if not rows:
            return mops.TurnRecorded(None)
        if op.lease_seconds is None:
            return mops.TurnRecorded(rows[0]["id"])
        row = dict(rows[0])
        others = bool(row.pop("others"))
        return mops.TurnRecorded(row["id"], mops.QueueEntry(**row), others)

    @handles(mops.ClaimOp)
    def _claim(self, op: mops.ClaimOp) -> Handler:
        now = op.now or self.now()
        lease = now + timedelta(seconds=op.lease_seconds)
        if op.user_id is not None:
            users = [op.user_id]
        elif op.users:
            users = list(op.users)
        else:
            users = [r["user_id"] for r in (yield Query(*qsql.claimable_users(now, op.limit)))]
        entries: list[mops.QueueEntry] = []
        for user in users:
            if len(entries) >= op.limit:
                break
            rows = yield Query(*qsql.claim(user, now=now, lease_until=lease,
                                           limit=op.limit - len(entries)), bind=Binding(user))
            entries.extend(mops.QueueEntry(**r) for r in sorted(rows, key=lambda r: r["id"]))
        return entries

    @handles(mops.RenewLeaseOp)
    def _renew(self, op: mops.RenewLeaseOp) -> Handler:
        lease = (op.now or self.now()) + timedelta(seconds=op.lease_seconds)
        rows = yield Query(*qsql.renew(op.user_id, op.held, lease_until=lease))
        return [r["id"] for r in rows]

    @handles(mops.CompleteEntryOp)
    def _complete(self, op: mops.CompleteEntryOp) -> Handler:
        yield Query(*qsql.complete(op.user_id, op.entry_id, op.now or self.now()), last=True)

    @handles(mops.FailEntryOp)
    def _fail(self, op: mops.FailEntryOp) -> Handler:
        yield Query(*qsql.fail(op.user_id, op.entry_id, error=op.error, retry_at=op.retry_at,
                               outage=op.outage))

    @handles(mops.ParkEntryOp)
    def _park(self, op: mops.ParkEntryOp) -> Handler:
        yield Query(*qsql.park(op.user_id, op.entry_id, error=op.error, now=op.now))

    @handles(mops.ParkedEntriesOp)
    def _parked(self, op: mops.ParkedEntriesOp) -> Handler:
        rows = yield Query(*qsql.parked(op.user_id, op.thread_id))
        return [mops.ParkedEntry(**r) for r in rows]

    @handles(mops.PendingOp)
    def _pending(self, op: mops.PendingOp) -> Handler:
        return (yield Query(*qsql.pending(op.user_id, op.thread_id)))

    @handles(mops.LogIngestOp)
    def _log_ingest(self, op: mops.LogIngestOp) -> Handler:
        if op.complete is not None:
            yield Query(*qsql.complete_and_log(
                op.user_id, op.complete, op.now or self.now(), at=op.at,
                thread_id=op.thread_id, agent_id=op.agent_id,
                decisions_json=json.dumps(op.decisions)), last=True)
            return
        yield Query(*qsql.write_ingest_log(
            op.user_id, at=op.at, thread_id=op.thread_id, agent_id=op.agent_id,
            decisions_json=json.dumps(op.decisions),
        ), last=True)

    @handles(mops.IngestLogOp)
    def _ingest_log(self, op: mops.IngestLogOp) -> Handler:
        rows = yield Query(*qsql.ingest_log(op.user_id, op.limit, op.thread_id))
        return [mops.IngestLogEntry(**r) for r in rows]
