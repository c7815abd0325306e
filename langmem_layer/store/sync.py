"""`PostgresMemoryStore`: the synchronous store. It executes plans; the logic is in core."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from langgraph.store.base import BaseStore, Op, Result
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from langmem_layer.errors import DatabaseUnavailableError
from langmem_layer.ops import SweepExpiredOp
from langmem_layer.store.core import Plan, StoreCore
from langmem_layer.store.embedded import embedded_uri

__all__ = ["PostgresMemoryStore"]

def chunked(texts: list[str], size: int) -> Iterator[list[str]]:
    """Split texts into embedding calls of at most ``size``."""
    for i in range(0, len(texts), size):
        yield texts[i : i + size]


class PostgresMemoryStore(StoreCore, BaseStore):
    """A LangGraph ``BaseStore`` on PostgreSQL + pgvector with typed long-term memory.

    Works anywhere LangGraph takes a store (``graph.compile(store=...)``, ``get_store()``),
    and additionally executes the memory ops of :mod:`langmem_layer.ops`.

    Args:
        conn: A psycopg ``Connection`` (autocommit) or a ``ConnectionPool``.
        index: Embedding configuration, ``"default"`` for the default model, or
            ``None`` for no vector search.
        ttl: LangGraph ``TTLConfig``.
        tenant_roots: First namespace labels whose second label is the user id.
        clock: Returns "now" (tests move time with it).
        embedding_batch_size: Texts per embedding call (R3.5: 100).

    Example:
        >>> with PostgresMemoryStore.embedded(".langmem") as store:
        ...     store.setup()
        ...     store.put(("memories", "u1", "work"), "k", {"note": "hello"})
    """

    def __init__(self, conn: Any, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self._lock = threading.Lock()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls, conn_string: str, *, pool_size: int | None = None, **kwargs: Any
    ) -> Iterator[PostgresMemoryStore]:
        """Open a store on ``conn_string``; closes the connection (or pool) on exit.

        Args:
            conn_string: A PostgreSQL URI.
            pool_size: Use a connection pool of this size instead of one connection.
            **kwargs: Passed to the constructor (``index``, ``ttl``, ``clock``...).
        """
        try:
            if pool_size:
                with ConnectionPool(
                    conn_string, min_size=1, max_size=pool_size, kwargs={"autocommit": True}
                ) as pool:
                    yield cls(pool, **kwargs)
                return
            with psycopg.connect(conn_string, autocommit=True) as conn:
                yield cls(conn, **kwargs)
        except psycopg.OperationalError as e:
            raise DatabaseUnavailableError(f"Cannot connect to PostgreSQL: {e}") from e

    @classmethod
    @contextmanager
    def embedded(
        cls, path: str | Path = ".langmem", **kwargs: Any
    ) -> Iterator[PostgresMemoryStore]:
        """Open a store on the embedded PostgreSQL in ``path`` (started if needed)."""
        with cls.from_conn_string(embedded_uri(path), **kwargs) as store:
            yield store

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self._lock:
                yield self.conn

    def _execute(self, plan: Plan) -> list[Any]:
        docs, queries = plan.embedding_work()
        if docs or queries:
            emb = self.embeddings
            if emb is None:
                raise RuntimeError("embedding requested without an index")
            doc_vecs = [
                v for batch in chunked(docs, self.embedding_batch_size)
                for v in emb.embed_documents(batch)
            ]
            plan.deliver_embeddings(doc_vecs, [emb.embed_query(q) for q in queries])
        if plan.next_query() is not None:
            try:
                with (
                    self._connection() as conn,
                    conn.transaction(),
                    conn.cursor(row_factory=dict_row) as cur,
                ):
                    while (query := plan.next_query()) is not None:
                        cur.execute(query.sql, query.params)
                        plan.deliver_rows(cur.fetchall() if cur.description else [])
            except psycopg.OperationalError as e:
                raise DatabaseUnavailableError(
                    f"PostgreSQL went away; the batch was rolled back: {e}"
                ) from e
        return plan.results()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Execute a batch of store and memory ops in one transaction."""
        return self._execute(self.plan(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run :meth:`batch` in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def setup(self) -> list[int]:
        """Create or upgrade the schema. Idempotent; returns the versions applied."""
        return self._execute(self.setup_plan())[0]  # type: ignore[no-any-return]

    def sweep_ttl(self, *, now: datetime | None = None) -> int:
        """Delete expired items now; returns how many were deleted."""
        return int(self._execute(self.plan([SweepExpiredOp(now)]))[0])
