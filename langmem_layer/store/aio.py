"""`AsyncPostgresMemoryStore`: the asyncio store. It executes plans; the logic is in core.

Concurrent calls are coalesced, as in LangGraph's ``AsyncBatchedBaseStore``: every call
made while the store's previous batch runs (or in the same event-loop iteration) is
executed with them as ONE batch, in one transaction on one connection, instead of each
taking a connection and a transaction of its own (see ``Coalescer``).

LangGraph's class itself is not reused: it needs a running loop when the store is made
(ours can be made outside one), queues only its own five methods (ours also coalesces
``abatch``, so memory ops and the sync-from-thread ``batch`` take the same path), fails
every call of a batch on any error, and raises a plain ``InvalidStateError`` where ours
raises ``SyncCallOnEventLoopError``.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import psycopg
from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from langmem_layer.errors import (
    DatabaseUnavailableError,
    OperationAppliedError,
    SyncCallOnEventLoopError,
)
from langmem_layer.sanitize import redact
from langmem_layer.sql import citus as citussql
from langmem_layer.sql import numbered
from langmem_layer.store.coalesce import Call, Coalescer, arrange, deliver, settle
from langmem_layer.store.core import ANN_MIN_USER_VECTORS, ASYNC_HOOKS, StoreCore
from langmem_layer.store.driver import (
    IO,
    Autocommit,
    EmbedDocuments,
    EmbedQuery,
    Fetch,
    Job,
    Rounds,
    RunTransaction,
    Sleep,
    Stepper,
    returns_rows,
)
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.ops import PurgeEmbeddingCacheOp, SweepExpiredOp
from langmem_layer.store.options import (
    PoolConfig,
    check_conninfo,
    connect_error,
    pool_options,
    sweep_interval,
)
from langmem_layer.store.plan import Plan
from langmem_layer.store.tenancy import check_namespace

__all__ = ["AsyncPostgresMemoryStore"]

logger = logging.getLogger("langmem_layer.store")

#: Errors that are the caller's own (bad input, a replayed operation): they fail only the
#: call that made them.
_CALLER_ERRORS = (ValueError, TypeError, LookupError, OperationAppliedError)


class AsyncPostgresMemoryStore(StoreCore, BaseStore):
    """The asyncio twin of ``PostgresMemoryStore``.

    Args:
        conn: A psycopg ``AsyncConnection`` (autocommit) or an ``AsyncConnectionPool``.
        **kwargs: The store's options (below), each keyword-only.

    Keyword Args:
        index (MemoryIndexConfig | str | None): Embedding configuration, ``"default"``, or ``None``.
        ttl (TTLConfig | None): LangGraph ``TTLConfig``.
        tenant_roots (Sequence[str]): First namespace labels whose second label is the user id.
        clock (Callable[[], datetime]): Returns "now" (tests move time with it).
        embedding_batch_size (int): Texts per embedding call.
        embedding_retry_delay (float): Seconds before the first retry of a failed embedding
            call (3 attempts in all, the pause doubling); tests pass 0.
    """

    def __init__(self, conn: Any, **kwargs: Any) -> None:
        # Where a single connection broken by the server's death is opened again.
        self._reconnect: str | None = kwargs.pop("_reconnect", None)
        super().__init__(conn, **kwargs)
        self._lock = asyncio.Lock()
        self._coalescers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Coalescer] = (
            weakref.WeakKeyDictionary()
        )
        # The last loop's queue, found without the weak dictionary's lookup per call.
        self._coalescer: Coalescer | None = None
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
        check_conninfo(conn_string)
        pool = pool_options(pool_size, pool_config, pipeline=pipeline, deserializer=deserializer)
        try:
            if pool is not None:
                # One connection first: a pool retries a refused or misconfigured
                # connection until its timeout and then reports only that it timed out.
                await (await psycopg.AsyncConnection.connect(conn_string)).close()
                async with (
                    AsyncConnectionPool(conn_string, **pool, open=False) as conn_pool,
                    cls._serve(conn_pool, kwargs) as store,
                ):
                    yield store
                return
            async with await psycopg.AsyncConnection.connect(
                conn_string, autocommit=True
            ) as conn, cls._serve(conn, {**kwargs, "_reconnect": conn_string}) as store:
                yield store
        except psycopg.OperationalError as e:
            raise connect_error(e, conn_string) from None

    @classmethod
    @asynccontextmanager
    async def _serve(
        cls, conn: Any, kwargs: dict[str, Any]
    ) -> AsyncIterator[AsyncPostgresMemoryStore]:
        store = cls(conn, **kwargs)
        try:
            yield store
        finally:
            for hook in store._closing_hooks(ASYNC_HOOKS):
                try:
                    await hook()
                except Exception:  # a hook must not keep the store from closing
                    logger.exception("A close hook of the store failed")
            await store.stop_ttl_sweeper()
            if store.conn is not conn:  # a replacement opened after the first one broke
                await store.conn.close()

    @classmethod
    @asynccontextmanager
    async def embedded(
        cls, path: str | Path | None = None, **kwargs: Any
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
                if self.conn.broken and self._reconnect is not None:
                    self.conn = await self._open_again(self._reconnect)
                yield self.conn

    async def _open_again(self, conn_string: str) -> psycopg.AsyncConnection[Any]:
        # The server died under the connection (and may be back): open a new one rather
        # than fail every call until the process restarts. A closed (not broken)
        # connection was closed on purpose and stays closed.
        try:
            conn = await psycopg.AsyncConnection.connect(conn_string, autocommit=True)
        except psycopg.OperationalError as e:
            raise DatabaseUnavailableError(f"PostgreSQL is still unreachable; nothing was run: "
                                           f"{redact(str(e), conn_string)}") from None
        logger.info("reconnected to PostgreSQL after the connection broke")
        return conn

    async def _abandon(self, conn: Any, rounds: Rounds) -> None:
        # An error left the batch's transaction open (aborted) on the server: end it,
        # or, inside the caller's transaction, go back to the batch's savepoint. A broken
        # connection cannot be rolled back and is the pool's (or the next call's
        # reconnect) to replace.
        try:
            if rounds.nested:
                for q in rounds.recovery():
                    await conn.execute(q.sql)
            else:
                await conn.rollback()
        except psycopg.Error:
            logger.debug("rollback after a failed transaction failed", exc_info=True)

    async def _io(self, io: IO) -> Any:
        """Perform one I/O step of a job (see ``langmem_layer.store.driver``)."""
        match io:
            case Fetch(query, bind):
                # A plan of its one statement: one round trip, no BEGIN or COMMIT (the
                # pipeline's implicit transaction), a savepoint inside a caller's.
                plan = Plan.single(query, bind)
                await self._io(RunTransaction(plan))
                return plan.results()[0]
            case RunTransaction(plan) if plan.pipelined:
                # Each round in one round trip: the statements Rounds lays out, BEGIN,
                # bindings and COMMIT included, sent in one pipeline block (one sync).
                # Each statement is prepared from its first run on the connection (a
                # connection made with prepare_threshold=None prepares none): recall
                # costs more to plan for its values than to run, and psycopg 3.3's own
                # threshold breaks in a pipeline, as it promotes a statement to prepared
                # when it sends it, and forgets nothing when an error earlier in the
                # pipeline skips the Parse, so the next run names a statement the server
                # never made ("prepared statement _pg3_N does not exist").
                async with self._connection() as conn:
                    nested = conn.info.transaction_status != TransactionStatus.IDLE
                    blocks = self.transaction_blocks
                    if blocks is None:  # once per store: is the binding to reach workers?
                        async with conn.cursor(row_factory=dict_row) as cur:
                            await cur.execute(*citussql.session())
                            blocks = self.needs_blocks(await cur.fetchone() or {})
                    rounds = Rounds(plan, self._bind_query, nested=nested,
                                    begun=not conn.autocommit, blocks=blocks,
                                    split=self.distributed)
                    try:
                        while statements := rounds.next():
                            cursors = [psycopg.AsyncRawCursor(conn, row_factory=dict_row)
                                       for _ in statements]
                            async with conn.pipeline():
                                for cur, q in zip(cursors, statements, strict=True):
                                    await cur.execute(*numbered(q.sql, q.params),
                                                      prepare=True)
                            rounds.deliver([await cur.fetchall() if returns_rows(cur) else []
                                            for cur in cursors])
                    except BaseException:
                        await self._abandon(conn, rounds)
                        raise
                return None
            case RunTransaction(plan):
                # DDL may hold several commands: the simple protocol, a statement at a time,
                # never prepared (PostgreSQL refuses to), whatever the connection's
                # prepare_threshold.
                async with (
                    self._connection() as conn,
                    conn.transaction(),
                    conn.cursor(row_factory=dict_row) as ddl,
                ):
                    bound = None
                    while (statement := plan.next_query()) is not None:
                        if (bind := plan.binding()) != bound:
                            await conn.execute(*self._bind_query(bind)[:2])
                            bound = bind
                        pre = None
                        if statement.pre is not None:
                            await ddl.execute(*statement.pre, prepare=False)
                            pre = await ddl.fetchall() if returns_rows(ddl) else []
                        await ddl.execute(statement.sql, statement.params, prepare=False)
                        rows = await ddl.fetchall() if returns_rows(ddl) else []
                        plan.deliver_rows(rows if pre is None else (pre, rows))
                return None
            case EmbedDocuments(texts):
                return await self._model().aembed_documents(texts)
            case EmbedQuery(text):
                return await self._model().aembed_query(text)
            case Sleep(seconds):
                return await asyncio.sleep(seconds)
            case Autocommit(statement):
                async with self._connection() as conn:
                    if conn.info.transaction_status != TransactionStatus.IDLE:
                        raise psycopg.errors.ActiveSqlTransaction(
                            "the connection is in a transaction of the caller's")
                    manual = not conn.autocommit
                    if manual:
                        await conn.set_autocommit(True)
                    try:
                        await conn.execute(statement, prepare=False)
                    finally:
                        if manual:
                            await conn.set_autocommit(False)
                return None
        raise TypeError(f"unknown I/O step {io!r}")

    async def _drive(self, job: Job) -> Any:
        if self.loop is None or self.loop.is_closed():  # async only
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
        """Execute a batch of store and memory ops in one transaction.

        Calls made concurrently (``asyncio.gather``, several tasks, threads through
        ``batch``) are coalesced: the ones waiting when the store's previous batch
        ends run together as one batch, in one transaction, as in LangGraph's
        ``AsyncPostgresStore``. A call's own ops keep their order and run together;
        concurrent calls run in an order of the store's choosing (reads first, then
        memory ops, then single puts). Every result is the caller's own.

        Failures: a bad op that can be told before running (an invalid namespace) fails
        only its caller. Bad input found while running (an invalid memory value, text
        PostgreSQL refuses) rolls the whole batch back, which is then run again call by
        call, so only the offending call fails. Any other error (the database gone, a
        pool time-out, a transaction that kept losing to concurrent ones) fails every
        call of the batch, as LangGraph's batched stores fail the whole batch.

        One coalesced batch runs at a time per event loop, on one connection; a call
        that waits on the embedding model delays the calls batched with it.
        """
        ops = list(ops)
        for op in ops:
            self._validate(op)
        if not ops:
            return []
        return await self._queue(ops=ops)  # type: ignore[no-any-return]

    def _submit(self, op: Op) -> asyncio.Future[Any]:
        """Queue one op as a call of the next coalesced batch; its result's future.

        Not a coroutine, so the single-op methods await the future themselves: under
        tens of thousands of pending calls, every coroutine frame a call keeps alive is
        one more object for each garbage-collection pass to walk.
        """
        self._validate(op)
        return self._queue(op=op)

    def _queue(self, *, ops: list[Op] | None = None, op: Op | None = None
               ) -> asyncio.Future[Any]:
        """Queue a call of ``ops`` or ``op`` (validated) for the next coalesced batch;
        its answer's future (see ``Call``)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self.loop is not loop and (self.loop is None or self.loop.is_closed()):
            self.loop = loop
        queue = self._coalescer
        if queue is None or queue.loop() is not loop:
            queue = self._coalescers.get(loop)
            if queue is None:
                queue = self._coalescers[loop] = Coalescer(loop)
            self._coalescer = queue
        queue.calls.append(Call(future, ops=ops, op=op))
        if queue.task is None or queue.task.done():
            queue.task = loop.create_task(self._run_calls(queue))
        return future

    # LangGraph's BaseStore implements these through abatch, a coroutine more per call.

    async def aget(self, namespace: tuple[str, ...], key: str, *,
                   refresh_ttl: bool | None = None) -> Item | None:
        """``BaseStore.aget`` (a key that is not a string is refused by ``_submit``)."""
        refresh = refresh_ttl if refresh_ttl is not None else (
            self.ttl_config or {}).get("refresh_on_read", True)
        return await self._submit(GetOp(namespace, key, refresh))  # type: ignore[no-any-return]

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Literal[False] | list[str] | None = None, *,
                   ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        """``BaseStore.aput`` (a key that is not a string is refused)."""
        if not isinstance(namespace, tuple) or not namespace:
            check_namespace(namespace)  # raises; _submit validates the rest of the op
        if isinstance(ttl, NotProvided):
            ttl = (self.ttl_config or {}).get("default_ttl")
        await self._submit(PutOp(namespace, key, value, index=index, ttl=ttl))

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """``BaseStore.adelete`` (a key that is not a string is refused by ``_submit``)."""
        await self._submit(PutOp(namespace, key, None, ttl=None))

    async def asearch(  # type: ignore[override]  # LangGraph's keywords, not **kwargs
            self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
            filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
            refresh_ttl: bool | None = None) -> list[SearchItem]:
        """``BaseStore.asearch`` (an invalid prefix is refused by ``_submit``)."""
        refresh = refresh_ttl if refresh_ttl is not None else (
            self.ttl_config or {}).get("refresh_on_read", True)
        return await self._submit(  # type: ignore[no-any-return]
            SearchOp(namespace_prefix, filter, limit, offset, query, refresh))

    async def alist_namespaces(self, *, prefix: NamespacePath | None = None,
                               suffix: NamespacePath | None = None,
                               max_depth: int | None = None, limit: int = 100,
                               offset: int = 0) -> list[tuple[str, ...]]:
        """``BaseStore.alist_namespaces`` (invalid labels are refused by ``_submit``)."""
        conditions = (
            *([MatchCondition(match_type="prefix", path=prefix)] if prefix else []),
            *([MatchCondition(match_type="suffix", path=suffix)] if suffix else []))
        return await self._submit(  # type: ignore[no-any-return]
            ListNamespacesOp(match_conditions=conditions, max_depth=max_depth, limit=limit,
                             offset=offset))

    async def _run_calls(self, queue: Coalescer) -> None:
        calls: list[Call] = []
        try:
            while queue.calls:
                calls, queue.calls = [c for c in queue.calls if not c.future.done()], []
                if calls:
                    await self._run_coalesced(calls)
        finally:  # cancelled with the loop: nobody waits forever
            for call in (*calls, *queue.calls):
                call.future.cancel()

    async def _run_coalesced(self, calls: list[Call]) -> None:
        flat, slots, keys = arrange(calls)
        try:
            results = await self._drive(self._batch_job(flat, validated=True))
        except _CALLER_ERRORS as e:
            if len(calls) == 1:
                settle(calls[0], error=e)
                return
            # Nothing was written (one transaction): find the caller at fault alone.
            for call in calls:
                try:
                    settle(call, call.answer(await self._drive(
                        self._batch_job(call.op_list(), validated=True))))
                except Exception as own:
                    settle(call, error=own)
        except Exception as e:
            for call in calls:
                settle(call, error=e)
        else:
            deliver(calls, slots, keys, results)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``abatch`` on the store's event loop from another thread.

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

    async def setup(self, *, distributed: bool | None = None) -> list[int]:
        """Create or upgrade the schema. Idempotent; returns the versions applied.

        On Citus (``distributed=True``, or by default when the database has the
        ``citus`` extension) the per-user tables are then distributed on ``user_id``
        and the others made reference tables (``langmem_layer.sql.citus``);
        ``distributed=False`` leaves the tables local.
        """
        return await self._drive(self._setup_job(distributed))  # type: ignore[no-any-return]

    async def index_large_users(self, *, threshold: int = ANN_MIN_USER_VECTORS) -> list[str]:
        """Async twin of ``PostgresMemoryStore.index_large_users``."""
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
        """Run ``sweep_ttl`` every ``sweep_interval_minutes`` in a task on this loop.

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
