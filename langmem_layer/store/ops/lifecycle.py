"""Store operations of a memory's life, with their handlers: decay and transitions,
purge, history and habit outcomes.

Re-exported by ``langmem_layer.store.ops``, where callers import them. Their SQL stays
in ``langmem_layer.sql.transitions``: its decay constants are shared with the ranking
(``read/rank.py``, which a test holds equal to the SQL's decay), and its builders with
these ops and handlers would pass the 600 lines a module may hold.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.sql import transitions as lsql
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.plan import Handler, Query
from langmem_layer.types import HistoryEntry

__all__ = [
    "LifecycleOp",
    "MemoryHistoryOp",
    "PurgeExpiredMemoriesOp",
    "RecordOutcomeOp",
]


# -- handlers -----------------------------------------------------------------------------


def _lifecycle(ctx: Context, op: LifecycleOp) -> Handler:
    rules = lsql.transitions(**op.thresholds)
    if not op.dry_run:
        # One statement: the scores and every rule in order, each memory moved
        # written once (sql/transitions.lifecycle_pass), planned for its user
        # (``lsql.CUSTOM_PLANS``, in the same round trip).
        _, (row,) = yield Query(*lsql.lifecycle_pass(
            op.user_id, op.now, half_life_days=op.half_life_days,
            flag_below=op.flag_below, rules=rules), pre=lsql.CUSTOM_PLANS)
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


def _purge_expired(ctx: Context, op: PurgeExpiredMemoriesOp) -> Handler:
    (row,) = yield Query(*lsql.purge_expired(op.user_id, op.now, dry_run=op.dry_run))
    return {name: int(row[name]) for name in ("purged", "links", "cached")}


def _memory_history(ctx: Context, op: MemoryHistoryOp) -> Handler:
    rows = yield Query(*lsql.memory_history(op.user_id, op.key))
    if not rows:
        return None
    return [HistoryEntry.model_validate(h) for h in rows[0]["history"]]


def _record_outcome(ctx: Context, op: RecordOutcomeOp) -> Handler:
    rows = yield Query(*lsql.record_outcome(op.user_id, op.key, op.success,
                                            op.now or ctx.now()))
    return (rows[0]["success_count"], rows[0]["failure_count"]) if rows else None


# -- ops ----------------------------------------------------------------------------------


@operation(_lifecycle)
class LifecycleOp(NamedTuple):
    """Run the lifecycle over one user's memories: decay, then every transition of
    ``langmem_layer.sql.transitions.transitions`` (result: ``dict[str, int]``, the
    number of memories per outcome).

    Attributes:
        user_id: The tenant.
        now: The time the lifecycle runs at.
        half_life_days: The user's half-life of summaries and reflections.
        flag_below: Decay below this counts as ``flagged``.
        thresholds: Keyword arguments of ``transitions``.
        dry_run: Count what would change, change nothing.
    """

    user_id: str
    now: datetime
    half_life_days: float
    flag_below: float
    thresholds: dict[str, Any]
    dry_run: bool = False


@operation(_purge_expired)
class PurgeExpiredMemoriesOp(NamedTuple):
    """Delete one user's memories whose expiry has passed, with their embeddings, links
    and cached embeddings, atomically (result: ``dict[str, int]``)."""

    user_id: str
    now: datetime
    dry_run: bool = False


@operation(_memory_history)
class MemoryHistoryOp(NamedTuple):
    """One memory's lifecycle history, oldest first (result: ``list[HistoryEntry]``, or
    None when the user has no such memory)."""

    user_id: str
    key: str


@operation(_record_outcome)
class RecordOutcomeOp(NamedTuple):
    """Count one outcome of following a procedural habit (result: ``(successes,
    failures)`` after counting, or None when the user has no such procedural memory)."""

    user_id: str
    key: str
    success: bool
    now: datetime | None = None
