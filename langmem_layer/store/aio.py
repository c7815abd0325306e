"""`AsyncPostgresMemoryStore`: the asyncio store. It executes plans; the logic is in core."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from langgraph.store.base import BaseStore, Op, Result
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from langmem_layer.errors import DatabaseUnavailableError, SyncCallOnEventLoopError
from langmem_layer.store.config import PoolConfig, pool_options, sweep_interval
from langmem_layer.store.core import ANN_MIN_USER_VECTORS, StoreCore
from langmem_layer.store.driver import (
    IO,
    EmbedDocuments,
    EmbedQuery,
    Fetch,
    Job,
    RunTransaction,
    Sleep,
    Stepper,
)
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.ops import PurgeEmbeddingCacheOp, SweepExpiredOp

__all__ = ["AsyncPostgresMemoryStore"]

logger = logging.getLogger("langmem_layer.store")


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
        # The loop the sync methods hand their work to from other threads, known from
        # the start (as in LangGraph's AsyncPostgresStore) when the store is made in it.
        self.loop: asyncio.AbstractEventLoop | None = _running_loop()
        self._ttl_sweeper_task: asyncio.Task[None] | None = None
        self._ttl_stop_event: asyncio.Event | None = None

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str,
        *,
        pool_size: int | None = None,
        pool_config: PoolConfig | None = None,
        pipeline: bool = False,
        deserializer: Any = None,
        **kwargs: Any,
    ) -> AsyncIterator[AsyncPostgresMemoryStore]:
        """Open a store on ``conn_string``; on exit stops its TTL sweeper and closes the
        connection (or pool). Arguments as ``PostgresMemoryStore.from_conn_string``.

        Raises:
            ConfigurationError: ``pipeline=True``, a ``deserializer``, or pool settings
                that cannot work.
            DatabaseUnavailableError: PostgreSQL cannot be reached.
        """
        pool = pool_options(pool_size, pool_config, pipeline=pipeline, deserializer=deserializer)
        try:
            if pool is not None:
                async with (
                    AsyncConnectionPool(conn_string, **pool, open=False) as conn_pool,
                    cls._serve(conn_pool, kwargs) as store,
                ):
                    yield store
                return
            async with await psycopg.AsyncConnection.connect(
                conn_string, autocommit=True
            ) as conn, cls._serve(conn, kwargs) as store:
                yield store
        except psycopg.OperationalError as e:
            raise DatabaseUnavailableError(f"Cannot connect to PostgreSQL: {e}") from e

    @classmethod
    @asynccontextmanager
    async def _serve(
        cls, conn: Any, kwargs: dict[str, Any]
    ) -> AsyncIterator[AsyncPostgresMemoryStore]:
        store = cls(conn, **kwargs)
        try:
            yield store
        finally:
            await store.stop_ttl_sweeper()

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

    async def _io(self, io: IO) -> Any:
        """Perform one I/O step of a job (see :mod:`langmem_layer.store.driver`)."""
        match io:
            case Fetch(query):
                async with self._connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(query.sql, query.params)
                    return await cur.fetchall()
            case RunTransaction(plan):
                async with (
                    self._connection() as conn,
                    conn.transaction(),
                    conn.cursor(row_factory=dict_row) as cur,
                ):
                    while (q := plan.next_query()) is not None:
                        await cur.execute(q.sql, q.params)
                        plan.deliver_rows(await cur.fetchall() if cur.description else [])
                return None
            case EmbedDocuments(texts):
                return await self._model().aembed_documents(texts)
            case EmbedQuery(text):
                return await self._model().aembed_query(text)
            case Sleep(seconds):
                return await asyncio.sleep(seconds)
        raise TypeError(f"unknown I/O step {io!r}")

    async def _drive(self, job: Job) -> Any:
        if self.loop is None or self.loop.is_closed():
            self.loop = asyncio.get_running_loop()
        step = Stepper(job)
        while (io := step.io) is not None:
            try:
                reply = await self._io(io)
            except Exception as e:
                step.throw(e)
            else:
                step.send(reply)
        return step.result

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Execute a batch of store and memory ops in one transaction."""
        return await self._drive(self._batch_job(ops))  # type: ignore[no-any-return]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run :meth:`abatch` on the store's event loop from another thread.

        The loop is the one running when the store was made (or, failing that, the
        first one it ran on), so a fresh store serves threads at once.

        Raises:
            SyncCallOnEventLoopError: When called from the event loop's own thread,
                where waiting for the loop would deadlock; use the ``a``-prefixed
                methods there. It is also an ``asyncio.InvalidStateError``.
        """
        loop = self.loop
        if loop is None or loop.is_closed():
            raise SyncCallOnEventLoopError(
                "The async store has no running event loop to run on; make it inside "
                "one (async with AsyncPostgresMemoryStore.from_conn_string(...)) or use "
                "PostgresMemoryStore for synchronous code."
            )
        if _running_loop() is loop:
            raise SyncCallOnEventLoopError(
                "Synchronous calls on AsyncPostgresMemoryStore from its own event loop "
                "would deadlock; use the async methods (aget, aput, asearch, ...)."
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), loop).result()

    async def setup(self) -> list[int]:
        """Create or upgrade the schema. Idempotent; returns the versions applied."""
        return await self._drive(self._setup_job())  # type: ignore[no-any-return]

    async def index_large_users(self, *, threshold: int = ANN_MIN_USER_VECTORS) -> list[str]:
        """Async twin of :meth:`PostgresMemoryStore.index_large_users`."""
        return await self._drive(self._index_large_users_job(threshold))  # type: ignore[no-any-return]

    async def sweep_ttl(self, *, now: datetime | None = None) -> int:
        """Delete expired items now; returns how many were deleted."""
        return int(await self._drive(self._op_job(SweepExpiredOp(now))))

    async def purge_embedding_cache(self, *, now: datetime | None = None) -> int:
        """Delete embedding-cache entries older than 30 days; returns how many."""
        return int(await self._drive(self._op_job(PurgeEmbeddingCacheOp(now))))

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` in a task on this loop.

        As LangGraph's ``AsyncPostgresStore``: the interval defaults to the TTL config's
        ``sweep_interval_minutes``, else 5; without a TTL config the task ends at once;
        while the sweeper runs, its task is returned again. A failed sweep is logged and
        the next one still runs. Leaving ``from_conn_string`` stops the sweeper.

        Returns:
            The sweeper's task; cancelling it stops the sweeper.
        """
        if not self.ttl_config:
            return asyncio.create_task(asyncio.sleep(0))
        if self._ttl_sweeper_task is not None and not self._ttl_sweeper_task.done():
            return self._ttl_sweeper_task
        seconds = sweep_interval(self.ttl_config, sweep_interval_minutes) * 60
        stop = self._ttl_stop_event = asyncio.Event()

        async def sweep_loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=seconds)
                    return
                except TimeoutError:
                    pass
                try:
                    if swept := await self.sweep_ttl():
                        logger.info("TTL sweep deleted %d expired items", swept)
                except Exception:
                    logger.exception("TTL sweep failed; the next one runs as planned")

        task = asyncio.create_task(sweep_loop(), name="langmem-ttl-sweeper")
        self._ttl_sweeper_task = task
        return task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the TTL sweeper task, waiting up to ``timeout`` seconds (None: no limit).

        Returns:
            True when no sweeper runs any more, False if it was still sweeping at the
            timeout.
        """
        task = self._ttl_sweeper_task
        if task is None or task.done():
            return True
        if self._ttl_stop_event is not None:
            self._ttl_stop_event.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            return False
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
        self._ttl_sweeper_task = None
        return True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread
        return None
