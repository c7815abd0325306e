"""Lifecycle moves are heap-only-tuple (HOT) updates: they set only columns no index of
``langmem_items`` reads (checked against the catalog), PostgreSQL updates the moved
rows in place (counted by its statistics), and every reader still sees the moved
status, loop status, flag, history and time, which a write of the memory folds into
its value."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.jobs.lifecycle_jobs import lifecycle_thresholds
from langmem_layer.sql import migrations as migsql
from langmem_layer.sql import transitions as lsql
from langmem_layer.store import ops as mops
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, LoopStatus, MemoryRecord, Status
from tests.fakes import Clock

NS = ("memories", "u1", "work")
SETTINGS = MemorySettings()
RULES = lsql.transitions(**lifecycle_thresholds(SETTINGS))
DECAY = {"half_life_days": SETTINGS.summary_half_life_days,
         "flag_below": SETTINGS.decay_flag_below}


def indexed_columns(conn: psycopg.Connection[Any]) -> set[str]:
    """The columns of ``langmem_items`` any of its indexes reads: key columns, and the
    columns named in index expressions and partial-index predicates (all of them when
    an expression reads the whole row)."""
    columns = {r[0] for r in conn.execute(
        """SELECT a.attname FROM pg_attribute a
        WHERE a.attrelid = 'langmem_items'::regclass AND a.attnum > 0
          AND NOT a.attisdropped""").fetchall()}
    found: set[str] = set()
    for keys, exprs, pred in conn.execute(
            """SELECT (SELECT array_agg(a.attname) FROM pg_attribute a
                       WHERE a.attrelid = x.indrelid AND a.attnum = ANY(x.indkey::int2[])),
                      pg_get_expr(x.indexprs, x.indrelid), pg_get_expr(x.indpred, x.indrelid)
               FROM pg_index x WHERE x.indrelid = 'langmem_items'::regclass""").fetchall():
        found.update(keys or ())
        text = f"{exprs or ''} {pred or ''}"
        if re.search(r"\blangmem_items\b", text):  # a whole-row reference
            return columns
        found.update(c for c in columns if re.search(rf"\b{c}\b", text))
    return found


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and quotes."""
    parts, depth, quoted, start = [], 0, False, 0
    for n, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            parts.append(text[start:n])
            start = n + 1
    parts.append(text[start:])
    return parts


def set_columns(sql: str) -> list[set[str]]:
    """The columns each ``UPDATE langmem_items`` of ``sql`` assigns, one set per UPDATE."""
    out = []
    for m in re.finditer(r"UPDATE langmem_items i\s+SET\s+(.*?)\s+(?:FROM|WHERE)\s", sql,
                         re.DOTALL):
        out.append({a.split("=", 1)[0].strip() for a in _split_top(m.group(1))})
    return out


def test_moves_set_only_columns_no_index_reads(pg_uri: str) -> None:
    now = datetime(2026, 1, 1, tzinfo=datetime.now().astimezone().tzinfo)
    with psycopg.connect(pg_uri) as conn:
        indexed = indexed_columns(conn)
    # What a move used to write is what the indexes read (the reason for all this).
    assert {"value", "updated_at", "user_id", "prefix", "key", "is_memory"} <= indexed
    assert not indexed & set(lsql.MOVE_COLUMNS)
    statements = [lsql.lifecycle_pass("u1", now, rules=RULES, **DECAY)[0]]
    statements += [lsql.apply_transition("u1", rule, now)[0] for rule in RULES]
    for sql in statements:
        (assigned,) = set_columns(sql)
        assert assigned == set(lsql.MOVE_COLUMNS), sql
        assert not assigned & indexed


def put(store: PostgresMemoryStore, key: str, kind: Kind, layer: Layer, at: datetime,
        ns: tuple[str, ...] = NS, **extra: Any) -> None:
    rec = MemoryRecord(content=f"Memory {key} of the test, about the trip to Lisbon.",
                       kind=kind, layer=layer, occurred_at=at, last_accessed_at=at, **extra)
    store.put(ns, key, rec.to_value())


