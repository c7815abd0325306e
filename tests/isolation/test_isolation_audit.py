"""The statement audit (tests/audit.py) itself: it refuses what leaks, passes what binds,
and really records what the library sends."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.sql import (
    backfills,
    cache,
    generic_items,
    jobs,
    migrations,
    queue_statements,
    vector,
)
from langmem_layer.store import ops as mops
from langmem_layer.store.ops import reextraction, working
from tests import audit
from tests.fakes import Clock

NOW = datetime(2026, 1, 1, tzinfo=UTC)

BINDS = [
    "SELECT * FROM langmem_items WHERE user_id = %s",
    "select * from langmem_items where prefix = %s and USER_ID=%(user_id)s",
    "SELECT * FROM langmem_items WHERE %s = user_id",
    "DELETE FROM langmem_items WHERE user_id = '' AND prefix = %s",
    "SELECT i.key FROM langmem_items i JOIN langmem_embeddings e\n"
    "  ON e.user_id = i.user_id AND e.key = i.key WHERE i.user_id = %(user_id)s",
    "SELECT 1 FROM langmem_items AS i, langmem_links l WHERE l.user_id = $1 AND "
    "i.user_id = l.user_id",
    "UPDATE langmem_threads SET closed_at = %s WHERE user_id = %s AND thread_id = %s",
    "INSERT INTO langmem_links (user_id, src_key) VALUES (%s, %s)",
    "INSERT INTO langmem_terms AS t (user_id, df) SELECT i.user_id, 1 FROM langmem_items i "
    "WHERE i.user_id = %s ON CONFLICT (user_id) DO UPDATE SET df = t.df + 1 "
    "WHERE t.user_id = EXCLUDED.user_id",
    "WITH gone AS (DELETE FROM langmem_messages WHERE user_id = %s RETURNING 1) "
    "SELECT count(*) FROM gone",
    "CREATE INDEX IF NOT EXISTS x ON langmem_items (user_id)",  # DDL
    "SELECT v FROM langmem_migrations",  # no per-user table
    "SELECT * FROM langmem_items_view",  # another name, not a per-user table
]

LEAKS = [
    "SELECT * FROM langmem_items",
    "SELECT * FROM langmem_items WHERE user_id = ANY(%s)",
    "SELECT * FROM langmem_items WHERE user_id IN (%s, %s)",
    "SELECT * FROM langmem_items WHERE user_id <> %s",
    "SELECT * FROM langmem_items WHERE user_id > %s",
    "SELECT * FROM langmem_items WHERE user_id = user_id",
    "SELECT * FROM langmem_items WHERE prev_user_id = %s",
    "SELECT * FROM langmem_items WHERE user_id_copy = %s",
    "SELECT * FROM langmem_items i -- WHERE i.user_id = %s\n WHERE true",
    "SELECT * FROM langmem_items i JOIN langmem_embeddings e ON e.key = i.key "
    "WHERE i.user_id = %s",
    "SELECT * FROM langmem_items i WHERE x.user_id = %s",
    "INSERT INTO langmem_terms (user_id, df) SELECT user_id, 1 FROM langmem_items",
    "UPDATE langmem_threads SET closed_at = %s WHERE thread_id = %s",
    "DELETE FROM langmem_embedding_cache c USING langmem_items i WHERE i.user_id = %s",
    "SELECT * FROM langmem_items WHERE (user_id, key) IN (SELECT * FROM unnest(%s, %s))",
]


@pytest.mark.parametrize("sql", BINDS)
def test_check_passes_statements_that_bind_the_user(sql: str) -> None:
    assert audit.check(sql) == []


@pytest.mark.parametrize("sql", LEAKS)
def test_check_refuses_statements_that_do_not(sql: str) -> None:
    assert audit.check(sql)
    assert audit.allowed(sql) is None


def test_references_read_aliases() -> None:
    refs = audit.references(audit.normalise(
        "SELECT * FROM langmem_items i JOIN langmem_links AS l ON true "
        "WHERE langmem_items.user_id = %s; INSERT INTO langmem_terms (user_id) VALUES (%s); "
        "UPDATE langmem_threads SET x = 1"))
    assert refs == [
        audit.Reference("langmem_links", "l", False),
        audit.Reference("langmem_items", "i", False),
        audit.Reference("langmem_terms", "langmem_terms", True),
        audit.Reference("langmem_threads", "langmem_threads", False),
    ]


# Each allowlist entry, met by the builder it was written for (so none is dead).
ALLOWED_BUILDERS = {
    "jobs.users": jobs.users(after=None, shard=0, shards=2, limit=10),
    "jobs.count_users": jobs.count_users(after="a", shard=0, shards=2),
    "jobs.users_distributed": jobs.users(after=None, shard=0, shards=2, limit=10,
                                         distributed=True),
    "jobs.users_distributed.count": jobs.count_users(after="a", shard=0, shards=2,
                                                     distributed=True),
    "migrations.terms_backfill": next(
        (sql, {}) for sql, _ in migrations.migration_statements(10)
        if audit.normalise(sql).startswith("insert into langmem_terms")),
    "backfills.users_after": backfills.users_after(""),
    "backfills.lock": backfills.backfill(10).batch(["alice", "bob"])[0],  # type: ignore[union-attr]
    "backfills.terms": backfills.backfill(10).batch(["alice", "bob"])[1],  # type: ignore[union-attr]
    "migrations.terms_backfill.batch": backfills.backfill(10).batch(["alice", "bob"])[2],  # type: ignore[union-attr]
    "backfills.decay": backfills.backfill(21).batch(["alice", "bob"])[0],  # type: ignore[union-attr]
    "generic_items.expired_users": generic_items.expired_users(NOW),
    "queue_statements.claimable_users": queue_statements.claimable_users(NOW, 10),
    "queue_statements.backlog": queue_statements.backlog(NOW),
    "cache.stale_cache_users": cache.stale_cache_users(NOW),
    "generic_items.list_prefixes": generic_items.list_prefixes(None, "memories", NOW),
    "reextraction.fallback_turns": reextraction.fallback_turns(None, 10),
    "cache.lookup_cached": cache.lookup_cached("m", [("alice", "h")], NOW),
    "generic_items.delete_embeddings": generic_items.delete_embeddings([("alice", "p", "k")], "m"),
    "generic_items.replace_embeddings": generic_items.replace_embeddings(
        [("alice", "p", "k")], [("alice", "p", "k", "$", [0.5])], model_id="m", dims=1, now=NOW),
    "vector.large_users": vector.large_users("m", 1000),
    "working.idle_threads": working.idle_threads(NOW, 10),
    "working.users_with_expired_messages": working.users_with_expired_messages(NOW),
}


@pytest.mark.parametrize("name", sorted(ALLOWED_BUILDERS))
def test_each_allowlist_entry_covers_a_real_cross_user_statement(name: str) -> None:
    sql = ALLOWED_BUILDERS[name][0]
    assert audit.check(sql), "the checker passes it: the entry is not needed"
    entry = audit.allowed(sql)
    assert entry is not None
    assert name.startswith(entry.name) or entry.name.split(".")[0] == name.split(".")[0]
    assert len(entry.reason) > 40


def test_every_allowlist_entry_is_met() -> None:
    met = {audit.allowed(sql).name for sql, _ in ALLOWED_BUILDERS.values()}  # type: ignore[union-attr]
    assert met == {a.name for a in audit.ALLOWLIST}


def test_the_user_bound_forms_of_allowed_builders_bind() -> None:
    assert audit.check(generic_items.list_prefixes("alice", "memories", NOW)[0]) == []
    assert audit.check(reextraction.fallback_turns("alice", 10)[0]) == []
    # A multi-user batch's cache rows: each inserted under its own user_id.
    assert audit.check(cache.upsert_cached("m", [("alice", "h", [0.5])], NOW)[0]) == []
    assert audit.allowed(generic_items.list_prefixes("alice", "memories", NOW)[0]) is not None
    # ... which the allowlist would also cover: it is only consulted after a refusal.


def test_the_audit_is_installed() -> None:
    for cls in (psycopg.Cursor, psycopg.AsyncCursor):
        for name in ("execute", "executemany"):
            assert getattr(cls, name).__code__.co_filename == audit.__file__


@pytest.fixture
def layer(store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> Iterator[MemoryLayer]:
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("TRUNCATE langmem_reextract, langmem_vector_indexes")
    yield MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)


def _workload(layer: MemoryLayer, store: PostgresMemoryStore, user: str) -> None:
    """Most of the library's paths, for one user."""
    now = layer.now()
    layer.ingest(user, [HumanMessage("I am allergic to penicillin.", id=f"{user}-a")],
                 thread_id="t1")
    first = layer.remember(user, "Visited Lisbon in May.", thread_id="t1")
    layer.remember(user, "Met Ana at the conference in Lisbon.", thread_id="t1")
    store.batch([mops.LinksOp(user, (first.key,))])  # type: ignore[list-item]
    layer.threads.load_thread(user, [HumanMessage("Where did I go?", id=f"{user}-q")],
                      "Where did I go?", thread_id="t2")
    layer.threads.record_turn(user, [HumanMessage("Where did I go?", id=f"{user}-q"),
                             AIMessage("Lisbon.")], thread_id="t2")
    layer.admin.submit(user, [HumanMessage("I moved to Porto.", id=f"{user}-p")], thread_id="t3")
    layer.admin.process_pending()
    layer.admin.process_pending(user_id=user)
    layer.recall(user, "Lisbon")
    layer.context_block(user, "what do I know about Ana?")
    layer.list(user)
    layer.admin.decisions(user)
    layer.correct(user, first.key, "Visited Lisbon in June.")
    store.put(("memories", user, "notes"), "n1", {"text": "a note"})
    store.search(("memories", user), query="note")
    store.list_namespaces(prefix=("memories", user))
    store.list_namespaces()  # names across tenants (allowed)
    store.get(("memories", user, "notes"), "n1")
    store.delete(("memories", user, "notes"), "n1")
    second = layer.remember(user, "Prefers tea over coffee.", pinned=True)
    layer.get(user, second.key)
    layer.forget(user, second.key)
    memory_ops: list[Any] = [
        mops.IndexUserOp(user, now),
        mops.RecordFallbackOp(user, "k1", "work", [{"type": "human"}], now, "rules", "t1"),
    ]
    store.batch(memory_ops)
    data = layer.export(user)
    layer.forget(user, first.key, hard=True)
    layer.import_(f"{user}-copy", data)
    layer.delete_user(user)
    store.sweep_ttl()


