"""Consolidation: episodic memories → one semantic record per topic.

Nightly, per user. A topic is a cluster of the user's active episodic memories of the
last ``window_days`` (90) in one profile, found by embedding similarity and shared
references (``langmem_layer.synth.topics.cluster``), never by exact topic strings.
A topic engaged in at least ``min_sessions`` (2) sessions, or holding an explicit
conclusion ("decided to ..."), becomes one synthesized semantic record
(``metadata.synthesis = "consolidation"``) with ``derived_from`` links to its episodes.

A record already there for the topic — one derived from any of the cluster's episodes,
or one whose vector is within cosine ``merge_similarity`` (0.88) of the cluster's — is
reinforced and rewritten in place: the previous text goes to its history, the record is
re-embedded, never duplicated; a fact the extractor wrote ("Lives in Berlin") is
reinforced and linked, its wording (the user's) kept. Paraphrases ("lives in Berlin" /
"is based in Berlin") land in one cluster, or match one record, and merge.

A synthesis that fails (the model fails twice) is counted ``failed`` and logged with its
raw output; its episodes are left as they were, for the next run. A synthesized record
whose evidence was forgotten or contradicted is rewritten from what remains, or retired
when too little remains; one a new boundary covers is retired.
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
from langmem_layer.synth.tasks import CONSOLIDATE, ConsolidationOutput
from langmem_layer.synth.topics import cluster, cosine_matrix
from langmem_layer.types import IDENTITY_SCOPE, Kind, Layer, MemoryRecord, Policy, Source, to_utc

__all__ = ["SYNTHESIS", "consolidate", "record_confidence"]

#: ``metadata.synthesis`` of the records this job writes.
SYNTHESIS = "consolidation"
#: Evidence given to a synthesis at most (the most central first).
MAX_EVIDENCE = 12
_SPEAKABLE = ["speak", "adapt", "continue", "factcheck"]


def record_confidence(n_sessions: int) -> float:
    """A consolidated record's confidence: grows with the sessions behind it."""
    return round(min(0.95, 0.55 + 0.1 * n_sessions), 4)


def _eligible(items: list[Evidence], min_sessions: int) -> bool:
    return sessions(items) >= min_sessions or any(e.conclusion for e in items)


def _merged_refs(items: list[Evidence], limit: int = 8) -> list[str]:
    counts = Counter(r for e in items for r in e.refs)
    return [r for r, _ in counts.most_common(limit)]


class _Run:
    """One user's consolidation: counts, decisions, tokens."""

    def __init__(self, ctx: JobContext, user_id: str, now: datetime, dry_run: bool) -> None:
        self.ctx, self.user_id, self.now, self.dry_run = ctx, user_id, now, dry_run
        self.synth = ev.synthesizer_for(ctx)
        self.counts: Counter[str] = Counter()
        self.decisions: list[dict[str, Any]] = []
        self.writes = ev.Writes(user_id)

    def synthesize(self, items: list[Evidence], existing: str | None, topic: str,
                   action: str) -> ConsolidationOutput | None:
        task = SynthesisTask("consolidate", CONSOLIDATE, ConsolidationOutput,
                             central(items, MAX_EVIDENCE), existing, topic, self.now)
        out = self.synth.synthesize(task)
        self.counts["tokens"] += out.tokens
        decision = {"job": "consolidate", "action": action, "topic": topic,
                    "evidence": [e.key for e in task.evidence],
                    "synthesizer": out.synthesizer, "tokens": out.tokens, "raw": out.raw}
        if out.output is None:
            self.counts["failed"] += 1
            decision.update(action="failed", error=out.error)
        self.decisions.append(decision)
        return out.output

    def write(self, prefix: str, items: list[Evidence], answer: ConsolidationOutput,
              topic: str, previous: dict[str, Any] | None, reason: str) -> str:
        n = sessions(items)
        dates = [e.at for e in items]
        meta = {"synthesis": SYNTHESIS, "topic": answer.topic or topic, "sessions": n,
                "evidence": sorted({e.key for e in items}), "first": min(dates).isoformat(),
                "last": max(dates).isoformat(), "settled": answer.settled,
                "open_questions": answer.open_questions, "synthesizer": self.synth.name}
        if previous is None:
            record = MemoryRecord(
                content=answer.content, kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC,
                confidence=record_confidence(n), salience=0.6, policy=Policy.SPEAK,
                refs=_merged_refs(items), occurred_at=max(dates), last_accessed_at=self.now,
                source=Source(agent_id="job:consolidate"), metadata=meta)
            key = None
        else:
            old = MemoryRecord.model_validate(previous["value"])
            history = list(old.history)
            if answer.content != old.content:
                history.append(ev.history_entry(self.now, old.content, answer.content, reason))
            record = old.model_copy(update={
                "content": answer.content, "content_hash": "", "history": history,
                "confidence": max(old.confidence, record_confidence(n)),
                "reinforcement_count": old.reinforcement_count + 1,
                "refs": _merged_refs(items) or old.refs, "last_accessed_at": self.now,
                "occurred_at": max(max(dates), old.occurred_at),
                "metadata": {**old.metadata, **meta}})
            key = previous["key"]
        new_links = [e.key for e in items]
        return self.writes.record(prefix, record, key=key, evidence=new_links, now=self.now)


