"""Bad input and a failing database give clear errors and lose nothing."""

from __future__ import annotations

import psycopg
import pytest
from langgraph.store.base import PutOp

from langmem_layer import DatabaseUnavailableError, InvalidNamespaceError
from langmem_layer.errors import EmbeddingDimensionError, InvalidMemoryError
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings


def test_wrong_embedding_dimensions_write_nothing(pg_uri: str, store) -> None:
    bad = {"embed": BagOfWordsEmbeddings(dims=32), "dims": 64, "model_id": "bow"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=bad) as s:
        with pytest.raises(EmbeddingDimensionError, match="dims=64") as info:
            s.batch([PutOp(("docs",), "a", {"text": "hello"}), PutOp(("docs",), "b", {"t": 1})])
        assert isinstance(info.value, ValueError)
        assert s.get(("docs",), "b") is None and s.get(("docs",), "a") is None


def test_invalid_memory_in_a_batch_writes_nothing(store) -> None:
    good = PutOp(("docs",), "ok", {"text": "fine"})
    bad = PutOp(("memories", "u1", "work"), "m", {"kind": "preference", "content": "x",
                                                   "confidence": 5})
    with pytest.raises(InvalidMemoryError, match="confidence"):
        store.batch([good, bad])
    assert store.get(("docs",), "ok") is None


def test_invalid_namespaces(store) -> None:
    from langgraph.store.base import InvalidNamespaceError as LangGraphError

    for ns in [("a.b",), ("",), ("langgraph", "x")]:
        with pytest.raises(LangGraphError):
            store.put(ns, "k", {"v": 1})
        with pytest.raises(LangGraphError):
            store.batch([PutOp(ns, "k", {"v": 1})])  # straight to batch: our own check
    with pytest.raises(InvalidNamespaceError, match="names no user"):
        store.put(("memories",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match="names no user"):
        store.search(("memories",), query="x")


async def test_a_namespace_read_first_is_still_checked_as_a_put_namespace(astore) -> None:
    # Namespaces found valid are remembered; one fine to read from is not thereby fine
    # to write to (a "langgraph" root, a blank label), nor does a refused one pass later.
    for ns in [("langgraph", "x"), ("notes", " ")]:
        for _ in range(2):
            assert await astore.aget(ns, "k") is None
            with pytest.raises(InvalidNamespaceError):
                await astore.aput(ns, "k", {"v": 1})
            with pytest.raises(InvalidNamespaceError):
                await astore.abatch([PutOp(ns, "k", {"v": 1})])
    for _ in range(2):
        with pytest.raises(InvalidNamespaceError, match="periods"):
            await astore.aget(("a.b",), "k")
        with pytest.raises(InvalidNamespaceError):
            await astore.aget(("a", ["unhashable"]), "k")  # type: ignore[arg-type]


def test_database_that_goes_away(pg_uri: str, index: dict) -> None:
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as s:
        s.put(("docs",), "a", {"text": "kept"})
        pid = s.conn.info.backend_pid
        with psycopg.connect(pg_uri, autocommit=True) as admin:
            # ::int: Citus adds pg_terminate_backend(bigint) (its global process ids)
            admin.execute("SELECT pg_terminate_backend(%s::int)", [pid])
        with pytest.raises(DatabaseUnavailableError) as info:
            s.put(("docs",), "b", {"text": "lost?"})
        assert isinstance(info.value, ConnectionError)
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as s:
        assert s.get(("docs",), "a") is not None  # committed data survives
        assert s.get(("docs",), "b") is None  # the failed batch left nothing half-written


def test_unreachable_server_is_a_clear_error() -> None:
    with (
        pytest.raises(DatabaseUnavailableError, match="Cannot connect"),
        PostgresMemoryStore.from_conn_string(
            "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", index=None),
    ):
        pass