def test_the_audit_records_the_librarys_statements_and_finds_them_bound(
    layer: MemoryLayer, store: PostgresMemoryStore, pg_uri: str
) -> None:
    with audit.RECORDER.capture() as seen:
        _workload(layer, store, "audit-alice")
        # The tests' own SQL is not the library's: not recorded.
        with psycopg.connect(pg_uri) as conn:
            conn.execute("SELECT count(*) FROM langmem_items")
    assert "SELECT count(*) FROM langmem_items" not in seen
    result = audit.report(seen)
    assert result.per_user > 50, result.lines()
    assert result.violations == [], "\n".join(result.lines())


def test_a_violation_fails_the_run(pg_uri: str, tmp_path: Path) -> None:
    """A library statement that spans users turns a passing run into a failing one."""
    (tmp_path / "test_leak.py").write_text(textwrap.dedent("""
        import os
        from langmem_layer.store.driver import Fetch
        from langmem_layer.store.plan import Query
        from langmem_layer.store.sync import PostgresMemoryStore

        def test_leak():
            with PostgresMemoryStore.from_conn_string(os.environ["AUDIT_PG"]) as store:
                store._io(Fetch(Query("SELECT count(*) FROM langmem_items", None)))
    """))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "AUDIT_PG": pg_uri, "PYTHONPATH": str(root)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.audit",
         "--rootdir", str(tmp_path), str(tmp_path / "test_leak.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert "1 passed" in run.stdout, run.stdout + run.stderr
    assert "violations: 1" in run.stdout
    assert "VIOLATION: langmem_items is not bound" in run.stdout
    assert run.returncode == pytest.ExitCode.TESTS_FAILED
