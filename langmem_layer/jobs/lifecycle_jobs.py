"""The memory lifecycle as per-user jobs.

``lifecycle`` (daily) recomputes each memory's stored decay score (in ``langmem_decay``,
one narrow row per memory, so the nightly rescore never rewrites a memory) and moves
memories through their statuses, every threshold from
``MemorySettings``:

* ephemeral context not referenced for ``lifecycle_ephemeral_stale_days`` → stale;
* episodic events not reinforced for ``lifecycle_episodic_stale_days`` → stale;
* stale for ``lifecycle_archive_after_days`` → archived;
* open loops ``lifecycle_loop_grace_days`` past their due date, or (without a future
  due date) unreferenced for ``lifecycle_loop_silence_days`` → closed and archived;
* procedural habits with at least ``lifecycle_habit_min_outcomes`` outcomes and a
  failure rate above ``lifecycle_habit_max_failure_rate`` → retired (archived);
* semantic facts not confirmed for ``lifecycle_revalidate_after_days`` → flagged
  ``needs_revalidation`` in their metadata (the flag goes when they are confirmed).

Pinned memories are exempt; every change is recorded in the memory's history
(``MemoryRecord.history``); nothing is deleted. ``purge-expired`` (monthly) deletes
the memories whose ``expires_at`` has passed, with their embeddings, links and cached
embeddings, in one transaction.

Each job works on one user in one transaction, with set-based SQL
(``langmem_layer.sql.transitions``), and running it again for the same ``now``
changes nothing. ``langmem-layer jobs run lifecycle`` (the runner,
``langmem_layer.jobs.runs``) runs them user by user, recorded, resumable, sharded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langmem_layer.flow import require_user
from langmem_layer.jobs.registry import JobContext, register
from langmem_layer.settings import MemorySettings
from langmem_layer.store import ops as mops
from langmem_layer.types import to_utc

__all__ = ["lifecycle", "lifecycle_thresholds", "purge_expired"]



def _settings(ctx: JobContext) -> MemorySettings:
    if ctx.settings is None:
        from langmem_layer.environment import settings_from_env

        ctx.settings = settings_from_env()
    return ctx.settings


def _run(ctx: JobContext, op: object) -> Any:
    """One memory op in its own transaction (``batch`` is typed for LangGraph's ops)."""
    ops: list[Any] = [op]
    return ctx.store.batch(ops)[0]


def lifecycle_thresholds(settings: MemorySettings) -> dict[str, Any]:
    """The transition thresholds of ``settings``, as the lifecycle SQL takes them."""
    s = settings
    return {
        "ephemeral_stale_days": s.lifecycle_ephemeral_stale_days,
        "episodic_stale_days": s.lifecycle_episodic_stale_days,
        "archive_after_days": s.lifecycle_archive_after_days,
        "loop_grace_days": s.lifecycle_loop_grace_days,
        "loop_silence_days": s.lifecycle_loop_silence_days,
        "habit_min_outcomes": s.lifecycle_habit_min_outcomes,
        "habit_max_failure_rate": s.lifecycle_habit_max_failure_rate,
        "revalidate_after_days": s.lifecycle_revalidate_after_days,
    }


@register("lifecycle", "decay scores and status transitions of one user's memories",
          schedule="daily", per_user=True)
def lifecycle(ctx: JobContext, user_id: str, *, now: datetime,
              dry_run: bool = False) -> dict[str, int]:
    """Run the lifecycle over ``user_id``'s memories at ``now``, in one transaction.

    Args:
        ctx: The store (and settings) to run against.
        user_id: The tenant.
        now: The time the lifecycle runs at.
        dry_run: Count what would change, change nothing.

    Returns:
        Memories per outcome: ``rescored`` (decay score changed), ``flagged`` (decay
        fell below ``decay_flag_below``), ``archived``, ``stale_ephemeral``,
        ``stale_episodic``, ``loops_closed``, ``habits_retired``,
        ``needs_revalidation`` and ``revalidated``.
    """
    st = _settings(ctx)
    user_id = require_user(user_id)
    op = mops.LifecycleOp(user_id, to_utc(now), st.half_life_days(user_id),
                          st.decay_flag_below, lifecycle_thresholds(st), dry_run)
    return dict(_run(ctx, op))


@register("purge-expired", "delete one user's expired memories with embeddings and links",
          schedule="monthly", per_user=True)
def purge_expired(ctx: JobContext, user_id: str, *, now: datetime,
                  dry_run: bool = False) -> dict[str, int]:
    """Delete ``user_id``'s memories whose ``expires_at`` is past, in one transaction.

    Returns:
        ``purged`` memories, and the ``links`` and ``cached`` embeddings removed with
        them (a dry run counts only ``purged``).
    """
    user_id = require_user(user_id)
    return dict(_run(ctx, mops.PurgeExpiredMemoriesOp(user_id, to_utc(now), dry_run)))