def fill_night(store: PostgresMemoryStore, t0: datetime, n: int) -> dict[str, str]:
    """``n`` memories of which one in ten is due to move (every rule), the rest not:
    a regular night. Returns the movers' keys and the rule that moves each."""
    old = t0 - timedelta(days=200)
    movers = {}
    for i in range(n):
        key = f"m{i:04d}"
        if i % 10 != 5:
            put(store, key, Kind.PROFILE_FACT, Layer.SEMANTIC, t0 - timedelta(days=1))
            continue
        match (i // 10) % 5:
            case 0:
                put(store, key, Kind.PROFILE_FACT, Layer.SEMANTIC, t0 - timedelta(days=20),
                    metadata={"ephemeral": True})
                movers[key] = "stale_ephemeral"
            case 1:
                put(store, key, Kind.EPISODIC_EVENT, Layer.EPISODIC, t0 - timedelta(days=40))
                movers[key] = "stale_episodic"
            case 2:
                put(store, key, Kind.OPEN_LOOP, Layer.EPISODIC, t0 - timedelta(days=1),
                    due_at=t0 - timedelta(days=10), loop_status=LoopStatus.OPEN)
                movers[key] = "loops_closed"
            case 3:
                put(store, key, Kind.PROTOCOL, Layer.PROCEDURAL, t0 - timedelta(days=2),
                    success_count=1, failure_count=6)
                movers[key] = "habits_retired"
            case _:
                put(store, key, Kind.PROFILE_FACT, Layer.SEMANTIC, old)
                movers[key] = "needs_revalidation"
    return movers


def hot_share(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """The updates of ``langmem_items`` by ``conn``'s backend not yet flushed to the
    statistics (its transactions so far, on a connection of its own) and how many of
    them were HOT."""
    row = conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
        "WHERE relname = 'langmem_items'").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_nights_moves_are_hot(store: PostgresMemoryStore, pg_uri: str,
                                clock: Clock) -> None:
    t0 = clock.now
    movers = fill_night(store, t0, 400)
    now = t0 + timedelta(hours=1)
    with psycopg.connect(pg_uri) as conn:
        conn.execute("UPDATE langmem_items SET updated_at = "
                     "(value ->> 'last_accessed_at')::timestamptz WHERE user_id = 'u1'")
    expected = {rule: sum(1 for r in movers.values() if r == rule)
                for rule in set(movers.values())}
    assert len(movers) == 40 and len(expected) == 5
    # The nightly statement: each memory moved is one update, and in place.
    with psycopg.connect(pg_uri) as conn:
        row = conn.execute(*lsql.lifecycle_pass("u1", now, rules=RULES, **DECAY)).fetchone()
        assert row is not None
        moved = dict(zip((r.name for r in RULES), row[2:], strict=True))
        assert {k: n for k, n in moved.items() if n} == expected
        updates, hot = hot_share(conn)
        assert updates == len(movers)
        assert hot >= 0.9 * updates, (hot, updates)
        conn.rollback()
    # One UPDATE per rule (apply_transition), the same.
    with psycopg.connect(pg_uri) as conn:
        for rule in RULES:
            conn.execute(*lsql.apply_transition("u1", rule, now))
        updates, hot = hot_share(conn)
        assert updates == len(movers)
        assert hot >= 0.9 * updates, (hot, updates)
        conn.rollback()


def raw(pg_uri: str, key: str) -> tuple[dict[str, Any], Any, Any, Any]:
    """The stored value, moved, updated_at and moved_at of one memory of u1."""
    with psycopg.connect(pg_uri) as conn:
        row = conn.execute("SELECT value, moved, updated_at, moved_at FROM langmem_items "
                           "WHERE user_id = 'u1' AND key = %s", (key,)).fetchone()
    assert row is not None
    return row[0], row[1], row[2], row[3]


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline", clock=clock)


def test_every_reader_sees_the_moves_and_a_write_folds_them(
        store: PostgresMemoryStore, layer: MemoryLayer, pg_uri: str, clock: Clock) -> None:
    t0 = clock.now
    put(store, "event", Kind.EPISODIC_EVENT, Layer.EPISODIC, t0 - timedelta(days=40))
    put(store, "loop", Kind.OPEN_LOOP, Layer.EPISODIC, t0 - timedelta(days=1),
        due_at=t0 - timedelta(days=10), loop_status=LoopStatus.OPEN)
    put(store, "fact", Kind.PROFILE_FACT, Layer.SEMANTIC, t0 - timedelta(days=1))
    put(store, "habit", Kind.PROTOCOL, Layer.PROCEDURAL, t0 - timedelta(days=2),
        success_count=1, failure_count=6)
    put(store, "keep", Kind.PROFILE_FACT, Layer.SEMANTIC, t0 - timedelta(days=1))
    written = {k: raw(pg_uri, k) for k in ("event", "loop", "fact", "habit")}
    now = t0 + timedelta(days=SETTINGS.lifecycle_revalidate_after_days + 1)
    counts = JOBS["lifecycle"].function(JobContext(store, settings=SETTINGS), "u1", now=now)
    assert (counts["stale_episodic"], counts["loops_closed"], counts["needs_revalidation"],
            counts["habits_retired"]) == (1, 1, 2, 1)  # "keep" is flagged too
    # Stored: the value and updated_at as written; the move in its own columns.
    for key, (value, moved, updated, moved_at) in written.items():
        v, m, u, at = raw(pg_uri, key)
        assert (v, u) == (value, updated) and (moved, moved_at) == (None, None), key
        assert m is not None, key
        assert at == (None if key == "fact" else now), key
    # Read: get, the item's updated_at, the history.
    event = layer.get("u1", "event").record
    assert event.status == Status.STALE
    assert [(h.event, h.old, h.new) for h in event.history] == [("status", "active", "stale")]
    loop = layer.get("u1", "loop").record
    assert (loop.status, loop.loop_status) == (Status.ARCHIVED, LoopStatus.CLOSED)
    assert [h.event for h in layer.admin.history("u1", "loop")] == ["status", "loop_status"]
    fact = layer.get("u1", "fact").record
    assert fact.metadata.get("needs_revalidation") is True
    item = store.get(NS, "event")
    assert item is not None and item.updated_at == now  # a status move is a write
    item = store.get(NS, "fact")
    assert item is not None and item.updated_at == written["fact"][2]  # a flag is not
    # Search (a filter on the status), listing and recall see the moved statuses.
    assert {i.key for i in store.search(NS, filter={"status": "stale"})} == {"event"}
    assert {r.key for r in layer.list("u1", statuses="archived")} == {"loop", "habit"}
    recalled = {r.key for r in layer.recall("u1", "the trip to Lisbon")}
    assert "keep" in recalled and not recalled & {"event", "loop", "habit"}
    block = layer.context_block("u1", "the trip to Lisbon")
    assert "Memory loop" not in block.text and "Memory keep" in block.text

    # A write of the memory folds the moves into its value and clears the columns.
    clock.advance(hours=1)
    layer.correct("u1", "fact", "Memory fact of the test, corrected.")
    v, m, _, at = raw(pg_uri, "fact")
    assert m is None and at is None
    assert [h["event"] for h in v["history"]] == ["flag", "content"]
    store.batch([mops.ReinforceOp("u1", ("event",), clock.now)])  # stale: reactivated
    v, m, _, at = raw(pg_uri, "event")
    assert (m, at, v["status"]) == (None, None, "active")
    assert [(h["old"], h["new"]) for h in v["history"]] == [
        ("active", "stale"), ("stale", "active")]
    layer.trust.record_outcome("u1", "habit", success=True)
    v, m, _, at = raw(pg_uri, "habit")
    assert (m, at, v["status"], v["success_count"]) == (None, None, "archived", 2)
    assert [h["new"] for h in v["history"]] == ["archived"]


def test_the_migration_keeps_existing_rows(bare_uri: str, clock: Clock) -> None:
    """Rows written before the moved columns existed read the same after it, and move."""
    version = next(n for n, ddl in enumerate(migsql.MIGRATIONS)
                   if "ADD COLUMN IF NOT EXISTS moved jsonb" in str(ddl))
    t0 = clock.now
    rec = MemoryRecord(content="An old event of the test.", kind=Kind.EPISODIC_EVENT,
                       layer=Layer.EPISODIC, occurred_at=t0 - timedelta(days=40),
                       last_accessed_at=t0 - timedelta(days=40))
    with psycopg.connect(bare_uri) as conn:
        conn.execute(*migsql.create_version_table())
        for v in range(version):
            conn.execute(*migsql.migration(v))
            conn.execute(*migsql.record_version(v))
        conn.execute(
            "INSERT INTO langmem_items (user_id, prefix, key, value, is_memory, search_text, "
            "created_at, updated_at) VALUES ('u1', 'memories.u1.work', 'old', %s, true, "
            "%s, %s, %s)", (psycopg.types.json.Jsonb(rec.to_value()), rec.content,
                            t0 - timedelta(days=40), t0 - timedelta(days=40)))
        conn.commit()
    with PostgresMemoryStore.from_conn_string(bare_uri, index=None, clock=clock) as store:
        assert version in store.setup()
        item = store.get(NS, "old")
        assert item is not None and item.value == rec.to_value()
        counts = JOBS["lifecycle"].function(JobContext(store, settings=SETTINGS), "u1",
                                            now=t0)
        assert counts["stale_episodic"] == 1
        item = store.get(NS, "old")
        assert item is not None and item.value["status"] == "stale"
