"""The stored decay score lives in ``langmem_decay``, one narrow row per memory: written
by the nightly lifecycle without rewriting the memory, gone with the memory, and the
rules still chain within one run now that they run on one scan's candidates."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from langmem_layer import MemorySettings
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.store import ops as mops
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, LoopStatus, MemoryRecord
from tests.fakes import Clock

NS = ("memories", "u1", "work")


def put(store: PostgresMemoryStore, key: str, kind: Kind, layer: Layer, at: Any,
        ns: tuple[str, ...] = NS, **extra: Any) -> None:
    rec = MemoryRecord(content=f"Memory {key} of the test.", kind=kind, layer=layer,
                       occurred_at=at, last_accessed_at=at, **extra)
    store.put(ns, key, rec.to_value())


def scores(pg_uri: str) -> dict[tuple[str, str], float]:
    with psycopg.connect(pg_uri) as conn:
        return {(u, k): d for u, k, d in conn.execute(
            "SELECT user_id, key, decay FROM langmem_decay").fetchall()}


def item_versions(pg_uri: str) -> dict[str, Any]:
    """Each memory row's physical version: a rescore leaves the memory rows as they are."""
    with psycopg.connect(pg_uri) as conn:
        return dict(conn.execute("SELECT key, xmin::text FROM langmem_items").fetchall())


def test_rescore_writes_scores_not_memories(store: PostgresMemoryStore, pg_uri: str,
                                            clock: Clock) -> None:
    t0 = clock.now
    put(store, "fact", Kind.PROFILE_FACT, Layer.SEMANTIC, t0)
    put(store, "summary", Kind.TEMPORAL_SUMMARY, Layer.SEMANTIC, t0)
    put(store, "pinned", Kind.PROFILE_FACT, Layer.SEMANTIC, t0, pinned=True)
    ctx = JobContext(store, settings=MemorySettings())
    versions = item_versions(pg_uri)
    lifecycle = JOBS["lifecycle"].function
    assert lifecycle(ctx, "u1", now=t0 + timedelta(days=1))["rescored"] == 2
    first = scores(pg_uri)
    assert set(first) == {("u1", "fact"), ("u1", "summary")}  # pinned: exempt
    assert item_versions(pg_uri) == versions
    # The next night moves every score, in place; still no memory row rewritten.
    assert lifecycle(ctx, "u1", now=t0 + timedelta(days=2))["rescored"] == 2
    second = scores(pg_uri)
    assert all(second[k] < first[k] for k in first)
    assert item_versions(pg_uri) == versions
    # A dry run computes, writes nothing.
    counts = lifecycle(ctx, "u1", now=t0 + timedelta(days=3), dry_run=True)
    assert counts["rescored"] == 2 and scores(pg_uri) == second


def test_scores_go_with_their_memories(store: PostgresMemoryStore, pg_uri: str,
                                       clock: Clock) -> None:
    t0 = clock.now
    for key in ("a", "b", "gone"):
        put(store, key, Kind.PROFILE_FACT, Layer.SEMANTIC, t0,
            expires_at=t0 + timedelta(days=1) if key == "gone" else None)
    put(store, "a", Kind.PROFILE_FACT, Layer.SEMANTIC, t0, ns=("memories", "u2", "work"))
    ctx = JobContext(store, settings=MemorySettings())
    for user in ("u1", "u2"):
        JOBS["lifecycle"].function(ctx, user, now=t0 + timedelta(hours=12))
    assert set(scores(pg_uri)) == {("u1", "a"), ("u1", "b"), ("u1", "gone"), ("u2", "a")}
    store.delete(NS, "b")
    assert JOBS["purge-expired"].function(ctx, "u1", now=t0 + timedelta(days=2))[
        "purged"] == 1
    # Only the deleted memories' scores went: the same key of another user stays.
    assert set(scores(pg_uri)) == {("u1", "a"), ("u2", "a")}


def test_one_run_chains_rules_on_the_same_memory(store: PostgresMemoryStore,
                                                 clock: Clock) -> None:
    """An ephemeral open loop, unmentioned and well past its due date, goes stale and is
    closed in the same run, as when each rule read all the user's memories."""
    t0 = clock.now
    put(store, "loop", Kind.OPEN_LOOP, Layer.EPISODIC, t0, due_at=t0 + timedelta(days=1),
        loop_status=LoopStatus.OPEN, metadata={"ephemeral": True})
    put(store, "quiet", Kind.PROFILE_FACT, Layer.SEMANTIC, t0)
    ctx = JobContext(store, settings=MemorySettings())
    counts = JOBS["lifecycle"].function(ctx, "u1", now=t0 + timedelta(days=10))
    assert {k: n for k, n in counts.items() if n and k not in ("rescored", "flagged")} == {
        "stale_ephemeral": 1, "loops_closed": 1}
    (hist,) = store.batch([mops.MemoryHistoryOp("u1", "loop")])
    assert [(h.event, h.new) for h in hist] == [
        ("status", "stale"), ("status", "archived"), ("loop_status", "closed")]
    # Nothing a rule may move: no rule statement at all, and the counts say 0.
    again = JOBS["lifecycle"].function(ctx, "u1", now=t0 + timedelta(days=10))
    assert again == dict.fromkeys(counts, 0)
