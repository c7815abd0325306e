"""Reflections (after Generative Agents): higher-level insights about the person.

Weekly, per user. The user's active memories of the last ``window_days`` (90; open
loops, summaries, reflections and other jobs' syntheses left out, and everything a
boundary covers) are clustered by embedding and shared references; each of the
``max_insights`` (3) largest clusters holding at least ``min_evidence`` (3) memories
from two sessions or more is given to the synthesizer, which answers with insights,
each naming at least two of the memories as evidence (checked: an insight citing fewer,
or ids it was not given, is an invalid answer, retried once with the error shown).

An insight is written as a ``reflection`` memory (layer semantic, policy ``adapt``: the
assistant adapts to it silently), ``metadata.synthesis = "reflection"``, linked
``derived_from`` to its evidence, with a confidence that grows with the evidence
(``reflection_confidence``). An insight over the same evidence as an existing
reflection (half of it or more shared) rewrites that one in place (history kept,
re-embedded) instead of adding another.

Before new insights, each existing reflection is re-validated: evidence deleted,
contradicted, forgotten, or now covered by a boundary is dropped; with two pieces or
more left its confidence is recomputed from what remains (history says why), with fewer
it is retired (archived, kept for audit).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any

from langmem_layer.flow import require_user
from langmem_layer.jobs import evidence as ev
from langmem_layer.jobs.registry import JobContext, JobOption, register
from langmem_layer.synth.offline_synthesizer import sessions, topic_label
from langmem_layer.synth.synthesizer import Evidence, SynthesisTask, central
from langmem_layer.synth.tasks import REFLECT, Insight, ReflectionOutput
from langmem_layer.synth.topics import cluster
from langmem_layer.types import HistoryEntry, Kind, Layer, MemoryRecord, Policy, Source, to_utc

__all__ = ["SYNTHESIS", "reflect", "reflection_confidence"]

#: ``metadata.synthesis`` of the records this job writes.
SYNTHESIS = "reflection"
#: Memories given to one synthesis at most (the most central first).
MAX_EVIDENCE = 10
_SPEAKABLE = ["speak", "adapt", "continue", "factcheck"]


def reflection_confidence(n_evidence: int) -> float:
    """A reflection's confidence from its evidence: 0.6 with two pieces, +0.1 each, ≤ 0.95."""
    return round(min(0.95, 0.4 + 0.1 * n_evidence), 4)


def _checker(given: set[str]) -> Any:
    def check(answer: ReflectionOutput) -> None:
        for insight in answer.insights:
            unknown = sorted(set(insight.evidence) - given)
            if unknown:
                raise ValueError(f"insight {insight.content!r} cites ids not in the evidence: "
                                 f"{', '.join(unknown)}; cite only the ids given.")
            if len(set(insight.evidence)) < 2:
                raise ValueError(f"insight {insight.content!r} cites fewer than two "
                                 "memories; every insight needs two pieces of evidence.")
    return check


@register(
    "reflect",
    "higher-level insights from a user's memories, as reflection memories linked to their "
    "evidence; re-validates or retires earlier ones",
    schedule="weekly", per_user=True, needs_embeddings=True, defers_writes=True,
    options=(JobOption("window_days", int, "memories of the last N days (default 90)"),
             JobOption("max_insights", int, "topics reflected on per run (default 3)")),
)
def reflect(ctx: JobContext, user_id: str, *, now: datetime, dry_run: bool = False,
            window_days: int = 90, max_insights: int = 3, min_evidence: int = 3,
            similarity: float = 0.72) -> dict[str, int]:
    """Re-validate ``user_id``'s reflections and write new ones, at ``now``.

    Returns:
        Outcomes: ``created``, ``rewritten``, ``unchanged``, ``revalidated``,
        ``retired``, ``withheld`` (an insight named a boundary), ``failed``, and
        ``tokens`` sent to a model.
    """
    user_id = require_user(user_id)
    now = to_utc(now)
    synth = ev.synthesizer_for(ctx)
    counts: Counter[str] = Counter()
    decisions: list[dict[str, Any]] = []
    bounds = ev.boundaries(ctx, user_id)
    writes = ev.Writes(user_id)
    existing = ev.load(ctx, user_id, synthesis=SYNTHESIS)
    kept = _revalidate(ctx, writes, existing.rows, bounds, now, counts, dry_run)
    pool = ev.load(ctx, user_id, policies=_SPEAKABLE, since=now - timedelta(days=window_days),
                   exclude_kinds=["open_loop", "reflection", "temporal_summary"], observed=True)
    covered = bounds.covers(pool.evidence)
    scopes: dict[str, list[Evidence]] = {}
    for item, prefix, hidden in zip(pool.evidence, pool.prefixes, covered, strict=True):
        if not hidden:
            scopes.setdefault(prefix, []).append(item)
    topics = [(prefix, [items[i] for i in group]) for prefix, items in scopes.items()
              for group in cluster(items, similarity=similarity)]
    topics = [(p, t) for p, t in topics if len(t) >= min_evidence and sessions(t) >= 2]
    topics.sort(key=lambda pt: -len(pt[1]))
    for prefix, items in topics[:max_insights]:
        given = central(items, MAX_EVIDENCE)
        if _covered(kept, prefix, {e.key for e in given}):
            # Reflected on already, evidence unchanged: no model call.
            counts["unchanged"] += 1
            continue
        if dry_run:
            counts["created"] += 1
            continue
        task = SynthesisTask("reflect", REFLECT, ReflectionOutput, given, None,
                             topic_label(given), now, _checker({e.key for e in given}))
        out = synth.synthesize(task)
        counts["tokens"] += out.tokens
        decision: dict[str, Any] = {"job": "reflect", "evidence": [e.key for e in given],
                                    "synthesizer": out.synthesizer, "tokens": out.tokens,
                                    "raw": out.raw}
        decisions.append(decision)
        if out.output is None:
            counts["failed"] += 1
            decision.update(action="failed", error=out.error)
            continue
        by_key = {e.key: e for e in given}
        for insight in out.output.insights:
            if bounds.named_in(insight.content):
                counts["withheld"] += 1
                decision.update(action="withheld", reason="names a boundary")
                continue
            action, key = _write(writes, prefix, insight,
                                 [by_key[k] for k in dict.fromkeys(insight.evidence)],
                                 kept, synth.name, now)
            counts[action] += 1
            decision.update(action=action, key=key)
    if not dry_run:
        writes.log("reflect", decisions, now)
        writes.flush(ctx)
    return {k: n for k, n in counts.items() if n}