@register(
    "consolidate",
    "episodic → semantic: one synthesized record per topic engaged in 2+ sessions "
    "(or concluded), reinforced in place when it exists",
    schedule="daily", per_user=True, needs_embeddings=True, defers_writes=True,
    # Time alone brings nothing new: an episode leaving the window makes no topic.
    unchanged=lambda last_now, now, options: True,
    options=(JobOption("window_days", int, "episodes of the last N days (default 90)"),
             JobOption("min_sessions", int, "sessions a topic needs (default 2)")),
)
def consolidate(ctx: JobContext, user_id: str, *, now: datetime, dry_run: bool = False,
                window_days: int = 90, min_sessions: int = 2, similarity: float = 0.72,
                merge_similarity: float = 0.88) -> dict[str, int]:
    """Consolidate ``user_id``'s recent episodes into semantic records, at ``now``.

    Args:
        ctx: The store (and synthesizer) to run against.
        user_id: The tenant.
        now: The time of the run.
        dry_run: Count what would be written; synthesize and write nothing.
        window_days: Episodes that occurred in the last this many days.
        min_sessions: Distinct sessions (threads) a topic needs without a conclusion.
        similarity: Cosine at which two episodes share a topic.
        merge_similarity: Cosine at which a topic matches an existing record.

    Returns:
        Outcomes: ``created``, ``rewritten`` (a synthesized record reinforced and
        rewritten), ``reinforced`` (a fact written by the extractor), ``unchanged``,
        ``withheld`` (the answer named a boundary), ``retired``, ``failed``, and
        ``tokens`` sent to a model.
    """
    user_id = require_user(user_id)
    now = to_utc(now)
    run = _Run(ctx, user_id, now, dry_run)
    bounds = ev.boundaries(ctx, user_id)
    existing = ev.load(ctx, user_id, layers=["semantic", "identity"], policies=_SPEAKABLE,
                       exclude_kinds=["reflection", "temporal_summary"])
    synthesized = [r for r in existing.rows
                   if r["value"]["metadata"].get("synthesis") == SYNTHESIS]
    retired = _revalidate(run, synthesized, bounds)
    existing.rows = [r for r in existing.rows if r["key"] not in retired]
    by_key = {r["key"]: r for r in existing.rows}
    synthesized = [r for r in synthesized if r["key"] not in retired]
    episodes = ev.load(ctx, user_id, layers=["episodic"], policies=_SPEAKABLE,
                       exclude_kinds=["open_loop"], since=now - timedelta(days=window_days))
    covered = bounds.covers(episodes.evidence)
    owner = {k: r["key"] for r in synthesized for k in r["value"]["metadata"]["evidence"]}
    scopes: dict[str, list[Evidence]] = {}
    for item, prefix, hidden in zip(episodes.evidence, episodes.prefixes, covered, strict=True):
        if not hidden:
            scopes.setdefault(prefix, []).append(item)
    for prefix, items in scopes.items():
        candidates = [r for r in existing.rows if r["prefix"] == prefix
                      or r["prefix"].endswith("." + IDENTITY_SCOPE)]
        for group in cluster(items, similarity=similarity):
            topic_items = [items[i] for i in group]
            if not _eligible(topic_items, min_sessions):
                continue
            target = _match(topic_items, candidates, owner, by_key, merge_similarity)
            _consolidate_topic(run, prefix, topic_items, target, bounds)
    if not dry_run:
        run.writes.log("consolidate", run.decisions, now)
        run.writes.flush(ctx)
    return {k: n for k, n in run.counts.items() if n}


