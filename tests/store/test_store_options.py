"""Every option a LangGraph ``PostgresStore`` user passes is honoured or clearly refused.

Each test runs on four stores (``kind``): the sync store on one connection, the async
store on one connection, and both on a connection pool opened through ``pool_config``.
Distance types are checked on hand-made vectors against the formulas LangGraph's
PostgresStore scores with, and against PostgresStore itself on the same database.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.postgres import PostgresStore
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from langmem_layer.errors import ConfigurationError
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore
from tests.conftest import _truncate
from tests.fakes import Clock

KINDS = ("sync", "async", "sync_pool", "async_pool")
DIMS = 64  # PostgresStore's vector table on the test database is vector(64)
POOL: dict[str, Any] = {"min_size": 1, "max_size": 3}
NS = ("docs", "shared")

#: Hand-made vectors (the rest of the 64 dimensions are 0): unit and non-unit lengths,
#: a negative component, and an order that differs between the three distances.
VECTORS = {
    "alpha": [1.0, 0.0, 0.0],
    "beta": [3.0, 4.0, 0.0],
    "gamma": [0.5, 0.5, 0.7071],
    "delta": [-1.0, 2.0, 2.0],
    "eps": [0.2, 0.4, 0.4],
}
QUERY = [1.0, 2.0, 2.0]


def _pad(v: list[float]) -> list[float]:
    return v + [0.0] * (DIMS - len(v))


class FixedEmbeddings(Embeddings):
    """Returns the hand-made vector of a text (its key); the text "query" gets ``QUERY``
    (by both methods: PostgresStore embeds queries with ``embed_documents``)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return _pad(QUERY if text == "query" else VECTORS[text])


def _dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def expected_score(distance: str, v: list[float]) -> float:
    """LangGraph's PostgresStore scores (``get_distance_operator``): cosine as
    1 - cosine distance, l2 as minus the Euclidean distance, inner_product as
    -(pgvector's negative inner product), i.e. the dot product."""
    if distance == "cosine":
        return _dot(v, QUERY) / math.sqrt(_dot(v, v) * _dot(QUERY, QUERY))
    if distance == "l2":
        return -math.dist(v, QUERY)
    return _dot(v, QUERY)


def _index(**extra: Any) -> dict[str, Any]:
    return {"embed": FixedEmbeddings(), "dims": DIMS, "model_id": "fixed", "fields": ["text"],
            **extra}


def _drop_user_indexes(uri: str) -> None:
    """Drop the per-user indexes ``index_large_users`` built (the truncate keeps them)."""
    with psycopg.connect(uri, autocommit=True) as conn:
        for (name,) in conn.execute("SELECT index_name FROM langmem_vector_indexes").fetchall():
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}, {}").format(
                sql.Identifier(name), sql.Identifier(name + "_kw")))
        conn.execute("TRUNCATE langmem_vector_indexes")


@asynccontextmanager
async def open_store(kind: str, uri: str, **kwargs: Any) -> AsyncIterator[Any]:
    """A store of ``kind`` on an emptied database; ``kwargs`` go to from_conn_string."""
    _drop_user_indexes(uri)
    _truncate(uri)
    if kind.endswith("_pool"):
        kwargs.setdefault("pool_config", POOL)
    try:
        if kind.startswith("async"):
            async with AsyncPostgresMemoryStore.from_conn_string(uri, **kwargs) as a:
                yield a
        else:
            with PostgresMemoryStore.from_conn_string(uri, **kwargs) as s:
                yield s
    finally:
        _drop_user_indexes(uri)


async def maybe(value: Any) -> Any:
    """The value of a store method that is sync on one store and async on the other."""
    return await value if asyncio.iscoroutine(value) else value


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- index.distance_type ---------------------------------------------------------------


@pytest.fixture
def langgraph_scores(pg_uri: str) -> Iterator[Any]:
    """Scores of LangGraph's own PostgresStore for the hand-made vectors, per distance."""

    def scores(distance: str) -> dict[str, float | None]:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass('store_vectors') IS NOT NULL").fetchone()
            if row and row[0]:
                conn.execute("TRUNCATE store, store_vectors")
        index = _index(distance_type=distance)
        with PostgresStore.from_conn_string(pg_uri, index=index) as pg:  # type: ignore[arg-type]
            pg.setup()
            for key in VECTORS:
                pg.put(NS, key, {"text": key})
            return {r.key: r.score for r in pg.search(NS, query="query", limit=10)}

    yield scores


