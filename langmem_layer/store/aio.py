"""`AsyncPostgresMemoryStore`: the asyncio store. It executes plans; the logic is in core."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from langgraph.store.base import BaseStore, Op, Result
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from langmem_layer.errors import DatabaseUnavailableError
from langmem_layer.store.core import ANN_MIN_USER_VECTORS, Plan, StoreCore
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.embedding import Retry
from langmem_layer.store.ops import IndexUserOp, LargeUsersOp, PurgeEmbeddingCacheOp, SweepExpiredOp
from langmem_layer.store.sync import chunked

__all__ = ["AsyncPostgresMemoryStore"]

_T = TypeVar("_T")
_R = TypeVar("_R")


class AsyncPostgresMemoryStore(StoreCore, BaseStore):
    """The asyncio twin of :class:`~langmem_layer.PostgresMemoryStore`.

    Args:
        conn: A psycopg ``AsyncConnection`` (autocommit) or an ``AsyncConnectionPool``.
        index: Embedding configuration, ``"default"``, or ``None``.
        ttl: LangGraph ``TTLConfig``.
        tenant_roots: First namespace labels whose second label is the user id.
        clock: Returns "now" (tests move time with it).
        embedding_batch_size: Texts per embedding call.
        embedding_retry_delay: Seconds before the first retry of a failed embedding
            call (3 attempts in all, the pause doubling); tests pass 0.
    """

    def __init__(self, conn: Any, **kwargs: Any) -> None:
        super().__init__(conn, **kwargs)
        self._lock = asyncio.Lock()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, pool_size: int | None = None, **kwargs: Any
    ) -> AsyncIterator[AsyncPostgresMemoryStore]:
        """Open a store on ``conn_string``; closes the connection (or pool) on exit."""
        try:
            if pool_size:
                async with AsyncConnectionPool(
                    conn_string, min_size=1, max_size=pool_size,
                    kwargs={"autocommit": True}, open=False,
                ) as pool:
                    yield cls(pool, **kwargs)
                return
            async with await psycopg.AsyncConnection.connect(
                conn_string, autocommit=True
            ) as conn:
                yield cls(conn, **kwargs)
        except psycopg.OperationalError as e:
            raise DatabaseUnavailableError(f"Cannot connect to PostgreSQL: {e}") from e

    @classmethod
    @asynccontextmanager
    async def embedded(
        cls, path: str | Path = ".langmem", **kwargs: Any
    ) -> AsyncIterator[AsyncPostgresMemoryStore]:
        """Open a store on the embedded PostgreSQL in ``path`` (started if needed)."""
        uri = await asyncio.to_thread(embedded_uri, path)
        async with cls.from_conn_string(uri, **kwargs) as store:
            yield store

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:
            async with self._lock:
                yield self.conn

    async def _retrying(self, call: Callable[[_T], Awaitable[_R]], arg: _T) -> _R:
        retry = Retry(self.embedding_retry_delay)
        while True:
            try:
                return await call(arg)
            except Exception as e:
                await asyncio.sleep(retry.pause_after(e))

    async def _execute(self, plan: Plan) -> list[Any]:
        self._loop = asyncio.get_running_loop()
        # Cache and model run before the transaction, so no lock is held while waiting
        # on the model, and a model that keeps failing leaves nothing written.
        if (lookup := plan.cache_lookup()) is not None:
            try:
                async with (
                    self._connection() as conn,
                    conn.cursor(row_factory=dict_row) as cur,
                ):
                    await cur.execute(lookup.sql, lookup.params)
                    plan.deliver_cache(await cur.fetchall())
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
                doc_vecs.extend(await self._retrying(emb.aembed_documents, batch))
            query_vecs = [await self._retrying(emb.aembed_query, q) for q in queries]
        plan.deliver_embeddings(doc_vecs, query_vecs)
        if plan.next_query() is not None:
            try:
                async with (
                    self._connection() as conn,
                    conn.transaction(),
                    conn.cursor(row_factory=dict_row) as cur,
                ):
                    while (query := plan.next_query()) is not None:
                        await cur.execute(query.sql, query.params)
                        plan.deliver_rows(await cur.fetchall() if cur.description else [])
            except psycopg.OperationalError as e:
                raise DatabaseUnavailableError(
                    f"PostgreSQL went away; the batch was rolled back: {e}"
                ) from e
        return plan.results()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Execute a batch of store and memory ops in one transaction."""
        return await self._execute(self.plan(ops))

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run :meth:`abatch` on the store's event loop from another thread.

        Raises:
            RuntimeError: When called from the event loop's own thread (it would
                deadlock); use the ``a``-prefixed methods there.
        """
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError(
                "The async store has not run on an event loop yet; call its async methods "
                "(aput, asearch, ...) or use PostgresMemoryStore for synchronous code."
            )
        try:
            if asyncio.get_running_loop() is loop:
                raise RuntimeError(
                    "Synchronous calls on AsyncPostgresMemoryStore from its own event loop "
                    "would deadlock; use the async methods (aget, aput, asearch, ...)."
                )
        except RuntimeError as e:
            if "deadlock" in str(e):
                raise
        future = asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), loop)
        return future.result()

    async def setup(self) -> list[int]:
        """Create or upgrade the schema. Idempotent; returns the versions applied."""
        return (await self._execute(self.setup_plan()))[0]  # type: ignore[no-any-return]

    async def index_large_users(self, *, threshold: int = ANN_MIN_USER_VECTORS) -> list[str]:
        """Async twin of :meth:`PostgresMemoryStore.index_large_users`."""
        users: list[tuple[str, int]] = (
            await self._execute(self.plan([LargeUsersOp(threshold)])))[0]
        for user_id, _ in users:
            await self._execute(self.plan([IndexUserOp(user_id)]))
        return [u for u, _ in users]

    async def sweep_ttl(self, *, now: datetime | None = None) -> int:
        """Delete expired items now; returns how many were deleted."""
        return int((await self._execute(self.plan([SweepExpiredOp(now)])))[0])

    async def purge_embedding_cache(self, *, now: datetime | None = None) -> int:
        """Delete embedding-cache entries older than 30 days; returns how many."""
        return int((await self._execute(self.plan([PurgeEmbeddingCacheOp(now)])))[0])
