"""The procedural profile: how a user works with the assistant, always loaded.

One small memory per user and profile (key derived from both), kind ``protocol``, layer
procedural, policy ``adapt``, pinned, so recall brings it back every turn in the round
trip it already makes and the block places it first (well under ~1,000 tokens).

Weekly, per user, the ``procedural-profile`` job infers from the last ``window_days``
(28) of threads and the message log: the most-discussed topics (the references the
period's memories share most), the typical session length, the time of day (UTC), the
follow-up rate (sessions in which the user wrote more than once) and the typical answer
length. An explicit preference the user states ("keep answers short", "more detail
please") applies at once: the write path updates the profile in the turn's extraction
(``explicit_preference``, ``apply_explicit``), and it outranks what is inferred.
"""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from langgraph.store.base import PutOp

from langmem_layer.flow import require_user
from langmem_layer.jobs import evidence as ev
from langmem_layer.jobs.registry import JobContext, JobOption, register
from langmem_layer.sql import summaries as ssql
from langmem_layer.store import ops as mops
from langmem_layer.types import IDENTITY_SCOPE, MemoryRecord, memory_namespace, to_utc, utc_iso
from langmem_layer.write.profile_record import profile_key, profile_record

__all__ = ["procedural_profile"]

_SPEAKABLE = ["speak", "adapt", "continue", "factcheck"]

def _time_of_day(hours: list[int]) -> str | None:
    if not hours:
        return None
    names = ["night" if h < 5 or h >= 22 else "morning" if h < 12 else "afternoon" if h < 17
             else "evening" for h in hours]
    return Counter(names).most_common(1)[0][0]


@register(
    "procedural-profile",
    "the procedural profile: topics, session length, time of day, follow-up rate, "
    "answer length per user and profile, from threads and the message log",
    schedule="weekly", per_user=True,
    options=(JobOption("window_days", int, "threads of the last N days (default 28)"),),
)
def procedural_profile(ctx: JobContext, user_id: str, *, now: datetime, dry_run: bool = False,
                       window_days: int = 28) -> dict[str, int]:
    """Infer ``user_id``'s procedural profile per profile from the last ``window_days``.

    Returns:
        Outcomes: ``created``, ``rewritten``, ``unchanged`` (one per profile).
    """
    user_id = require_user(user_id)
    now = to_utc(now)
    since = now - timedelta(days=window_days)
    threads = ctx.execute(ssql.thread_stats(user_id, since, now))
    bounds = ev.boundaries(ctx, user_id)
    pool = ev.load(ctx, user_id, policies=_SPEAKABLE, since=since, observed=True)
    refs: dict[str, Counter[str]] = {}
    for item, prefix, hidden in zip(pool.evidence, pool.prefixes, bounds.covers(pool.evidence),
                                    strict=True):
        scope = ev.namespace(prefix)[2]
        if not hidden and scope != IDENTITY_SCOPE:
            refs.setdefault(scope, Counter()).update(set(item.refs))
    by_profile: dict[str, list[dict[str, Any]]] = {}
    for t in threads:
        by_profile.setdefault(t["profile"], []).append(t)
    counts: Counter[str] = Counter()
    ops: list[Any] = []
    # A profile with no session in the window has nothing to infer from.
    profiles = sorted(by_profile)
    lookups: list[Any] = [mops.FindMemoryOp(user_id, profile_key(user_id, p))
                          for p in profiles]
    found: list[Any] = list(ctx.store.batch(lookups))
    for profile, stored in zip(profiles, found, strict=True):
        rows = by_profile.get(profile, [])
        minutes = [(r["last_at"] - r["first_at"]).total_seconds() / 60 for r in rows]
        words = [float(r["agent_words"]) for r in rows if r["agent_words"] is not None]
        median_words = statistics.median(words) if words else None
        meta: dict[str, Any] = {
            "topics": [r for r, _ in (refs.get(profile) or Counter()).most_common(5)],
            "session_minutes": round(statistics.median(minutes)) if minutes else None,
            "time_of_day": _time_of_day([to_utc(r["first_at"]).hour for r in rows]),
            "follow_up_rate": (round(sum(1 for r in rows if r["user_messages"] >= 2)
                                     / len(rows), 2) if rows else None),
            "answer_length": (None if median_words is None else "short" if median_words < 60
                              else "medium" if median_words < 200 else "detailed"),
            "sessions": len(rows), "window_days": window_days, "inferred_at": utc_iso(now)}
        key = profile_key(user_id, profile)
        previous = MemoryRecord.model_validate(stored.value) if stored is not None else None
        if previous is not None and all(previous.metadata.get(k) == v for k, v in meta.items()
                                        if k != "inferred_at"):
            counts["unchanged"] += 1
            continue
        counts["rewritten" if previous is not None else "created"] += 1
        record = profile_record(previous, meta, now, "inferred again from the last "
                                              f"{window_days} days")
        ops.append(PutOp(memory_namespace(user_id, profile), key,
                         MemoryRecord.model_validate(record.model_dump()).to_value()))
    if ops and not dry_run:
        ctx.store.batch(ops)
    return {k: n for k, n in counts.items() if n}
