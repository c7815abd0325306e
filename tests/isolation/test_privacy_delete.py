"""Deleting is deleting: a user's erasure reaches every per-user table, and a memory's
hard delete takes its traces in the decision log and the embedding cache with it."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import MemoryLayer, MemorySettings, PostgresMemoryStore
from langmem_layer.cli import main
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.jobs import JobContext, run
from langmem_layer.jobs.lifecycle_jobs import lifecycle_thresholds
from langmem_layer.server.keys import create_key
from langmem_layer.sql.users import USER_TABLES
from langmem_layer.store import ops as mops
from langmem_layer.synth import OfflineSynthesizer
from tests.fakes import Clock

SECRET = "My home is 12 Secret Street"


@pytest.fixture
def layer(store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> Iterator[MemoryLayer]:
    _clean_extra_tables(pg_uri)
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)
    yield layer
    _clean_extra_tables(pg_uri)


def _clean_extra_tables(pg_uri: str) -> None:
    # Tables the shared fixture does not truncate.
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("TRUNCATE langmem_reextract, langmem_vector_indexes")


def _user_tables(pg_uri: str) -> set[str]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            """SELECT DISTINCT table_name FROM information_schema.columns
            WHERE column_name = 'user_id' AND table_schema = current_schema()
              AND table_name LIKE 'langmem\\_%'"""
        ).fetchall()
    return {r[0] for r in rows}


def _rows(pg_uri: str, user_id: str) -> dict[str, int]:
    with psycopg.connect(pg_uri) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table} WHERE user_id = %s",
                                [user_id]).fetchone()[0]  # type: ignore[index]
            for table in sorted(_user_tables(pg_uri))
        }


def _fill(layer: MemoryLayer, store: PostgresMemoryStore, user: str) -> None:
    """Rows for ``user`` in every per-user table."""
    now = layer.now()
    layer.ingest(user, [HumanMessage("I am allergic to penicillin.", id=f"{user}-a")],
                 thread_id="t1")
    first = layer.remember(user, "Visited Lisbon in May.", thread_id="t1")
    layer.remember(user, "Met Ana at the conference.", thread_id="t1")
    assert store.batch([mops.LinksOp(user, (first.key,))])[0]  # the thread's link
    layer.threads.load_thread(user, [HumanMessage(SECRET, id=f"{user}-s")], SECRET, thread_id="t2")
    layer.threads.record_turn(user, [HumanMessage(SECRET, id=f"{user}-s"), AIMessage("Noted.")],
                      thread_id="t2")
    layer.admin.submit(user, [HumanMessage("I moved to Porto.", id=f"{user}-p")], thread_id="t3")
    store.batch([
        mops.IndexUserOp(user, now),
        mops.RecordFallbackOp(user, "k1", "work", [{"type": "human"}], now, "rules", "t1"),
    ])
    # The queue keeps one entry waiting, so the user has a pending row too.
    store.batch([mops.EnqueueOp(user, "later", "work", [], now, "t4", None,
                                now + timedelta(days=1))])
    create_key(store, user)  # the HTTP app's API keys are the user's too
    layer.trust.feedback(user, True, agent_id="assistant")  # learned agent trust
    # The nightly lifecycle stores the memories' decay scores.
    store.batch([mops.LifecycleOp(user, now, 180.0, 0.15,
                                  lifecycle_thresholds(MemorySettings()), False)])
    # A per-user job remembers what the user's data looked like when it ran.
    run(JobContext(store, synthesizer=OfflineSynthesizer()), "consolidate", user=user, now=now)


def test_every_per_user_table_is_covered(layer: MemoryLayer, pg_uri: str) -> None:
    """A new table with a user_id column must join USER_TABLES, or this fails."""
    assert _user_tables(pg_uri) == set(USER_TABLES)


def test_forget_and_clear_history_leave_the_users_words(layer: MemoryLayer,
                                                         store: PostgresMemoryStore,
                                                         pg_uri: str) -> None:
    """The defect: export shows nothing, but the database still holds the user's words."""
    _fill(layer, store, "bob")
    for memory in layer.list("bob", statuses=None):
        layer.forget("bob", memory.key, hard=True)
    layer.threads.clear_history("bob")
    assert not [i for i in layer.export("bob")["items"] if i["is_memory"]]
    left = {t: n for t, n in _rows(pg_uri, "bob").items() if n}
    assert {"langmem_extraction_queue", "langmem_applied_ops", "langmem_threads"} <= set(left)