def _match(items: list[Evidence], candidates: list[dict[str, Any]], owner: dict[str, str],
           by_key: dict[str, dict[str, Any]], threshold: float) -> dict[str, Any] | None:
    """The existing record of this topic: derived from one of its episodes, else the
    nearest record by vector at or above ``threshold``."""
    for e in items:
        if e.key in owner and owner[e.key] in by_key:
            return by_key[owner[e.key]]
    with_vec = [c for c in candidates if c["vector"] is not None]
    vecs = [e.vector for e in items if e.vector is not None]
    if not with_vec or not vecs:
        return None
    import numpy as np

    probes = [*vecs, np.mean(np.asarray(vecs, dtype=np.float32), axis=0)]
    sims = cosine_matrix(probes, [c["vector"] for c in with_vec]).max(axis=0)
    best = int(sims.argmax())
    return with_vec[best] if float(sims[best]) > threshold else None


def _consolidate_topic(run: _Run, prefix: str, items: list[Evidence],
                       target: dict[str, Any] | None, bounds: ev.Boundaries) -> None:
    topic = topic_label(items)
    if target is not None:
        meta = target["value"]["metadata"]
        known = set(meta.get("evidence", []))
        if {e.key for e in items} <= known:
            run.counts["unchanged"] += 1
            return
        if meta.get("synthesis") != SYNTHESIS:
            # The extractor's fact keeps the user's wording: reinforced and linked only.
            run.counts["reinforced"] += 1
            if not run.dry_run:
                _reinforce_fact(run, target, items)
            return
    if run.dry_run:
        run.counts["rewritten" if target is not None else "created"] += 1
        return
    earlier = _earlier_evidence(run, target, items) if target is not None else []
    answer = run.synthesize(earlier + items, target["value"]["content"] if target else None,
                            topic, "rewritten" if target is not None else "created")
    if answer is None:
        return
    if bounds.named_in(answer.content):
        run.counts["withheld"] += 1
        run.decisions[-1].update(action="withheld", reason="names a boundary")
        return
    reason = f"consolidated again from {len(earlier) + len(items)} memories"
    key = run.write(prefix, earlier + items, answer, topic, target, reason)
    run.decisions[-1]["key"] = key
    run.counts["rewritten" if target is not None else "created"] += 1


def _earlier_evidence(run: _Run, target: dict[str, Any], items: list[Evidence]
                      ) -> list[Evidence]:
    """The record's evidence before this run that still holds (maybe older than the window)."""
    bounds = ev.Boundaries()
    valid, _ = ev.lost_evidence(run.ctx, run.user_id, [target], bounds)[target["key"]]
    new = {e.key for e in items}
    return [e for e in valid if e.key not in new]


def _reinforce_fact(run: _Run, target: dict[str, Any], items: list[Evidence]) -> None:
    run.writes.reinforce(target["key"], [e.key for e in items], run.now)
    run.decisions.append({"job": "consolidate", "action": "reinforced", "key": target["key"],
                          "evidence": [e.key for e in items]})


def _revalidate(run: _Run, records: list[dict[str, Any]], bounds: ev.Boundaries) -> set[str]:
    """Rewrite or retire the synthesized records whose evidence was lost or is covered;
    returns the keys retired."""
    if not records:
        return set()
    state = ev.lost_evidence(run.ctx, run.user_id, records, bounds)
    retire: list[str] = []
    for r in records:
        valid, lost = state[r["key"]]
        covered = bounds.named_in(r["value"]["content"]) or bounds.covers(
            [ev.evidence_of(r["key"], r["value"], r["vector"])])[0]
        if not lost and not covered:
            continue
        if covered or not _eligible(valid, 2) or len(valid) < 2:
            retire.append(r["key"])
            continue
        if run.dry_run:
            run.counts["rewritten"] += 1
            continue
        answer = run.synthesize(valid, r["value"]["content"], r["value"]["metadata"].get(
            "topic", ""), "rewritten")
        if answer is None:
            continue
        reason = f"rewritten: {len(lost)} of its memories were forgotten or contradicted"
        run.write(r["prefix"], valid, answer, answer.topic, r, reason)
        run.counts["rewritten"] += 1
    run.counts["retired"] += len(retire)
    if retire and not run.dry_run:
        run.writes.retire(retire, run.now, "retired: its evidence was forgotten, "
                          "contradicted or covered by a boundary")
    return set(retire)
