"""Store handlers of the memory lifecycle: decay, transitions, purge,
history and habit outcomes.

Mixed into ``StoreCore``; like every handler they are
generators that yield requests and never do I/O themselves. The SQL is in
``langmem_layer.sql.lifecycle``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from langmem_layer.sql import lifecycle as lsql
from langmem_layer.store import ops as mops
from langmem_layer.store.handlers.registry import Registry, handles
from langmem_layer.store.plan import Handler, Query
from langmem_layer.types import HistoryEntry

__all__ = ["LifecycleHandlers"]


class LifecycleHandlers(Registry):
    """Handlers of the lifecycle ops of ``langmem_layer.store.ops``; expects
    ``now()`` from the core."""

    now: Callable[[], datetime]

    @handles(mops.LifecycleOp)
    def _lifecycle(self, op: mops.LifecycleOp) -> Handler:
        rules = lsql.transitions(**op.thresholds)
        if not op.dry_run:
            # One statement: the scores and every rule in order, each memory moved
            # written once (sql/lifecycle.lifecycle_pass).
            (row,) = yield Query(*lsql.lifecycle_pass(
                op.user_id, op.now, half_life_days=op.half_life_days,
                flag_below=op.flag_below, rules=rules))
            counts = {"rescored": int(row["rescored"]), "flagged": int(row["flagged"])}
            for n, rule in enumerate(rules):
                counts[rule.name] = int(row[f"moved_{n}"])
            return counts
        (row,) = yield Query(*lsql.rescore_decay(
            op.user_id, op.now, half_life_days=op.half_life_days, flag_below=op.flag_below,
            dry_run=True, rules=rules))
        counts = {"rescored": int(row["rescored"]), "flagged": int(row["flagged"])}
        # A dry run counts each rule's candidates: the memories whose state before the
        # run matches its condition, as its statement alone would move them.
        for n, rule in enumerate(rules):
            counts[rule.name] = len(row[f"keys_{n}"] or [])
        return counts

    @handles(mops.PurgeExpiredMemoriesOp)
    def _purge_expired(self, op: mops.PurgeExpiredMemoriesOp) -> Handler:
        (row,) = yield Query(*lsql.purge_expired(op.user_id, op.now, dry_run=op.dry_run))
        return {name: int(row[name]) for name in ("purged", "links", "cached")}

    @handles(mops.MemoryHistoryOp)
    def _memory_history(self, op: mops.MemoryHistoryOp) -> Handler:
        rows = yield Query(*lsql.memory_history(op.user_id, op.key))
        if not rows:
            return None
        return [HistoryEntry.model_validate(h) for h in rows[0]["history"]]

    @handles(mops.RecordOutcomeOp)
    def _record_outcome(self, op: mops.RecordOutcomeOp) -> Handler:
        rows = yield Query(*lsql.record_outcome(op.user_id, op.key, op.success,
                                                op.now or self.now()))
        return (rows[0]["success_count"], rows[0]["failure_count"]) if rows else None