def test_delete_user_erases_every_table_and_no_one_else(layer: MemoryLayer,
                                                        store: PostgresMemoryStore,
                                                        pg_uri: str) -> None:
    _fill(layer, store, "bob")
    _fill(layer, store, "carol")
    before = _rows(pg_uri, "bob")
    carol = _rows(pg_uri, "carol")
    carol_export = layer.export("carol")
    assert all(before[t] for t in USER_TABLES if t != "langmem_links" or before[t]), before
    assert {t for t, n in before.items() if not n} == set(), before

    deleted = layer.delete_user("bob")

    assert _rows(pg_uri, "bob") == dict.fromkeys(before, 0)
    assert deleted.counts == {t: before[t] for t in USER_TABLES}
    assert deleted.total == sum(before.values())
    assert deleted.dropped_indexes
    with psycopg.connect(pg_uri) as conn:
        names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes").fetchall()}
    assert not set(deleted.dropped_indexes) & names
    assert _rows(pg_uri, "carol") == carol
    assert layer.export("carol") == carol_export
    assert layer.delete_user("bob").total == 0  # nothing left: a no-op


def test_adelete_user(layer: MemoryLayer, store: PostgresMemoryStore, pg_uri: str) -> None:
    layer.remember("dave", "Dave plays chess.")
    deleted = asyncio.run(layer.adelete_user("dave"))
    assert deleted.counts["langmem_items"] == 1
    assert not any(_rows(pg_uri, "dave").values())


def test_delete_user_can_keep_the_keys(layer: MemoryLayer, store: PostgresMemoryStore,
                                       pg_uri: str) -> None:
    _fill(layer, store, "bob")
    before = _rows(pg_uri, "bob")
    assert before["langmem_api_keys"] == 1
    deleted = layer.delete_user("bob", keep_keys=True)
    assert "langmem_api_keys" not in deleted.counts
    assert _rows(pg_uri, "bob") == {**dict.fromkeys(before, 0), "langmem_api_keys": 1}
    assert main(["--database-url", pg_uri, "delete-user", "bob", "--yes"]) == 0
    assert not any(_rows(pg_uri, "bob").values())


def test_cli_delete_user_needs_yes(layer: MemoryLayer, pg_uri: str, capsys) -> None:
    layer.remember("erin", "Erin keeps bees.")
    assert main(["--database-url", pg_uri, "delete-user", "erin"]) == 1
    assert "--yes" in capsys.readouterr().err
    assert _rows(pg_uri, "erin")["langmem_items"] == 1
    assert main(["--database-url", pg_uri, "delete-user", "erin", "--yes"]) == 0
    assert "deleted" in capsys.readouterr().out
    assert not any(_rows(pg_uri, "erin").values())


def test_hard_forget_removes_decision_log_and_cache_traces(layer: MemoryLayer,
                                                           pg_uri: str) -> None:
    result = layer.ingest("bob", [HumanMessage("I am allergic to penicillin.", id="m1")])
    layer.ingest("bob", [HumanMessage("I prefer green tea.", id="m2")])
    (key,) = result.written
    content = layer.get("bob", key).record.content

    def traces() -> tuple[str, int]:
        with psycopg.connect(pg_uri) as conn:
            log = conn.execute("SELECT coalesce(string_agg(decisions::text, ' '), '') "
                               "FROM langmem_ingest_log WHERE user_id = 'bob'").fetchone()
            cached = conn.execute(
                "SELECT count(*) FROM langmem_embedding_cache "
                "WHERE user_id = 'bob' AND content_hash = %s",
                [hashlib.sha256(content.encode()).hexdigest()]).fetchone()
        return log[0], cached[0]  # type: ignore[index]

    log, cached = traces()
    assert "penicillin" in log and cached == 1

    assert layer.forget("bob", key, hard=True)

    log, cached = traces()
    assert "penicillin" not in log and cached == 0
    assert "green tea" in log  # other decisions are kept
