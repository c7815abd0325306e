"""The memory lifecycle on the real database: decay scores computed in SQL,
status transitions over 120 days of moved time, history, habits, purge."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import psycopg

from langmem_layer import MemorySettings
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.jobs.runs import run_users
from langmem_layer.read.rank import decay_score
from langmem_layer.store import ops as mops
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, LoopStatus, MemoryRecord, Status
from tests.fakes import Clock

NS = ("memories", "u1", "work")


def put(store: PostgresMemoryStore, key: str, content: str, kind: Kind, layer: Layer,
        at: datetime, ns: tuple[str, ...] = NS, **extra: Any) -> MemoryRecord:
    rec = MemoryRecord(content=content, kind=kind, layer=layer, occurred_at=at,
                       last_accessed_at=at, **extra)
    store.put(ns, key, rec.to_value())
    return rec


def value(store: PostgresMemoryStore, key: str, user: str = "u1") -> dict[str, Any]:
    (found,) = store.batch([mops.FindMemoryOp(user, key)])
    assert found is not None, key
    return dict(found.value)


def statuses(store: PostgresMemoryStore, keys: list[str]) -> dict[str, str]:
    return {k: value(store, k)["status"] for k in keys}


def run(ctx: JobContext, now: datetime, user: str = "u1", **kw: Any) -> dict[str, int]:
    return JOBS["lifecycle"].function(ctx, user, now=now, **kw)


def moved(counts: dict[str, int]) -> dict[str, int]:
    """The transitions of a run that moved something (decay rescoring left out)."""
    return {k: n for k, n in counts.items() if n and k not in ("rescored", "flagged")}


def test_decay_in_sql_equals_the_read_path(store: PostgresMemoryStore, pg_uri: str,
                                           clock: Clock) -> None:
    t0 = clock.now
    specs = [
        (Kind.PROFILE_FACT, Layer.SEMANTIC, 0.9, 0, 0.0),
        (Kind.PROFILE_FACT, Layer.SEMANTIC, 0.9, 0, 1.5),
        (Kind.PREFERENCE, Layer.PROCEDURAL, 0.7, 4, 10.25),
        (Kind.PROFILE_FACT, Layer.IDENTITY, 1.0, 20, 200.0),
        (Kind.REFLECTION, Layer.SEMANTIC, 0.8, 3, 90.0),
        (Kind.TEMPORAL_SUMMARY, Layer.EPISODIC, 0.6, 0, 400.0),  # episodic wins
        (Kind.REFLECTION, Layer.SEMANTIC, 0.5, 0, 365.7),
        (Kind.EPISODIC_EVENT, Layer.EPISODIC, 0.75, 2, 33.3),
        (Kind.PROFILE_FACT, Layer.SEMANTIC, 0.4, 1, -2.0),  # accessed "after" now: t = 0
    ]
    for n, (kind, layer, conf, count, age) in enumerate(specs):
        put(store, f"m{n}", f"Memory number {n} here.", kind, layer,
            t0 - timedelta(days=age), confidence=conf, access_count=count)
    # Reinforcement writes the access overlay column; the SQL reads through it too.
    store.batch([mops.TouchOp("u1", ("m1", "m2"), t0 - timedelta(days=0.5))])
    now = t0 + timedelta(days=3, hours=7, seconds=13)
    settings = MemorySettings(summary_half_life_by_user={"u1": 120.0})
    ctx = JobContext(store, settings=settings)
    counts = run(ctx, now)
    assert counts["rescored"] == len(specs)
    with psycopg.connect(pg_uri) as conn:
        stored = dict(conn.execute(
            "SELECT key, decay FROM langmem_decay WHERE user_id = 'u1'").fetchall())
    for n in range(len(specs)):
        rec = MemoryRecord.model_validate(value(store, f"m{n}"))
        expected = decay_score(rec, now, half_life_days=120.0)
        assert math.isclose(stored[f"m{n}"], expected, rel_tol=1e-9, abs_tol=1e-12), n
    # A per-user half-life: 120 days for u1 (the default 180 for others).
    assert settings.half_life_days("u1") == 120.0 and settings.half_life_days("u2") == 180.0
    # The same `now` again: nothing to rescore, nothing moves.
    assert run(ctx, now) == dict.fromkeys(counts, 0)


def test_transitions_over_120_days(store: PostgresMemoryStore, clock: Clock) -> None:
    t0 = clock.now
    clock.advance(days=-100)  # a fact written (confirmed) 100 days before t0
    put(store, "fact", "Works at Acme Robotics.", Kind.PROFILE_FACT, Layer.SEMANTIC, clock.now)
    clock.now = t0
    put(store, "eph", "Has a headache this afternoon.", Kind.PROFILE_FACT, Layer.SEMANTIC, t0,
        metadata={"ephemeral": True})
    put(store, "epi", "Went hiking at Mount Tam.", Kind.EPISODIC_EVENT, Layer.EPISODIC, t0)
    put(store, "loop_due", "Has a dentist appointment.", Kind.OPEN_LOOP, Layer.EPISODIC, t0,
        due_at=t0 + timedelta(days=5), loop_status=LoopStatus.OPEN)
    put(store, "loop_quiet", "Wants to learn the banjo.", Kind.OPEN_LOOP, Layer.EPISODIC, t0)
    put(store, "habit_bad", "Always drafts replies in bullet points.", Kind.PREFERENCE,
        Layer.PROCEDURAL, t0, success_count=1, failure_count=4)
    put(store, "habit_ok", "Always starts with a summary line.", Kind.PREFERENCE,
        Layer.PROCEDURAL, t0, success_count=3, failure_count=2)
    put(store, "pinned", "Met Sam at the 2019 reunion.", Kind.EPISODIC_EVENT, Layer.EPISODIC,
        t0 - timedelta(days=400), pinned=True, metadata={"ephemeral": True})
    pinned_before = value(store, "pinned")
    keys = ["fact", "eph", "epi", "loop_due", "loop_quiet", "habit_bad", "habit_ok"]
    ctx = JobContext(store, settings=MemorySettings())
    A, S, X = Status.ACTIVE.value, Status.STALE.value, Status.ARCHIVED.value
    # day: (outcomes moved that day, statuses after)
    timeline: dict[float, tuple[dict[str, int], dict[str, str]]] = {
        0: ({"habits_retired": 1}, dict(fact=A, eph=A, epi=A, loop_due=A, loop_quiet=A,
                                         habit_bad=X, habit_ok=A)),
        2.9: ({}, {}),
        3: ({"stale_ephemeral": 1}, dict(eph=S)),
        11.9: ({}, {}),
        12: ({"loops_closed": 1}, dict(loop_due=X)),
        29.9: ({}, {}),
        30: ({"stale_episodic": 1}, dict(epi=S)),
        59.9: ({}, {}),
        60: ({"loops_closed": 1}, dict(loop_quiet=X)),
        80: ({"needs_revalidation": 1}, {}),
        92.9: ({}, {}),
        93: ({"archived": 1}, dict(eph=X)),
        119.9: ({}, {}),
        120: ({"archived": 1}, dict(epi=X)),
    }
    expected = {k: A for k in keys}
    for day, (outcomes, changes) in timeline.items():
        now = t0 + timedelta(days=day)
        assert moved(run(ctx, now, dry_run=True)) == outcomes, day  # counts, moves nothing
        assert moved(run(ctx, now)) == outcomes, day
        expected.update(changes)
        assert statuses(store, keys) == expected, day
        assert moved(run(ctx, now)) == {}, day  # idempotent for the same now
    assert value(store, "pinned") == pinned_before
    # Closed loops say so; the fact is flagged, not moved.
    assert value(store, "loop_due")["loop_status"] == "closed"
    assert value(store, "fact")["metadata"] == {"needs_revalidation": True}
    # Each change is in the memory's history, oldest first, with its reason and time.
    (hist,) = store.batch([mops.MemoryHistoryOp("u1", "eph")])
    assert [(h.old, h.new, h.at - t0) for h in hist] == [
        ("active", "stale", timedelta(days=3)), ("stale", "archived", timedelta(days=93))]
    assert hist[0].reason == "ephemeral: not referenced for 3 days"
    (hist,) = store.batch([mops.MemoryHistoryOp("u1", "loop_due")])
    assert [(h.event, h.new) for h in hist] == [("status", "archived"),
                                                ("loop_status", "closed")]
    assert hist[0].reason == "open loop: due date passed over 7 days ago"
    (hist,) = store.batch([mops.MemoryHistoryOp("u1", "habit_bad")])
    assert hist[0].reason == "retired: failed 4 of 5 times"
    assert store.batch([mops.MemoryHistoryOp("u1", "pinned"),
                        mops.MemoryHistoryOp("u2", "eph")]) == [[], None]


def test_revalidation_flag_clears_when_confirmed(store: PostgresMemoryStore,
                                                 clock: Clock) -> None:
    t0 = clock.now
    put(store, "fact", "Lives in Lisbon.", Kind.PROFILE_FACT, Layer.SEMANTIC, t0)
    ctx = JobContext(store, settings=MemorySettings(lifecycle_revalidate_after_days=10))
    assert moved(run(ctx, t0 + timedelta(days=10))) == {"needs_revalidation": 1}
    clock.advance(days=11)  # confirmed again: the write path rewrites it
    rec = MemoryRecord.model_validate(value(store, "fact"))
    store.put(NS, "fact", rec.model_copy(update={"reinforcement_count": 1}).to_value())
    assert moved(run(ctx, clock.now)) == {"revalidated": 1}
    assert "needs_revalidation" not in value(store, "fact")["metadata"]
    (hist,) = store.batch([mops.MemoryHistoryOp("u1", "fact")])
    assert [(h.event, h.old, h.new) for h in hist] == [
        ("flag", None, "needs_revalidation"), ("flag", "needs_revalidation", None)]


def test_habit_outcomes_retire_it(store: PostgresMemoryStore, clock: Clock) -> None:
    put(store, "h", "Always proposes three options.", Kind.PREFERENCE, Layer.PROCEDURAL,
        clock.now)
    put(store, "f", "Works at Acme Robotics.", Kind.PROFILE_FACT, Layer.SEMANTIC, clock.now)
    ctx = JobContext(store, settings=MemorySettings())
    for success in (True, False, False, True):
        store.batch([mops.RecordOutcomeOp("u1", "h", success)])
    assert moved(run(ctx, clock.now)) == {}
    assert store.batch([mops.RecordOutcomeOp("u1", "h", False)]) == [(2, 3)]
    assert moved(run(ctx, clock.now)) == {}  # 3 of 5 is not above 0.6
    assert store.batch([mops.RecordOutcomeOp("u1", "h", False)]) == [(2, 4)]
    assert moved(run(ctx, clock.now)) == {"habits_retired": 1}
    # Only a procedural memory of the user counts outcomes.
    assert store.batch([mops.RecordOutcomeOp("u1", "f", True),
                        mops.RecordOutcomeOp("u2", "h", True)]) == [None, None]


def test_purge_expired_takes_embeddings_links_and_cache(store: PostgresMemoryStore,
                                                        pg_uri: str, clock: Clock) -> None:
    t0 = clock.now
    put(store, "keep", "Parks on level 3.", Kind.PROFILE_FACT, Layer.SEMANTIC, t0)
    put(store, "gone", "Temporary door code is 4821.", Kind.PROFILE_FACT, Layer.SEMANTIC, t0,
        expires_at=t0 + timedelta(days=1))
    put(store, "gone", "Temporary door code is 4821.", Kind.PROFILE_FACT, Layer.SEMANTIC, t0,
        ns=("memories", "u2", "work"), expires_at=t0 + timedelta(days=1))
    store.batch([mops.LinkOp("u1", "gone", "elaborates", "keep")])
    ctx = JobContext(store)
    purge = JOBS["purge-expired"].function
    assert purge(ctx, "u1", now=t0) == {"purged": 0, "links": 0, "cached": 0}
    later = t0 + timedelta(days=2)
    assert purge(ctx, "u1", now=later, dry_run=True)["purged"] == 1
    assert purge(ctx, "u1", now=later) == {"purged": 1, "links": 1, "cached": 1}
    assert purge(ctx, "u1", now=later) == {"purged": 0, "links": 0, "cached": 0}
    with psycopg.connect(pg_uri) as conn:
        left = conn.execute("SELECT user_id, key FROM langmem_embeddings ORDER BY 1, 2").fetchall()
        cached = conn.execute("SELECT user_id FROM langmem_embedding_cache").fetchall()
    assert left == [("u1", "keep"), ("u2", "gone")]  # the other user's copy stays
    assert ("u2",) in cached and len(cached) == 2


def test_whole_store_job_runs_each_user(store: PostgresMemoryStore, clock: Clock) -> None:
    t0 = clock.now
    for user in ("a", "b", "c"):
        put(store, "e", "Went to the lake.", Kind.EPISODIC_EVENT, Layer.EPISODIC, t0,
            ns=("memories", user, "work"))
    ctx = JobContext(store, settings=MemorySettings())
    result = run_users(ctx, JOBS["lifecycle"], now=t0 + timedelta(days=31))
    assert result.counts["stale_episodic"] == 3
    assert JOBS["lifecycle"].per_user and JOBS["purge-expired"].schedule == "monthly"


def test_memories_are_dated_by_the_flow_clock_not_the_store_clock(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    """A write replayed with ``now=`` dates the row by that time: the lifecycle measures
    silence from ``updated_at``, so a row dated by the store's clock would never age."""
    from langchain_core.messages import HumanMessage

    from langmem_layer import MemoryLayer

    layer = MemoryLayer(store, extraction="inline", clock=clock)
    then = clock.now - timedelta(days=200)
    kept = layer.remember("u1", "Keeps a sourdough starter named Bob.", now=then)
    layer.ingest("u1", [HumanMessage("I'm visiting my parents next weekend.")], now=then)
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT key, created_at, updated_at FROM langmem_items "
            "WHERE user_id = %s AND is_memory", ("u1",)).fetchall()
    assert {r[0] for r in rows} >= {kept.key} and len(rows) >= 2
    assert all(r[1] == then and r[2] == then for r in rows), rows
    # Dated correctly, the visit's open loop ages out when the lifecycle runs.
    counts = run(JobContext(store), then + timedelta(days=120))
    assert counts["loops_closed"] >= 1
