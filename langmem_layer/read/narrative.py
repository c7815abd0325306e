"""The narrative arc of a turn and the learned trust it ranks with.

Both ride in the turn's existing round trip: ``turn_ops`` adds one small read of the
user's temporal summaries (only those that can be chosen) and one of their learned
trust to the recall's batch; ``pick_summary`` then chooses the summary the block
shows in its own section:

* when the question names a period ("what did we talk about last month?", "last week",
  "in March"), the summary of that period: the one whose period overlaps it most, of
  the granularity the question used when there is one;
* otherwise the most recent summary that ended within ``RECENT_DAYS``: the week (or
  day, or month) just past.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from langmem_layer.flow import Env, scopes_for
from langmem_layer.read.query import TimeWindow, time_window
from langmem_layer.store.ops import SummaryCandidatesOp, TurnReadsOp
from langmem_layer.types import MemoryRecord, Recalled, memory_namespace, utc_iso

__all__ = ["RECENT_DAYS", "SUMMARY", "pick_summary", "turn_ops", "with_narrative"]

#: ``metadata.synthesis`` of a temporal summary.
SUMMARY = "temporal_summary"
#: Without a named period, a summary that ended this many days ago at most is shown.
RECENT_DAYS = 10
#: Summaries read per turn to choose from.
_SCAN = 12
#: Which period's summary answers a question of each granularity, best first.
_PREFER = {"day": ("day", "week"), "week": ("week", "day", "month"),
           "month": ("month", "week"), "season": ("month", "week"),
           "year": ("month",), None: ("week", "day", "month")}


def _window(query: str | None, now: datetime) -> TimeWindow | None:
    return time_window(query, now, slack_days=0.0) if query else None


def turn_ops(env: Env, user_id: str, query: str | None, *, profile: str | None,
             now: datetime) -> list[Any]:
    """The reads a turn adds to its recall batch: learned trust and candidate summaries,
    one op (its result: ``TurnReads``)."""
    window = _window(query, now)
    if window is not None:
        start, end = window.start, window.end
    else:
        start, end = now - timedelta(days=RECENT_DAYS), now + timedelta(days=1)
    scope = scopes_for(env, profile)[0]
    return [TurnReadsOp(user_id, SummaryCandidatesOp(
        user_id, memory_namespace(user_id, scope), utc_iso(start), utc_iso(end), _SCAN, now))]


def pick_summary(items: Sequence[Any], query: str | None, now: datetime) -> Recalled | None:
    """The summary to show for ``query`` among those ``turn_ops`` read."""
    if not items:
        return None
    window = _window(query, now)
    prefer = _PREFER.get(window.granularity if window else None, ("week", "day", "month"))

    def overlap(meta: dict[str, Any]) -> float:
        if window is None:
            return 0.0
        lo = max(window.start, datetime.fromisoformat(meta["start"]))
        hi = min(window.end, datetime.fromisoformat(meta["end"]))
        return max(0.0, (hi - lo).total_seconds())

    def score(item: Any) -> tuple[Any, ...]:
        meta = item.value.get("metadata") or {}
        period = meta.get("period")
        rank = prefer.index(period) if period in prefer else len(prefer)
        return (-overlap(meta), rank, -datetime.fromisoformat(meta["end"]).timestamp())

    valid = [i for i in items if (i.value.get("metadata") or {}).get("end")
             and i.value.get("policy") != "avoid"]
    if not valid:
        return None
    best = min(valid, key=score)
    return Recalled(best.key, tuple(best.namespace), MemoryRecord.model_validate(best.value),
                    sources={"narrative": 0})


def with_narrative(ranked: list[Recalled], summary: Recalled | None) -> list[Recalled]:
    """``ranked`` with the chosen summary appended (once)."""
    if summary is None or any(r.key == summary.key for r in ranked):
        return ranked
    return [*ranked, summary]

