"""Handlers of the ops that erase a user and keep turns for re-extraction.

Mixed into ``StoreCore``; like every handler they are
generators that yield requests and never do I/O themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from langmem_layer.sql import reextract as rsql
from langmem_layer.sql import users as usql
from langmem_layer.store import ops as mops
from langmem_layer.store.handlers.registry import Registry, handles
from langmem_layer.store.plan import Handler, Query

__all__ = ["UserHandlers"]


class UserHandlers(Registry):
    """Handlers of ``DeleteUserOp`` and the fallback ops."""

    now: Callable[[], datetime]
    _index_dims: dict[str, int | None]

    @handles(mops.DeleteUserOp)
    def _delete_user(self, op: mops.DeleteUserOp) -> Handler:
        # The user's own ANN indexes name the user in their predicates: dropped too.
        rows = yield Query(*usql.user_index_names(op.user_id))
        dropped = [r["index_name"] for r in rows]
        self._index_dims.pop(op.user_id, None)
        for name in dropped:
            yield Query(*usql.drop_index(name))
            yield Query(*usql.drop_index(name + "_kw"))
        counts: dict[str, int] = {}
        for table in usql.USER_TABLES:
            if op.keep_keys and table == usql.KEYS_TABLE:
                continue
            (row,) = yield Query(*usql.delete_user_rows(table, op.user_id))
            counts[table] = int(row["deleted"])
        return mops.UserDeletion(op.user_id, counts, dropped)

    @handles(mops.RecordFallbackOp)
    def _record_fallback(self, op: mops.RecordFallbackOp) -> Handler:
        yield Query(*rsql.record_fallback(
            op.user_id, op.turn_key, profile=op.profile, thread_id=op.thread_id,
            agent_id=op.agent_id, messages=op.messages, turn_at=op.turn_at,
            extractor=op.extractor, now=op.now or self.now()))

    @handles(mops.FallbackTurnsOp)
    def _fallback_turns(self, op: mops.FallbackTurnsOp) -> Handler:
        rows = yield Query(*rsql.fallback_turns(op.user_id, op.limit))
        return [mops.FallbackTurn(**r) for r in rows]

    @handles(mops.ResolveFallbackOp)
    def _resolve_fallback(self, op: mops.ResolveFallbackOp) -> Handler:
        rows = yield Query(*rsql.resolve_fallback(op.user_id, op.turn_key, op.attempts))
        return bool(rows)