def _covered(existing: list[dict[str, Any]], prefix: str, keys: set[str]) -> bool:
    return any(r["prefix"] == prefix and keys <= set(r["value"]["metadata"].get("evidence", []))
               for r in existing)


def _write(writes: ev.Writes, prefix: str, insight: Insight,
           evidence: list[Evidence], existing: list[dict[str, Any]], synthesizer: str,
           now: datetime) -> tuple[str, str]:
    """Write an insight, or rewrite the reflection over the same evidence."""
    keys = {e.key for e in evidence}
    match = None
    for r in existing:
        known = set(r["value"]["metadata"].get("evidence", []))
        if r["prefix"] == prefix and len(keys & known) * 2 >= min(len(keys), len(known)):
            match = r
            break
    if match is not None and keys <= set(match["value"]["metadata"].get("evidence", [])):
        return "unchanged", match["key"]
    all_keys = sorted(keys | set(match["value"]["metadata"]["evidence"] if match else ()))
    confidence = min(insight.confidence, reflection_confidence(len(all_keys))) \
        if synthesizer != "offline" else reflection_confidence(len(all_keys))
    refs = [r for r, _ in Counter(r for e in evidence for r in e.refs).most_common(6)]
    meta = {"synthesis": SYNTHESIS, "evidence": all_keys, "topic": topic_label(evidence),
            "synthesizer": synthesizer}
    if match is None:
        record = MemoryRecord(
            content=insight.content, kind=Kind.REFLECTION, layer=Layer.SEMANTIC,
            confidence=confidence, salience=0.5, policy=Policy.ADAPT, refs=refs,
            occurred_at=max(e.at for e in evidence), last_accessed_at=now,
            source=Source(agent_id="job:reflect"), metadata=meta)
        key = writes.record(prefix, record, key=None, evidence=keys, now=now)
        return "created", key
    old = MemoryRecord.model_validate(match["value"])
    history = list(old.history)
    if insight.content != old.content:
        history.append(ev.history_entry(now, old.content, insight.content,
                                        f"reflected again on {len(all_keys)} memories"))
    record = old.model_copy(update={
        "content": insight.content, "content_hash": "", "history": history,
        "confidence": max(old.confidence, confidence), "refs": refs or old.refs,
        "reinforcement_count": old.reinforcement_count + 1, "last_accessed_at": now,
        "metadata": {**old.metadata, **meta}})
    key = writes.record(match["prefix"], record, key=match["key"], evidence=keys, now=now)
    return "rewritten", key


def _revalidate(ctx: JobContext, writes: ev.Writes, records: list[dict[str, Any]],
                bounds: ev.Boundaries, now: datetime, counts: Counter[str],
                dry_run: bool) -> list[dict[str, Any]]:
    """Drop lost evidence from each reflection; retire those left with fewer than two.
    Returns the reflections kept."""
    if not records:
        return []
    state = ev.lost_evidence(ctx, writes.user_id, records, bounds)
    kept, retire = [], []
    for r in records:
        valid, lost = state[r["key"]]
        if bounds.named_in(r["value"]["content"]) or len(valid) < 2:
            retire.append(r["key"])
            continue
        kept.append(r)
        if not lost:
            continue
        counts["revalidated"] += 1
        if dry_run:
            continue
        old = MemoryRecord.model_validate(r["value"])
        confidence = min(old.confidence, reflection_confidence(len(valid)))
        entry = HistoryEntry(
            at=now, event="confidence", old=str(old.confidence), new=str(confidence),
            reason=f"re-validated: {len(lost)} of its memories were forgotten or "
                   "contradicted")
        record = old.model_copy(update={
            "confidence": confidence, "history": [*old.history, entry],
            "metadata": {**old.metadata, "evidence": sorted(e.key for e in valid)}})
        writes.record(r["prefix"], record, key=r["key"], evidence=(), now=now)
        r["value"] = record.to_value()
    counts["retired"] += len(retire)
    if retire and not dry_run:
        writes.retire(retire, now,
                      "retired: its evidence was forgotten, contradicted or covered by a boundary")
    return kept
