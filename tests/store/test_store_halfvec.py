"""``ann_index_config={"vector_type": "halfvec"}``: large users' HNSW indexes at half
precision, on every read path (search exact and indexed, recall exact and walked).

Runs on the four stores of :mod:`tests.store.test_store_options` with its hand-made vectors.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg import sql

from langmem_layer import Kind, Layer, MemoryRecord
from langmem_layer.errors import ConfigurationError
from langmem_layer.sql import vector as vsql
from langmem_layer.store.ops import RecallOp
from langmem_layer.store.sync import PostgresMemoryStore
from tests.store.test_store_options import (
    DIMS,
    KINDS,
    VECTORS,
    _index,
    expected_score,
    maybe,
    open_store,
)

NOW = datetime(2026, 11, 18, tzinfo=UTC)
HALF = {"ann_index_config": {"vector_type": "halfvec"}}
NS = ("memories", "carol", "notes")


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _memory(content: str) -> dict[str, Any]:
    return MemoryRecord(content=content, kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                        occurred_at=NOW, last_accessed_at=NOW).to_value()


async def _searches(kind: str, uri: str, **index: Any) -> tuple[list[Any], list[Any]]:
    """Top results of a small user (exact), then of the same user once indexed."""
    async with open_store(kind, uri, index=_index(**index)) as store:
        for key in VECTORS:
            await store.aput(NS, key, {"text": key})
        exact = await store.asearch(NS, query="query", limit=3)
        assert await maybe(store.index_large_users(threshold=1)) == ["carol"]
        indexed = await store.asearch(NS, query="query", limit=3)
    return exact, indexed


async def test_halfvec_search_returns_the_float_stores_results(kind: str, pg_uri: str) -> None:
    float_exact, float_indexed = await _searches(kind, pg_uri)
    half_exact, half_indexed = await _searches(kind, pg_uri, **HALF)
    want = sorted(VECTORS, key=lambda k: -expected_score("cosine", VECTORS[k]))[:3]
    for theirs, ours in ((float_exact, half_exact), (float_indexed, half_indexed)):
        assert [r.key for r in ours] == [r.key for r in theirs] == want
        for a, b in zip(ours, theirs, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-3)  # half precision


async def test_halfvec_recall_exact_and_through_the_index(kind: str, pg_uri: str) -> None:
    async with open_store(kind, pg_uri, index=_index(**HALF)) as store:
        for key in VECTORS:
            await store.aput(NS, key, _memory(key))
        op = RecallOp("carol", ("notes",), query="query", now=NOW)
        (exact,) = await maybe(store.abatch([op]) if kind.startswith("async")
                               else store.batch([op]))
        assert await maybe(store.index_large_users(threshold=1)) == ["carol"]
        (walked,) = await maybe(store.abatch([op]) if kind.startswith("async")
                                else store.batch([op]))

    def by_vector(cands: list[Any]) -> list[str]:
        found = [c for c in cands if "vector" in c.ranks]
        return [c.key for c in sorted(found, key=lambda c: c.ranks["vector"])]

    want = sorted(VECTORS, key=lambda k: -expected_score("cosine", VECTORS[k]))
    assert by_vector(exact)[:3] == by_vector(walked)[:3] == want[:3]
    sims = {c.key: c.similarity for c in walked}
    for key in want[:3]:
        assert sims[key] == pytest.approx(expected_score("cosine", VECTORS[key]), abs=1e-3)


async def test_index_large_users_builds_a_halfvec_hnsw_index(kind: str, pg_uri: str) -> None:
    async with open_store(kind, pg_uri, index=_index(**HALF)) as store:
        for key in VECTORS:
            await store.aput(NS, key, {"text": key})
        assert await maybe(store.index_large_users(threshold=1)) == ["carol"]
        assert await maybe(store.index_large_users(threshold=1)) == []  # recorded
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            defs = [r[0] for r in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexdef LIKE '%USING hnsw%' "
                "AND indexdef LIKE '%''carol''%' AND indexdef LIKE '%''fixed''%'").fetchall()]
            (vtype,) = conn.execute("SELECT vector_type FROM langmem_vector_indexes "
                                    "WHERE user_id = 'carol'").fetchone() or (None,)
            # The walk's cast matches the index expression: the plan uses the index.
            # (As the walk runs: without a sort, which plans over other tests' rows
            # might otherwise prefer to the graph for five vectors.)
            conn.execute("SET enable_seqscan = off")
            conn.execute("SET enable_sort = off")
            walk = vsql.user_walk("carol", "fixed", DIMS, "halfvec")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN " + walk, {"qv": "[" + ",".join(["1"] * DIMS) + "]", "ann_n": 3}))
    assert len(defs) == 1
    assert f"(embedding)::halfvec({DIMS})" in defs[0] and "halfvec_cosine_ops" in defs[0]
    assert vtype == "halfvec"
    assert vsql.index_name("carol", "fixed", "halfvec") in plan


@pytest.mark.parametrize("distance", ["l2", "inner_product"])
async def test_other_distances_of_a_halfvec_store_scan_exactly(
    kind: str, pg_uri: str, distance: str
) -> None:
    async with open_store(kind, pg_uri, index=_index(distance_type=distance, **HALF)) as store:
        for key in VECTORS:
            await store.aput(NS, key, {"text": key})
        assert await maybe(store.index_large_users(threshold=1)) == ["carol"]
        results = await store.asearch(NS, query="query", limit=5)
    want = {k: expected_score(distance, v) for k, v in VECTORS.items()}
    assert [r.key for r in results] == sorted(want, key=lambda k: -want[k])
    for r in results:
        assert r.score == pytest.approx(want[r.key], abs=1e-5)


async def test_switching_to_halfvec_reindexes_the_user(pg_uri: str) -> None:
    async with open_store("sync", pg_uri, index=_index()) as store:
        for key in VECTORS:
            await store.aput(NS, key, {"text": key})
        assert store.index_large_users(threshold=1) == ["carol"]
        # Same data, now a halfvec store: exact until its own index exists.
        with PostgresMemoryStore.from_conn_string(pg_uri, index=_index(**HALF)) as half:
            assert [r.key for r in half.search(NS, query="query", limit=1)] == ["eps"]
            assert half.index_large_users(threshold=1) == ["carol"]
            assert [r.key for r in half.search(NS, query="query", limit=1)] == ["eps"]
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            row = conn.execute("SELECT vector_type, index_name FROM langmem_vector_indexes "
                               "WHERE user_id = 'carol'").fetchone()
            # The single-precision index is left to the operator (another store may
            # still read it); no record names it now, so drop it here.
            old = vsql.index_name("carol", "fixed")
            conn.execute(sql.SQL("DROP INDEX {}, {}").format(
                sql.Identifier(old), sql.Identifier(old + "_kw")))
    assert row == ("halfvec", vsql.index_name("carol", "fixed", "halfvec"))


@pytest.mark.parametrize(
    ("ann", "says"),
    [
        ({"vector_type": "bit"}, "'vector', 'halfvec'"),
        ({"vector_type": "sparsevec"}, "'vector', 'halfvec'"),
        ({"kind": "ivfflat", "nlist": 100}, "'hnsw'"),
        ({"kind": "flat"}, "'hnsw'"),
    ],
)
async def test_other_vector_types_and_kinds_are_refused(
    kind: str, pg_uri: str, ann: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigurationError, match="ann_index_config") as err:
        async with open_store(kind, pg_uri, index=_index(ann_index_config=ann)):
            pass
    assert says in str(err.value)


def test_halfvec_over_4000_dims_is_refused() -> None:
    from langmem_layer.store.options import check_index_config

    with pytest.raises(ConfigurationError, match="at most 4000 dims"):
        check_index_config({"dims": 4001, "ann_index_config": {"vector_type": "halfvec"}})
    check_index_config({"dims": 4000, "ann_index_config": {"vector_type": "halfvec"}})
