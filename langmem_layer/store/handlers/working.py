"""Store handlers for working memory: thread activity and the per-user message log.

Mixed into ``StoreCore``; like every handler they are
generators that yield requests and never do I/O themselves.
"""

from __future__ import annotations

from langmem_layer.sql import with_writes
from langmem_layer.sql import working as wsql
from langmem_layer.store import ops as mops
from langmem_layer.store.handlers.registry import Registry, handles, own_parts
from langmem_layer.store.plan import Binding, Handler, Query

__all__ = ["WorkingHandlers"]


class WorkingHandlers(Registry):
    """Handlers for the working-memory ops of ``langmem_layer.store.ops``."""

    @handles(mops.TouchThreadOp)
    def _touch_thread(self, op: mops.TouchThreadOp) -> Handler:
        yield Query(*wsql.touch_thread(op.user_id, op.thread_id, profile=op.profile,
                                       agent_id=op.agent_id, now=op.now), last=True)

    @handles(mops.TurnStartOp)
    def _turn_start(self, op: mops.TurnStartOp) -> Handler:
        stamp, recent = op.stamp, op.recent
        own_parts(op, (stamp, recent))
        write = wsql.touch_thread(stamp.user_id, stamp.thread_id, profile=stamp.profile,
                                  agent_id=stamp.agent_id, now=stamp.now)
        if recent.limit <= 0:
            yield Query(*write, last=True)
            return []
        # The stamp writes the threads table, the history reads the message log and
        # the memories: one statement does both.
        rows = yield Query(*with_writes(wsql.recent_messages(
            recent.user_id, profile=recent.profile, since=recent.since, limit=recent.limit,
            exclude_thread_id=recent.exclude_thread_id), write), last=True)
        return [mops.LoggedMessage(**r) for r in reversed(rows)]

    @handles(mops.IdleThreadsOp)
    def _idle_threads(self, op: mops.IdleThreadsOp) -> Handler:
        rows = yield Query(*wsql.idle_threads(op.before, op.limit))
        return [mops.ThreadActivity(**r) for r in rows]

    @handles(mops.CloseThreadOp)
    def _close_thread(self, op: mops.CloseThreadOp) -> Handler:
        rows = yield Query(*wsql.close_thread(op.user_id, op.thread_id,
                                              idle_before=op.idle_before, now=op.now))
        return bool(rows)

    @handles(mops.LogMessagesOp)
    def _log_messages(self, op: mops.LogMessagesOp) -> Handler:
        if not op.messages:
            return 0
        rows = yield Query(*wsql.log_messages(op.user_id, op.thread_id, profile=op.profile,
                                              messages=op.messages, at=op.at), last=True)
        return len(rows)

    @handles(mops.RecentMessagesOp)
    def _recent_messages(self, op: mops.RecentMessagesOp) -> Handler:
        if op.limit <= 0:
            return []
        rows = yield Query(*wsql.recent_messages(
            op.user_id, profile=op.profile, since=op.since, limit=op.limit,
            exclude_thread_id=op.exclude_thread_id))
        return [mops.LoggedMessage(**r) for r in reversed(rows)]

    @handles(mops.PurgeMessagesOp)
    def _purge_messages(self, op: mops.PurgeMessagesOp) -> Handler:
        users = yield Query(*wsql.users_with_expired_messages(op.before))
        total = 0
        for row in users:
            user = Binding(row["user_id"])
            deleted = yield Query(*wsql.purge_messages(row["user_id"], op.before), bind=user)
            yield Query(*wsql.purge_closed_threads(row["user_id"], op.before), bind=user)
            total += int(deleted[0]["deleted"])
        return total

    @handles(mops.ClearMessagesOp)
    def _clear_messages(self, op: mops.ClearMessagesOp) -> Handler:
        rows = yield Query(*wsql.clear_messages(op.user_id, op.thread_id))
        return int(rows[0]["deleted"])
