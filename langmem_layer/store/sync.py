"""`PostgresMemoryStore`: the synchronous store. It executes plans; the logic is in core."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from langgraph.store.base import BaseStore, Op, Result
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from langmem_layer.errors import DatabaseUnavailableError
from langmem_layer.store.core import ANN_MIN_USER_VECTORS, Plan, StoreCore
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.embedding import Retry
from langmem_layer.store.ops import IndexUserOp, LargeUsersOp, PurgeEmbeddingCacheOp, SweepExpiredOp

__all__ = ["PostgresMemoryStore"]

_T = TypeVar("_T")
_R = TypeVar("_R")


def chunked(texts: list[str], size: int) -> Iterator[list[str]]:
    """Split texts into embedding calls of at most ``size``."""
    for i in range(0, len(texts), size):
        yield texts[i : i + size]


class PostgresMemoryStore(StoreCore, BaseStore):
    """A LangGraph ``BaseStore`` on PostgreSQL + pgvector with typed long-term memory.

    Works anywhere LangGraph takes a store (``graph.compile(store=...)``, ``get_store()``),
    and additionally executes the memory ops of :mod:`langmem_layer.store.ops`.

    Args:
        conn: A psycopg ``Connection`` (autocommit) or a ``ConnectionPool``.
        index: Embedding configuration, ``"default"`` for the default model, or
            ``None`` for no vector search.
        ttl: LangGraph ``TTLConfig``.
        tenant_roots: First namespace labels whose second label is the user id.
        clock: Returns "now" (tests move time with it).
        embedding_batch_size: Texts per embedding call (R3.5: 100).
        embedding_retry_delay: Seconds before the first retry of a failed embedding
            call (3 attempts in all, the pause doubling); tests pass 0.

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

    def _retrying(self, call: Callable[[_T], _R], arg: _T) -> _R:
        retry = Retry(self.embedding_retry_delay)
        while True:
            try:
                return call(arg)
            except Exception as e:
                time.sleep(retry.pause_after(e))

    def _execute(self, plan: Plan) -> list[Any]:
        # Cache and model run before the transaction, so no lock is held while waiting
        # on the model, and a model that keeps failing leaves nothing written.
        if (lookup := plan.cache_lookup()) is not None:
            try:
                with self._connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                    cur.execute(lookup.sql, lookup.params)
                    plan.deliver_cache(cur.fetchall())
            except psycopg.OperationalError as e:
                raise DatabaseUnavailableError(f"PostgreSQL went away: {e}") from e
        docs, queries = plan.embedding_work()
        doc_vecs: list[list[float]] = []
        query_vecs: list[list[float]] = []
        if docs or queries:
            emb = self.embeddings
            if emb is None:
                raise RuntimeError("embedding requested without an index")
            for batch in chunked(docs, self.embedding_batch_size):
                doc_vecs.extend(self._retrying(emb.embed_documents, batch))
            query_vecs = [self._retrying(emb.embed_query, q) for q in queries]
        plan.deliver_embeddings(doc_vecs, query_vecs)
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

    def index_large_users(self, *, threshold: int = ANN_MIN_USER_VECTORS) -> list[str]:
        """Give every user with ``threshold`` or more vectors an HNSW index and a full-text
        (GIN) index of their own; recall then takes the large-user path.

        Run it as a periodic job. Each index is built in its own transaction, which holds
        writes to the embeddings table for the build (seconds per 100k vectors).
        Returns the users indexed.
        """
        users: list[tuple[str, int]] = self._execute(self.plan([LargeUsersOp(threshold)]))[0]
        for user_id, _ in users:
            self._execute(self.plan([IndexUserOp(user_id)]))
        return [u for u, _ in users]

    def sweep_ttl(self, *, now: datetime | None = None) -> int:
        """Delete expired items now; returns how many were deleted."""
        return int(self._execute(self.plan([SweepExpiredOp(now)]))[0])

    def purge_embedding_cache(self, *, now: datetime | None = None) -> int:
        """Delete embedding-cache entries older than 30 days; returns how many."""
        return int(self._execute(self.plan([PurgeEmbeddingCacheOp(now)]))[0])
