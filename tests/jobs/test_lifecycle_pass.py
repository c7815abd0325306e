"""The nightly job's one statement (``sql.transitions.lifecycle_pass``) leaves a user's
memories and scores exactly as the rescore followed by one ``UPDATE`` per rule does,
chained moves included, and a second pass at the same time changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from langmem_layer import MemorySettings
from langmem_layer.jobs.lifecycle_jobs import lifecycle_thresholds
from langmem_layer.sql import transitions as lsql
from langmem_layer.sql.generic_items import VALUE
from langmem_layer.sql.moved import UPDATED
from langmem_layer.store.ops import LifecycleOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import HistoryEntry, Kind, Layer, LoopStatus, MemoryRecord, Status
from tests.fakes import Clock

NS = ("memories", "u1", "work")


def put(store: PostgresMemoryStore, key: str, kind: Kind, layer: Layer, at: datetime,
        **extra: Any) -> None:
    rec = MemoryRecord(content=f"Memory {key} of the test.", kind=kind, layer=layer,
                       occurred_at=at, last_accessed_at=at, **extra)
    store.put(NS, key, rec.to_value())


def fill(store: PostgresMemoryStore, t0: datetime) -> None:
    """A memory for each rule, one for two rules in a row, and ones no rule moves."""
    old = t0 - timedelta(days=200)
    stale_at = HistoryEntry(at=t0 - timedelta(days=120), event="status", old="active",
                            new="stale", reason="episodic: not reinforced for 30 days")
    put(store, "stale-long", Kind.EPISODIC_EVENT, Layer.EPISODIC, old,
        status=Status.STALE, history=[stale_at])
    put(store, "ephemeral", Kind.PROFILE_FACT, Layer.SEMANTIC, t0 - timedelta(days=5),
        metadata={"ephemeral": True})
    put(store, "event", Kind.EPISODIC_EVENT, Layer.EPISODIC, t0 - timedelta(days=40))
    put(store, "loop-due", Kind.OPEN_LOOP, Layer.EPISODIC, t0 - timedelta(days=1),
        due_at=t0 - timedelta(days=10), loop_status=LoopStatus.OPEN)
    put(store, "loop-silent", Kind.OPEN_LOOP, Layer.EPISODIC, t0 - timedelta(days=70),
        loop_status=LoopStatus.OPEN)
    # Goes stale (ephemeral) and is closed (past due) in the same run.
    put(store, "loop-ephemeral", Kind.OPEN_LOOP, Layer.EPISODIC, t0 - timedelta(days=9),
        due_at=t0 - timedelta(days=8), loop_status=LoopStatus.OPEN,
        metadata={"ephemeral": True})
    # Stale by silence before the run, not after going stale (updated now): stays open.
    put(store, "loop-ephemeral-silent", Kind.OPEN_LOOP, Layer.EPISODIC, old,
        loop_status=LoopStatus.OPEN, metadata={"ephemeral": True})
    put(store, "habit", Kind.PROTOCOL, Layer.PROCEDURAL, t0 - timedelta(days=2),
        success_count=1, failure_count=6)
    put(store, "fact-old", Kind.PROFILE_FACT, Layer.SEMANTIC, old)
    put(store, "fact-new", Kind.PROFILE_FACT, Layer.SEMANTIC, t0 - timedelta(days=1))
    put(store, "fact-confirmed", Kind.PROFILE_FACT, Layer.SEMANTIC, t0 - timedelta(days=1),
        metadata={"needs_revalidation": True})
    put(store, "pinned", Kind.EPISODIC_EVENT, Layer.EPISODIC, old, pinned=True)
    put(store, "summary", Kind.TEMPORAL_SUMMARY, Layer.SEMANTIC, t0 - timedelta(days=30))


def state(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Every memory's value and updated_at as readers see them (the moves laid over the
    stored ones), and every stored score, of user u1."""
    items = {k: (v, u) for k, v, u in conn.execute(
        f"SELECT i.key, {VALUE} AS value, {UPDATED} AS updated_at FROM langmem_items i "
        "WHERE i.user_id = 'u1'").fetchall()}
    scores = dict(conn.execute(
        "SELECT key, decay FROM langmem_decay WHERE user_id = 'u1'").fetchall())
    return {"items": items, "scores": scores}


