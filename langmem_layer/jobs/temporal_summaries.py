"""Temporal summaries: daily, weekly and monthly summaries per user and profile.

Daily, per user. For every complete day, week (Monday to Sunday, UTC) and month that
ended within ``lookback_days`` (35) it summarizes, per profile, the user's logged
messages of the period and the memories that occurred in it, into one memory of kind
``temporal_summary`` (layer semantic, policy ``speak``, ``metadata.synthesis =
"temporal_summary"``, ``metadata.period/start/end``), ``derived_from`` the period's
memories. Summaries decay by half-life (``summary_half_life_days``).

Its key is derived from (user, profile, period, start), so a re-run rewrites the same
record (the previous text in its history) and an interrupted run resumes where it
stopped; a period whose evidence has not changed is ``unchanged`` and calls no model.

A model is given the period chunked to ``budget_tokens`` per call: each chunk is
summarized, then the partial summaries are summarized into one. The offline
synthesizer writes the whole period through its template.

Privacy: only the user's own messages and active memories are read; ``avoid`` memories
are never evidence, a turn holding a boundary's source message is left out whole, a
message that names a boundary's reference and a memory a boundary covers are dropped
before synthesis, an answer that still names one is withheld, and a summary whose
period no longer has evidence (everything forgotten or covered) is retired.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from langmem_layer.flow import require_user
from langmem_layer.jobs import evidence as ev
from langmem_layer.jobs.registry import JobContext, JobOption, register
from langmem_layer.read.narrative import SUMMARY
from langmem_layer.sql import summaries as ssql
from langmem_layer.synth.periodic import SUMMARIZE, SummaryOutput
from langmem_layer.synth.synthesizer import Evidence, SynthesisTask
from langmem_layer.tokens import get_token_counter
from langmem_layer.types import (
    IDENTITY_SCOPE,
    MEMORY_ROOT,
    Kind,
    Layer,
    MemoryRecord,
    Policy,
    Source,
    to_utc,
    utc_iso,
)

__all__ = ["PERIODS", "periods_ending", "summarize"]

#: The periods summarized, finest first.
PERIODS = ("day", "week", "month")
_SPEAKABLE = ["speak", "adapt", "continue", "factcheck"]
_KEYS = uuid.UUID("5b0c3d52-8d7e-4b55-9a53-0d2a7f1c6e11")


def _midnight(day: Any) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def periods_ending(kind: str, now: datetime, lookback_days: float
                   ) -> list[tuple[datetime, datetime]]:
    """The complete ``kind`` periods (start, end) that ended after ``now - lookback``."""
    today = now.astimezone(UTC).date()
    out: list[tuple[datetime, datetime]] = []
    if kind == "day":
        end = _midnight(today)
        step = lambda e: e - timedelta(days=1)  # noqa: E731
    elif kind == "week":
        end = _midnight(today - timedelta(days=today.weekday()))
        step = lambda e: e - timedelta(days=7)  # noqa: E731
    elif kind == "month":
        end = _midnight(today.replace(day=1))

        def step(e: datetime) -> datetime:
            prev = (e - timedelta(days=1)).date().replace(day=1)
            return _midnight(prev)
    else:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}, got {kind!r}")
    floor = now - timedelta(days=lookback_days)
    while end > floor:
        start = step(end)
        out.append((start, end))
        end = start
    return out[::-1]


def _label(kind: str, start: datetime) -> str:
    if kind == "day":
        return f"{start:%A} {start.day} {start:%B %Y}"
    if kind == "week":
        return f"Week of {start.day} {start:%B %Y}"
    return f"{start:%B %Y}"


def _fingerprint(items: list[Evidence]) -> str:
    return hashlib.sha256("\n".join(sorted(e.key for e in items)).encode()).hexdigest()[:16]


def _same_periods(last_now: datetime, now: datetime, options: Mapping[str, Any]) -> bool:
    """Whether a run at ``now`` summarizes the same complete periods as one at
    ``last_now``: if so, a user with no new data has nothing new to summarize."""
    lookback = options.get("lookback_days", 35)
    kinds = [p.strip() for p in options.get("periods", ",".join(PERIODS)).split(",")
             if p.strip()]
    return all(periods_ending(k, to_utc(last_now), lookback)
               == periods_ending(k, to_utc(now), lookback) for k in kinds)


@register(
    "summarize",
    "temporal summaries: one memory per user, profile and complete day, week and month "
    ", from the message log and the period's memories",
    schedule="daily", per_user=True, needs_embeddings=True, defers_writes=True,
    unchanged=_same_periods,
    options=(JobOption("lookback_days", int, "periods that ended in the last N days "
                                             "(default 35)"),
             JobOption("periods", str, "comma-separated: day,week,month (default all)"),
             JobOption("budget_tokens", int, "tokens of evidence per model call "
                                             "(default 3000)")),
)
def summarize(ctx: JobContext, user_id: str, *, now: datetime, dry_run: bool = False,
              lookback_days: int = 35, periods: str = "day,week,month",
              budget_tokens: int = 3000) -> dict[str, int]:
    """Write ``user_id``'s temporal summaries of the periods that ended lately, at ``now``.

    Args:
        ctx: The store (and synthesizer) to run against.
        user_id: The tenant.
        now: The time of the run.
        dry_run: Count what would be written; synthesize and write nothing.
        lookback_days: Summarize the complete periods that ended in the last N days.
        periods: Which periods, comma-separated (``day``, ``week``, ``month``).
        budget_tokens: Evidence tokens per model call; a longer period is chunked.

    Returns:
        Outcomes: ``created``, ``rewritten``, ``unchanged``, ``withheld``, ``retired``,
        ``failed``, and ``tokens`` sent to a model.
    """
    user_id = require_user(user_id)
    now = to_utc(now)
    kinds = [p.strip() for p in periods.split(",") if p.strip()]
    wanted = {k: periods_ending(k, now, lookback_days) for k in kinds}
    spans = [s for ps in wanted.values() for s in ps]
    if not spans:
        return {}
    since, until = min(s for s, _ in spans), max(e for _, e in spans)
    synth = ev.synthesizer_for(ctx)
    counter = get_token_counter()
    counts: Counter[str] = Counter()
    decisions: list[dict[str, Any]] = []
    writes = ev.Writes(user_id)
    bounds = ev.boundaries(ctx, user_id)
    pool = ev.load(ctx, user_id, policies=_SPEAKABLE, since=since, observed=True,
                   exclude_kinds=["reflection", "temporal_summary"])
    existing = {r["key"]: r for r in ev.load(ctx, user_id, synthesis=SUMMARY).rows}
    by_profile: dict[str, list[Evidence]] = {}
    for item, prefix, hidden in zip(pool.evidence, pool.prefixes, bounds.covers(pool.evidence),
                                    strict=True):
        scope = ev.namespace(prefix)[2]
        if not hidden and scope != IDENTITY_SCOPE:
            by_profile.setdefault(scope, []).append(item)
    for m in ctx.execute(ssql.messages(user_id, since, until)):
        if m["role"] != "user" or bounds.named_in(m["text"]):
            continue
        by_profile.setdefault(m["profile"], []).append(Evidence(
            f"msg:{m['thread_id']}:{m['message_id']}", m["text"], to_utc(m["at"]),
            "message", (), m["thread_id"]))
    seen: set[str] = set()  # summaries of periods that still have evidence
    for profile, items in by_profile.items():
        for kind, spans_k in wanted.items():
            for start, end in spans_k:
                period = [e for e in items if start <= e.at < end]
                key = str(uuid.uuid5(_KEYS, f"{user_id}:{profile}:{kind}:{start.isoformat()}"))
                if not period:
                    continue
                seen.add(key)
                _one(ctx, synth, counter, writes, bounds, counts, decisions,
                     prefix=".".join((MEMORY_ROOT, user_id, profile)), key=key, kind=kind,
                     start=start, end=end, items=period, previous=existing.get(key),
                     now=now, dry_run=dry_run, budget=budget_tokens)
    # A summary of a lookback period with no evidence left (forgotten, or a boundary now
    # covers all of it) is retired.
    stale = [k for k, r in existing.items() if k not in seen
             and r["value"]["metadata"].get("start", "") >= utc_iso(since)
             and r["value"]["metadata"].get("period") in wanted]
    if stale:
        counts["retired"] += len(stale)
        if not dry_run:
            writes.retire(stale, now, "retired: its period has no evidence left")
    if not dry_run:
        writes.log("summarize", decisions, now)
        writes.flush(ctx)
    return {k: n for k, n in counts.items() if n}


def _chunks(items: list[Evidence], counter: Any, budget: int) -> list[list[Evidence]]:
    out: list[list[Evidence]] = [[]]
    used = 0
    for e in items:
        cost = counter.count(e.content) + 12
        if out[-1] and used + cost > budget:
            out.append([])
            used = 0
        out[-1].append(e)
        used += cost
    return out


def _one(ctx: JobContext, synth: Any, counter: Any, writes: ev.Writes, bounds: ev.Boundaries,
         counts: Counter[str], decisions: list[dict[str, Any]], *, prefix: str, key: str,
         kind: str, start: datetime, end: datetime, items: list[Evidence],
         previous: dict[str, Any] | None, now: datetime, dry_run: bool, budget: int) -> None:
    fingerprint = _fingerprint(items)
    if previous is not None and previous["value"]["metadata"].get("fingerprint") == fingerprint \
            and not bounds.named_in(previous["value"]["content"]):
        counts["unchanged"] += 1
        return
    action = "rewritten" if previous is not None else "created"
    if dry_run:
        counts[action] += 1
        return
    label = _label(kind, start)
    parts = [items] if synth.name == "offline" else _chunks(items, counter, budget)
    answer: SummaryOutput | None = None
    decision: dict[str, Any] = {"job": "summarize", "period": kind, "start": utc_iso(start),
                                "synthesizer": synth.name, "tokens": 0, "raw": []}
    decisions.append(decision)
    partials: list[Evidence] = []
    for n, part in enumerate(parts):
        topic = label if len(parts) == 1 else f"{label} (part {n + 1} of {len(parts)})"
        out = synth.synthesize(SynthesisTask("summarize", SUMMARIZE, SummaryOutput, part,
                                             None, topic, now))
        counts["tokens"] += out.tokens
        decision["tokens"] += out.tokens
        decision["raw"] += out.raw
        if out.output is None:
            counts["failed"] += 1
            decision.update(action="failed", error=out.error)
            return
        answer = out.output
        partials.append(Evidence(f"part:{n}", answer.content, part[-1].at, "summary_part"))
    if len(partials) > 1:  # the partial summaries, summarized into one
        out = synth.synthesize(SynthesisTask("summarize", SUMMARIZE, SummaryOutput, partials,
                                             None, label, now))
        counts["tokens"] += out.tokens
        decision["tokens"] += out.tokens
        decision["raw"] += out.raw
        answer = out.output
        if answer is None:
            counts["failed"] += 1
            decision.update(action="failed", error=out.error)
            return
    assert answer is not None
    if bounds.named_in(answer.content):
        counts["withheld"] += 1
        decision.update(action="withheld", reason="names a boundary")
        if previous is not None:
            writes.retire([key], now, "retired: a boundary covers it")
        return
    memory_keys = sorted(e.key for e in items if e.kind != "message")
    meta = {"synthesis": SUMMARY, "period": kind, "start": utc_iso(start), "end": utc_iso(end),
            "label": label, "topics": answer.topics, "decisions": answer.decisions,
            "open_questions": answer.open_questions, "evidence": memory_keys,
            "messages": sum(1 for e in items if e.kind == "message"),
            "fingerprint": fingerprint, "synthesizer": synth.name}
    if previous is None:
        record = MemoryRecord(
            content=answer.content, kind=Kind.TEMPORAL_SUMMARY, layer=Layer.SEMANTIC,
            confidence=0.8, salience=0.4, policy=Policy.SPEAK, occurred_at=start,
            last_accessed_at=now, source=Source(agent_id="job:summarize"), metadata=meta)
    else:
        old = MemoryRecord.model_validate(previous["value"])
        history = list(old.history)
        if answer.content != old.content:
            history.append(ev.history_entry(now, old.content, answer.content,
                                            f"summarized again from {len(items)} items"))
        record = old.model_copy(update={"content": answer.content, "content_hash": "",
                                        "history": history, "last_accessed_at": now,
                                        "metadata": {**old.metadata, **meta}})
    known = set(previous["value"]["metadata"].get("evidence", [])) if previous else set()
    writes.record(prefix, record, key=key, evidence=[k for k in memory_keys if k not in known],
                  now=now)
    counts[action] += 1
    decision.update(action=action, key=key)
