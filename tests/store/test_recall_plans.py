"""Recall under cached generic plans: every user's transaction plans generically, and a
generic plan finds exactly what a custom plan finds, ranks included.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from langgraph.store.base import PutOp
from psycopg.rows import dict_row

from langmem_layer import Kind, Layer, MemoryRecord
from langmem_layer.sql import candidates as rsql
from langmem_layer.sql import citus
from langmem_layer.sql import vector as vsql
from langmem_layer.store.sync import PostgresMemoryStore
from tests.conftest import on_citus

NOW = datetime(2026, 11, 18, tzinfo=UTC)
TEXTS = [
    "weekly status meeting with the design team",
    "status meeting moved to thursday",
    "the zanzibar trip is booked for may",
    "dinner with ana and the design team",
    "status report for the zanzibar project",
    "ana prefers short status meetings",
    "meeting notes: zanzibar budget approved",
    "the design review meeting ran long",
]


def _value(i: int, content: str) -> dict[str, Any]:
    return MemoryRecord(
        content=content,
        kind=Kind.EPISODIC_EVENT,
        layer=Layer.EPISODIC,
        occurred_at=NOW - timedelta(days=i),
        last_accessed_at=NOW,
        refs=["zanzibar"] if "zanzibar" in content else ["ana"] if "ana" in content else [],
    ).to_value()


def _fill(store: PostgresMemoryStore, user: str) -> None:
    # Every text twice, under two keys: equal BM25 scores, which must tie (by key).
    store.batch([PutOp(("memories", user, "work"), f"m{n}{i}", _value(i, t))
                 for n in range(2) for i, t in enumerate(TEXTS)])


def _rows(conn: psycopg.Connection[Any], mode: str, sql: str, params: dict[str, Any],
          *, shard: bool = False) -> list[tuple[Any, ...]]:
    """The statement's rows, prepared and planned as ``mode`` says; ``shard``: as the call
    a store on Citus sends (``citus.on_shard``), which the worker prepares and keeps."""
    if shard:  # the mode goes with the call, to the worker that plans the statement
        sql, params = citus.on_shard(params["user_id"], (sql, params), rsql.ROW,
                                     settings=(("plan_cache_mode", mode),))
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        if not shard:
            cur.execute("SELECT set_config('plan_cache_mode', %s, true)", [mode])
        cur.execute(sql, params, prepare=True)  # prepared: planned as the mode says
        return sorted((r["key"], r["vec_rank"], r["kw_rank"], r["rf_rank"], r["tw_rank"])
                      for r in cur.fetchall())


def _setting(conn: psycopg.Connection[Any], user: str, name: str, citus_: bool) -> Any:
    """A setting of the transaction where the user's statements run: on Citus the worker
    of the user's shards, which the settings of ``prepare_search`` reach, as it is sent
    there (a query of one user's row of one table), and where recall runs."""
    if not citus_:
        return conn.execute(f"SHOW {name}").fetchone()
    return conn.execute(*citus.on_shard(
        user, ("SELECT current_setting(%(name)s) AS v", {"name": name}), "v text")).fetchone()


def test_prepare_search_plans_generically_for_users_without_an_index(
    store: PostgresMemoryStore, pg_uri: str,
) -> None:
    citus_ = on_citus(pg_uri)
    with store.conn.transaction():
        rows = store.conn.execute(*vsql.prepare_search("nobody", "m", ef_search=30)).fetchall()
        mode = _setting(store.conn, "nobody", "plan_cache_mode", citus_)
        ef = _setting(store.conn, "nobody", "hnsw.ef_search", citus_)
    assert [r[0] for r in rows] == [None]  # one row: search exactly
    assert mode == ("force_generic_plan",) and ef == ("30",)


def test_prepare_search_keeps_postgresqls_plans_for_a_user_with_an_index(
    store: PostgresMemoryStore, pg_uri: str,
) -> None:
    # A generic plan would estimate the user as the average one: far too few rows.
    with store.conn.transaction():
        store.conn.execute("INSERT INTO langmem_vector_indexes (user_id, model_id, dims, "
                           "index_name, created_at) VALUES ('big', 'm', 3, 'ix', now())")
        rows = store.conn.execute(*vsql.prepare_search("big", "m", ef_search=30)).fetchall()
        mode = _setting(store.conn, "big", "plan_cache_mode", on_citus(pg_uri))
        store.conn.execute("DELETE FROM langmem_vector_indexes WHERE user_id = 'big'")
    assert [r[0] for r in rows] == [3]
    assert mode == ("auto",)


def test_small_user_recall_is_the_same_under_generic_and_custom_plans(
    store: PostgresMemoryStore, embedder: Any
) -> None:
    _fill(store, "u1")
    _fill(store, "u2")  # another user's matching memories must stay out
    sql, params = rsql.recall_candidates(
        "u1", ["memories.u1.work"], now=NOW, query_text="zanzibar status meeting",
        query_vector=embedder.embed_query("zanzibar status meeting"),
        model_id=store.model_id, refs=["zanzibar"], per_source=5,
        window=(NOW - timedelta(days=5), NOW))
    conn = store.conn
    # On Citus the call, whose statement the worker prepares: Citus plans no generic
    # distributed plan of recall's CTEs ("could not create distributed plan").
    shard = store.distributed
    custom = _rows(conn, "force_custom_plan", sql, params, shard=shard)
    conn.execute("DEALLOCATE ALL")
    generic = _rows(conn, "force_generic_plan", sql, params, shard=shard)
    assert generic == custom
    assert {k for k, *_ in custom} <= {f"m{n}{i}" for n in range(2) for i in range(len(TEXTS))}
    kw = sorted((r[2], r[0]) for r in custom if r[2] is not None)
    assert len(kw) == 5
    # Equal scores tie and the key breaks the tie: each pair of twins is ranked in key
    # order, next to each other.
    ranks = {key: rank for rank, key in kw}
    for key in ranks:
        twin = re.sub(r"^m0", "m1", key)
        if key.startswith("m0") and twin in ranks:
            assert ranks[twin] == ranks[key] + 1


def test_every_strategy_is_declared_once_in_the_registry() -> None:
    from langmem_layer.read import rank
    from langmem_layer.sql.sources import RECALL_SOURCES

    sql, _ = rsql.recall_candidates(
        "u1", ["memories.u1.work"], now=NOW, query_text="zanzibar status",
        query_vector=[0.5] * 8, model_id="m", refs=["zanzibar"], window=(NOW, NOW),
        link_types=["elaborates"], open_questions=3, due_window=(NOW, NOW), due_limit=3,
        standing_limit=3, context_limit=5)
    for source in RECALL_SOURCES:  # all on: each has its CTE and its rank column
        assert f"{source.column} AS (" in sql and f"c.{source.column}_rank" in sql
    assert len({s.name for s in RECALL_SOURCES}) == len({s.column for s in RECALL_SOURCES})
    fused, lexical, weights = (rank._FUSED_SOURCES, rank._LEXICAL_SOURCES,
                               rank.DEFAULT_SOURCE_WEIGHTS)
    assert fused == ("vector", "keyword", "ref", "time", "context")
    assert lexical == {"keyword", "ref", "time", "context", "link", "open_question", "due",
                       "standing"}
    assert weights == {"vector": 1.0, "keyword": 1.0, "ref": 1.0, "time": 1.0,
                       "context": 1.0, "link": 0.5}



def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    return [node, *(n for child in node.get("Plans", ()) for n in _nodes(child))]


def test_vector_candidates_are_probed_by_key_on_tables_never_analysed(
    bare_uri: str, index: dict, embedder: Any
) -> None:
    # A new database before autovacuum's first analyse: no statistics for the planner.
    with PostgresMemoryStore.from_conn_string(bare_uri, index=index) as store:
        store.setup()
        for table in ("langmem_items", "langmem_embeddings"):
            store.conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
        store.batch([PutOp(("memories", "u1", "work"), f"m{i}",
                           _value(i, f"{TEXTS[i % len(TEXTS)]} number {i}"))
                     for i in range(80)])
        stats = store.conn.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename = 'langmem_items'").fetchone()
        assert stats == (0,)
        sql, params = rsql.recall_candidates(
            "u1", ["memories.u1.work"], now=NOW, query_text="zanzibar status meeting",
            query_vector=embedder.embed_query("zanzibar status meeting"),
            model_id=store.model_id, per_source=10)
        with store.conn.transaction():
            (plan,), = store.conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql,
                                          params).fetchall()
    # The vector candidates' eligibility: a scan of the items run once per candidate.
    probes = [n for n in _nodes(plan[0]["Plan"])
              if n.get("Relation Name") == "langmem_items" and n["Actual Loops"] >= 10]
    assert probes
    # Each reads its candidate's row (per loop), not every memory of the user's.
    assert all(n.get("Rows Removed by Filter", 0) <= 1 for n in probes), probes


def test_a_small_users_reference_matches_are_read_as_the_owner_under_the_role() -> None:
    # Under the row-level-security role the overlap is not leakproof, so the shared refs
    # index serves only through the owner's function; without the role, read in place.
    now = datetime(2026, 1, 1, tzinfo=UTC)
    owner, _ = rsql.recall_candidates("u", ["memories.u.work"], now=now, refs=["ana"])
    in_place, _ = rsql.recall_candidates("u", ["memories.u.work"], now=now, refs=["ana"],
                                         owner_reads=False)
    large, _ = rsql.recall_candidates("u", ["memories.u.work"], now=now, refs=["ana"],
                                      owner_reads=False, indexed_dims=384)
    assert "langmem_ref_matches(" in owner and "langmem_ref_matches(" not in in_place
    assert "langmem_user_ref_matches(" in large  # a large user's own index, either way