def per_rule(conn: psycopg.Connection[Any], now: datetime, kw: dict[str, Any],
             rules: list[lsql.Transition]) -> dict[str, int]:
    """The rescore, then each rule's UPDATE on its candidates, in order."""
    row = conn.execute(*lsql.rescore_decay("u1", now, rules=rules, **kw)).fetchone()
    assert row is not None
    counts = {"rescored": row[0], "flagged": row[1]}
    for n, rule in enumerate(rules):
        keys = row[3 + 2 * n]
        counts[rule.name] = len(conn.execute(*lsql.apply_transition(
            "u1", rule, now, among=(list(row[2 + 2 * n]), list(keys)))).fetchall()) \
            if keys else 0
    return counts


def one_pass(conn: psycopg.Connection[Any], now: datetime, kw: dict[str, Any],
             rules: list[lsql.Transition]) -> dict[str, int]:
    row = conn.execute(*lsql.lifecycle_pass("u1", now, rules=rules, **kw)).fetchone()
    assert row is not None
    return {"rescored": row[0], "flagged": row[1],
            **{rule.name: row[2 + n] for n, rule in enumerate(rules)}}


def test_one_pass_equals_the_rules_one_by_one(store: PostgresMemoryStore, pg_uri: str,
                                              clock: Clock) -> None:
    t0 = clock.now
    fill(store, t0)
    st = MemorySettings()
    rules = lsql.transitions(**lifecycle_thresholds(st))
    kw = {"half_life_days": st.summary_half_life_days, "flag_below": st.decay_flag_below}
    now = t0 + timedelta(hours=1)
    with psycopg.connect(pg_uri) as conn:
        # Each memory last written when last seen (the store stamps the clock's now).
        conn.execute("UPDATE langmem_items SET updated_at = "
                     "(value ->> 'last_accessed_at')::timestamptz WHERE user_id = 'u1'")
        conn.commit()
        before = state(conn)
        expected_counts = per_rule(conn, now, kw, rules)
        expected = state(conn)
        conn.rollback()
        assert state(conn) == before
        counts = one_pass(conn, now, kw, rules)
        assert counts == expected_counts
        assert state(conn) == expected
        # Every rule moved something; the chained loop went stale, then was closed.
        assert all(counts.values()), counts
        value = expected["items"]["loop-ephemeral"][0]
        assert [(h["event"], h["new"]) for h in value["history"]] == [
            ("status", "stale"), ("status", "archived"), ("loop_status", "closed")]
        assert expected["items"]["loop-ephemeral-silent"][0]["loop_status"] == "open"
        assert expected["items"]["pinned"] == before["items"]["pinned"]
        # Again at the same time: nothing left to move, no score changed.
        again = one_pass(conn, now, kw, rules)
        assert again == dict.fromkeys(again, 0) | {"flagged": 0}
        assert state(conn) == expected
        conn.commit()


def test_each_users_pass_is_planned_for_that_user(store: PostgresMemoryStore,
                                                  clock: Clock) -> None:
    # The pass's text is one for every user, so the connection prepares it; a generic
    # plan reads user_id = $1 as the average user (a large user among the first five
    # made PostgreSQL keep one that scanned like them for every small user after).
    now = clock()
    thresholds = lifecycle_thresholds(MemorySettings())
    for n in range(8):
        store.put(("memories", f"p{n}", "work"), "m", MemoryRecord(
            content="A memory of the test.", kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
            occurred_at=now, last_accessed_at=now).to_value())
        (counts,) = store.batch([LifecycleOp(f"p{n}", now, 30.0, 0.05, thresholds)])
        assert counts["rescored"] == 1
    plans = store.conn.execute(
        "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
        "WHERE statement LIKE 'WITH f AS MATERIALIZED%'").fetchone()
    assert plans == (0, 8), plans