@pytest.mark.parametrize("distance", ["cosine", "l2", "inner_product"])
async def test_distance_type_scores_as_langgraph(
    kind: str, pg_uri: str, distance: str, langgraph_scores: Any
) -> None:
    theirs = langgraph_scores(distance)
    async with open_store(kind, pg_uri, index=_index(distance_type=distance)) as store:
        for key in VECTORS:
            await store.aput(NS, key, {"text": key})
        results = await store.asearch(NS, query="query", limit=10)
    want = {k: expected_score(distance, v) for k, v in VECTORS.items()}
    assert [r.key for r in results] == sorted(want, key=lambda k: -want[k])
    for r in results:
        assert r.score == pytest.approx(want[r.key], abs=1e-5), r.key
        assert r.score == pytest.approx(theirs[r.key], abs=1e-5), r.key


async def test_l2_search_of_an_indexed_user_stays_exact(kind: str, pg_uri: str) -> None:
    # Large users' HNSW graphs are built for cosine; another distance scans exactly.
    ns = ("memories", "bob", "notes")
    async with open_store(kind, pg_uri, index=_index(distance_type="l2")) as store:
        for key in VECTORS:
            await store.aput(ns, key, {"text": key})
        assert await maybe(store.index_large_users(threshold=1)) == ["bob"]
        results = await store.asearch(ns, query="query", limit=2)
    # By cosine, eps (parallel to the query) would lead; by l2, delta and gamma do.
    assert [r.key for r in results] == ["delta", "gamma"]
    for r in results:
        assert r.score == pytest.approx(expected_score("l2", VECTORS[r.key]), abs=1e-5)


@pytest.mark.parametrize("bad", ["nonsense", "hamming", "COSINE"])
async def test_unknown_distance_type_is_refused_with_the_supported_ones(
    kind: str, pg_uri: str, bad: str
) -> None:
    with pytest.raises(ConfigurationError) as err:
        async with open_store(kind, pg_uri, index=_index(distance_type=bad)):
            pass
    assert all(name in str(err.value) for name in ("'cosine'", "'l2'", "'inner_product'"))


# -- index.ann_index_config --------------------------------------------------------------


@pytest.mark.parametrize(
    ("ann", "says"),
    [
        ({"vector_type": "bit"}, "'vector'"),
        ({"kind": "ivfflat", "nlist": 100}, "'hnsw'"),
        ({"kind": "flat"}, "'hnsw'"),
        ({"nlist": 100}, "nlist"),
        ({"m": 1}, "from 2 to 100"),
        ({"m": 16, "ef_construction": 20}, "at least 2 * m"),
        ({"ef_construction": "64"}, "from 4 to 1000"),
    ],
)
async def test_unsupported_ann_index_config_is_refused(
    kind: str, pg_uri: str, ann: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigurationError, match="ann_index_config") as err:
        async with open_store(kind, pg_uri, index=_index(ann_index_config=ann)):
            pass
    assert says in str(err.value)


async def test_hnsw_parameters_build_large_users_indexes(kind: str, pg_uri: str) -> None:
    ann = {"kind": "hnsw", "vector_type": "vector", "m": 8, "ef_construction": 32}
    ns = ("memories", "carol", "notes")
    async with open_store(kind, pg_uri, index=_index(ann_index_config=ann)) as store:
        for key in VECTORS:
            await store.aput(ns, key, {"text": key})
        assert await maybe(store.index_large_users(threshold=1)) == ["carol"]
        results = await store.asearch(ns, query="query", limit=1)
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            defs = [r[0] for r in conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexdef LIKE '%USING hnsw%' "
                "AND indexdef LIKE '%''carol''%' AND indexdef LIKE '%''fixed''%'").fetchall()]
    assert [r.key for r in results] == ["eps"]  # parallel to the query: cosine 1.0
    assert len(defs) == 1
    assert "m='8'" in defs[0] and "ef_construction='32'" in defs[0]


# -- ttl.omit_expired ---------------------------------------------------------------------


async def test_omit_expired_false_returns_expired_items_until_swept(
    kind: str, pg_uri: str, clock: Clock
) -> None:
    ttl = {"default_ttl": 1.0, "omit_expired": False, "refresh_on_read": False}
    async with open_store(kind, pg_uri, index=_index(), ttl=ttl, clock=clock) as store:
        await store.aput(NS, "alpha", {"text": "alpha"})
        clock.advance(minutes=5)
        assert (await store.aget(NS, "alpha")) is not None
        assert [r.key for r in await store.asearch(NS)] == ["alpha"]
        assert [r.key for r in await store.asearch(NS, query="query")] == ["alpha"]
        assert await store.alist_namespaces(prefix=("docs",)) == [NS]
        assert await maybe(store.sweep_ttl()) == 1
        assert (await store.aget(NS, "alpha")) is None
        assert await store.asearch(NS) == []


