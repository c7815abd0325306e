"""Store operations of a memory's life: decay and transitions, purge, history and
habit outcomes.

Re-exported by ``langmem_layer.store.ops``, where callers import them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

__all__ = [
    "LifecycleOp",
    "MemoryHistoryOp",
    "PurgeExpiredMemoriesOp",
    "RecordOutcomeOp",
]


# -- the lifecycle; handled by store/handlers/lifecycle.py ---------------------------------


class LifecycleOp(NamedTuple):
    """Run the lifecycle over one user's memories: decay, then every transition of
    ``langmem_layer.sql.lifecycle.transitions`` (result: ``dict[str, int]``, the
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


class PurgeExpiredMemoriesOp(NamedTuple):
    """Delete one user's memories whose expiry has passed, with their embeddings, links
    and cached embeddings, atomically (result: ``dict[str, int]``)."""

    user_id: str
    now: datetime
    dry_run: bool = False


class MemoryHistoryOp(NamedTuple):
    """One memory's lifecycle history, oldest first (result: ``list[HistoryEntry]``, or
    None when the user has no such memory)."""

    user_id: str
    key: str


class RecordOutcomeOp(NamedTuple):
    """Count one outcome of following a procedural habit (result: ``(successes,
    failures)`` after counting, or None when the user has no such procedural memory)."""

    user_id: str
    key: str
    success: bool
    now: datetime | None = None