@pytest.mark.parametrize("ttl", [{"default_ttl": 1.0}, {"default_ttl": 1.0, "omit_expired": True}])
async def test_expired_items_are_hidden_by_default_and_with_omit_expired(
    kind: str, pg_uri: str, clock: Clock, ttl: dict[str, Any]
) -> None:
    async with open_store(kind, pg_uri, index=_index(), ttl=ttl, clock=clock) as store:
        await store.aput(NS, "alpha", {"text": "alpha"})
        clock.advance(minutes=5)
        assert (await store.aget(NS, "alpha")) is None
        assert await store.asearch(NS, query="query") == []
        assert await store.alist_namespaces(prefix=("docs",)) == []


@pytest.mark.parametrize(
    ("ttl", "says"),
    [
        ({"omit_expired": "no"}, "omit_expired"),
        ({"refresh_on_read": 1}, "refresh_on_read"),
        ({"sweep_interval_minutes": 0}, "sweep_interval_minutes"),
        ({"sweep_interval_minutes": "5"}, "sweep_interval_minutes"),
    ],
)
async def test_bad_ttl_settings_are_refused(
    kind: str, pg_uri: str, ttl: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        async with open_store(kind, pg_uri, index=None, ttl=ttl):
            pass


# -- ttl.sweep_interval_minutes, start_ttl_sweeper / stop_ttl_sweeper ---------------------


async def _until(condition: Any) -> None:
    """Wait for the background sweeper to have acted (no timing is asserted)."""
    for _ in range(1200):
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the TTL sweeper never swept")


def _sweeper(store: Any) -> Any:
    """The sweeper's task (async store) or thread (sync store), None when none runs."""
    return getattr(store, "_ttl_sweeper_task", None) or getattr(
        store, "_ttl_sweeper_thread", None)


def _alive(handle: Any) -> bool:
    return not handle.done() if isinstance(handle, asyncio.Task) else handle.is_alive()


async def test_ttl_sweeper_sweeps_on_its_interval_and_stops(
    kind: str, pg_uri: str, clock: Clock
) -> None:
    # 0.001 minutes between sweeps; the clock is moved, so expiry itself is not waited for.
    ttl = {"default_ttl": 1.0, "omit_expired": False, "sweep_interval_minutes": 0.001}
    async with open_store(kind, pg_uri, index=None, ttl=ttl, clock=clock) as store:
        await store.aput(NS, "alpha", {"v": 1})
        await store.aput(NS, "kept", {"v": 2}, ttl=None)
        handle = await maybe(store.start_ttl_sweeper())
        again = await maybe(store.start_ttl_sweeper())
        sweeper = _sweeper(store)
        assert _alive(sweeper)
        if isinstance(handle, asyncio.Task):
            assert again is handle
        else:
            assert isinstance(handle, concurrent.futures.Future) and _sweeper(store) is sweeper
        clock.advance(minutes=2)

        async def swept() -> bool:
            return await store.aget(NS, "alpha") is None

        await _until(swept)
        assert (await store.aget(NS, "kept")) is not None
        assert await maybe(store.stop_ttl_sweeper()) is True
        assert not _alive(sweeper)
        assert await maybe(store.stop_ttl_sweeper()) is True  # stopping twice is fine


async def test_ttl_sweeper_stops_when_the_store_closes(kind: str, pg_uri: str) -> None:
    ttl = {"default_ttl": 1.0, "sweep_interval_minutes": 60}
    async with open_store(kind, pg_uri, index=None, ttl=ttl) as store:
        await maybe(store.start_ttl_sweeper())
        sweeper = _sweeper(store)
        assert _alive(sweeper)
    assert not _alive(sweeper)


async def test_ttl_sweeper_without_ttl_config_does_nothing(kind: str, pg_uri: str) -> None:
    async with open_store(kind, pg_uri, index=None) as store:
        handle = await maybe(store.start_ttl_sweeper())
        if isinstance(handle, asyncio.Task):
            await handle
        else:
            assert handle.done()
        assert _sweeper(store) is None


async def test_cancelling_the_sync_sweepers_future_stops_it(pg_uri: str) -> None:
    with PostgresMemoryStore.from_conn_string(
        pg_uri, index=None, ttl={"sweep_interval_minutes": 60}
    ) as store:
        future = store.start_ttl_sweeper()
        thread = store._ttl_sweeper_thread
        assert thread is not None and thread.is_alive()
        future.cancel()
        thread.join()


# -- from_conn_string: pool_config, pipeline, deserializer --------------------------------


async def test_pool_config_maps_onto_the_pool(kind: str, pg_uri: str) -> None:
    config = {"min_size": 2, "max_size": 4, "kwargs": {"application_name": "opts-test"}}
    async with open_store(kind, pg_uri, index=None, pool_config=config) as store:
        pool = store.conn
        assert isinstance(pool, ConnectionPool | AsyncConnectionPool)
        assert (pool.min_size, pool.max_size) == (2, 4)
        await store.aput(NS, "k", {"v": 1})  # works: autocommit stays on
        if isinstance(pool, AsyncConnectionPool):
            async with pool.connection() as conn:
                row = await (await conn.execute("SHOW application_name")).fetchone()
                assert conn.autocommit
        else:
            with pool.connection() as sconn:
                row = sconn.execute("SHOW application_name").fetchone()
                assert sconn.autocommit
        assert row is not None and row[0] == "opts-test"


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"pipeline": True}, "pipeline"),
        ({"deserializer": lambda b: {}}, "deserializer"),
        ({"pool_config": {"kwargs": {"autocommit": False}}}, "autocommit"),
        ({"pool_config": {"max_size": 2}, "pool_size": 2}, "pool_size or pool_config"),
    ],
)
async def test_unsupported_connection_options_are_refused(
    kind: str, pg_uri: str, kwargs: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        async with open_store(kind, pg_uri, index=None, **kwargs):
            pass


async def test_pipeline_false_is_accepted(kind: str, pg_uri: str) -> None:
    async with open_store(kind, pg_uri, index=None, pipeline=False) as store:
        await store.aput(NS, "k", {"v": 1})
        assert (await store.aget(NS, "k")) is not None


# -- connections made the way LangGraph's docs make them ---------------------------------


def test_a_connection_that_prepares_every_statement_sets_up_and_recalls(
        bare_uri: str) -> None:
    # LangGraph's stores and savers want prepare_threshold=0; a user shares such a
    # connection with this store. setup()'s migrations hold several commands each, which
    # PostgreSQL refuses to prepare.
    from langmem_layer import MemoryLayer

    with psycopg.connect(bare_uri, autocommit=True, prepare_threshold=0) as conn:
        store = PostgresMemoryStore(conn, index=None)
        store.setup()
        layer = MemoryLayer(store, extraction="inline")
        layer.remember("alice", "Alice works at Acme on the billing team.")
        for _ in range(2):  # the second time through the prepared statements
            assert [r.record.content for r in layer.recall("alice", "where does Alice work")
                    ] == ["Alice works at Acme on the billing team."]


async def test_a_pool_that_prepares_every_statement_sets_up(bare_uri: str) -> None:
    config = {"min_size": 1, "max_size": 2, "kwargs": {"prepare_threshold": 0}}
    async with AsyncPostgresMemoryStore.from_conn_string(
            bare_uri, index=None, pool_config=config) as store:  # type: ignore[arg-type]
        await store.setup()
        for n in range(2):
            await store.aput(NS, "k", {"v": n})
            item = await store.aget(NS, "k")
            assert item is not None and item.value == {"v": n}


def _prepared_recalls(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM pg_prepared_statements"
                       " WHERE statement LIKE '%n_items AS%'").fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize(("threshold", "prepared"), [(5, 1), (None, 0)])
def test_recall_is_prepared_at_its_first_run_unless_the_connection_says_never(
        pg_uri: str, threshold: int | None, prepared: int) -> None:
    # Planned for its values, recall's statement costs more to plan than to run; psycopg
    # would prepare it only at its sixth run. prepare_threshold=None (e.g. behind a
    # transaction-mode pooler) turns preparing off, and the store keeps to it.
    from langmem_layer import MemoryLayer

    _truncate(pg_uri)
    with psycopg.connect(pg_uri, autocommit=True, prepare_threshold=threshold) as conn:
        layer = MemoryLayer(PostgresMemoryStore(conn, index=None), extraction="inline")
        layer.remember("alice", "Alice works at Acme.")
        assert _prepared_recalls(conn) == 0
        assert [r.record.content for r in layer.recall("alice", "where does Alice work")
                ] == ["Alice works at Acme."]
        assert _prepared_recalls(conn) == prepared
