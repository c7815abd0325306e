"""`PostgresMemoryStore`: the synchronous store. It executes plans; the logic is in core.

The methods between the "generated" markers are made from the async store's
(``aio.py``) by ``python -m tests.unasync``: change them there. The rest is the sync
store's own (its TTL sweeper thread, ``batch``, ``abatch``...).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from langgraph.store.base import BaseStore, Op, Result
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from langmem_layer.errors import DatabaseUnavailableError
from langmem_layer.sanitize import redact
from langmem_layer.sql import citus as citussql
from langmem_layer.sql import numbered
from langmem_layer.store.core import ANN_MIN_USER_VECTORS, SYNC_HOOKS, StoreCore
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

__all__ = ["PostgresMemoryStore"]

logger = logging.getLogger("langmem_layer.store")


class PostgresMemoryStore(StoreCore, BaseStore):
    """A LangGraph ``BaseStore`` on PostgreSQL + pgvector with typed long-term memory.

    Works anywhere LangGraph takes a store (``graph.compile(store=...)``, ``get_store()``),
    and additionally executes the memory ops of ``langmem_layer.store.ops``.

    Args:
        conn: A psycopg ``Connection`` (autocommit) or a ``ConnectionPool``.
        **kwargs: The store's options (below), each keyword-only.

    Keyword Args:
        index (MemoryIndexConfig | str | None): Embedding configuration,
            ``"default"`` for the default model, or ``None`` for no vector search.
        ttl (TTLConfig | None): LangGraph ``TTLConfig``.
        tenant_roots (Sequence[str]): First namespace labels whose second label is the user id.
        clock (Callable[[], datetime]): Returns "now" (tests move time with it).
        embedding_batch_size (int): Texts per embedding call (default 100).
        embedding_retry_delay (float): Seconds before the first retry of a failed embedding
            call (3 attempts in all, the pause doubling); tests pass 0.

    Example:
        >>> with PostgresMemoryStore.embedded(".langmem") as store:
        ...     store.setup()
        ...     store.put(("memories", "u1", "work"), "k", {"note": "hello"})
    """

    def __init__(self, conn: Any, **kwargs: Any) -> None:
        # Where a single connection broken by the server's death is opened again.
        self._reconnect: str | None = kwargs.pop("_reconnect", None)
        super().__init__(conn, **kwargs)
        self._lock = threading.Lock()
        self._ttl_sweeper_thread: threading.Thread | None = None
        self._ttl_stop_event = threading.Event()

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        pool_size: int | None = None,
        pool_config: PoolConfig | None = None,
        pipeline: bool = False,
        deserializer: Any = None,
        **kwargs: Any,
    ) -> Iterator[PostgresMemoryStore]:
        """Open a store on ``conn_string``; on exit stops its TTL sweeper and closes the
        connection (or pool).

        Args:
            conn_string: A PostgreSQL URI.
            pool_size: Use a connection pool of this size instead of one connection.
            pool_config: Use a connection pool with these settings (LangGraph's
                ``PoolConfig``: ``min_size``, ``max_size``, ``kwargs``; other keys go to
                psycopg's ``ConnectionPool``).
            pipeline: Not supported (``True`` raises); the store sends each batch as
                one transaction.
            deserializer: Not supported (raises); values are read back as dicts.
            **kwargs: Passed to the constructor (``index``, ``ttl``, ``clock``...).

        Raises:
            ConfigurationError: ``pipeline=True``, a ``deserializer``, or pool settings
                that cannot work (see ``pool_options``).
            DatabaseUnavailableError: PostgreSQL cannot be reached.
        """
        check_conninfo(conn_string)
        pool = pool_options(pool_size, pool_config, pipeline=pipeline, deserializer=deserializer)
        try:
            if pool is not None:
                # One connection first: a pool retries a refused or misconfigured
                # connection until its timeout and then reports only that it timed out.
                psycopg.connect(conn_string).close()
                with (
                    ConnectionPool(conn_string, **pool) as conn_pool,
                    cls._serve(conn_pool, kwargs) as store,
                ):
                    yield store
                return
            with (
                psycopg.connect(conn_string, autocommit=True) as conn,
                cls._serve(conn, {**kwargs, "_reconnect": conn_string}) as store,
            ):
                yield store
        except psycopg.OperationalError as e:
            raise connect_error(e, conn_string) from None

    # --- generated from aio.py by tests/unasync.py: do not edit ---

    @classmethod
    @contextmanager
    def _serve(
        cls, conn: Any, kwargs: dict[str, Any]
    ) -> Iterator[PostgresMemoryStore]:
        store = cls(conn, **kwargs)
        try:
            yield store
        finally:
            for hook in store._closing_hooks(SYNC_HOOKS):
                try:
                    hook()
                except Exception:  # a hook must not keep the store from closing
                    logger.exception("A close hook of the store failed")
            store.stop_ttl_sweeper()
            if store.conn is not conn:  # a replacement opened after the first one broke
                store.conn.close()

    @classmethod
    @contextmanager
    def embedded(
        cls, path: str | Path | None = None, **kwargs: Any
    ) -> Iterator[PostgresMemoryStore]:
        """Open a store on the embedded PostgreSQL in ``path`` (started if needed)."""
        uri = embedded_uri(path)
        with cls.from_conn_string(uri, **kwargs) as store:
            yield store

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            with self._lock:
                if self.conn.broken and self._reconnect is not None:
                    self.conn = self._open_again(self._reconnect)
                yield self.conn

    def _open_again(self, conn_string: str) -> psycopg.Connection[Any]:
        # The server died under the connection (and may be back): open a new one rather
        # than fail every call until the process restarts. A closed (not broken)
        # connection was closed on purpose and stays closed.
        try:
            conn = psycopg.Connection.connect(conn_string, autocommit=True)
        except psycopg.OperationalError as e:
            raise DatabaseUnavailableError(f"PostgreSQL is still unreachable; nothing was run: "
                                           f"{redact(str(e), conn_string)}") from None
        logger.info("reconnected to PostgreSQL after the connection broke")
        return conn

    def _abandon(self, conn: Any, rounds: Rounds) -> None:
        # An error left the batch's transaction open (aborted) on the server: end it,
        # or, inside the caller's transaction, go back to the batch's savepoint. A broken
        # connection cannot be rolled back and is the pool's (or the next call's
        # reconnect) to replace.
        try:
            if rounds.nested:
                for q in rounds.recovery():
                    conn.execute(q.sql)
            else:
                conn.rollback()
        except psycopg.Error:
            logger.debug("rollback after a failed transaction failed", exc_info=True)

    def _io(self, io: IO) -> Any:
        """Perform one I/O step of a job (see ``langmem_layer.store.driver``)."""
        match io:
            case Fetch(query, bind):
                # A plan of its one statement: one round trip, no BEGIN or COMMIT (the
                # pipeline's implicit transaction), a savepoint inside a caller's.
                plan = Plan.single(query, bind)
                self._io(RunTransaction(plan))
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
                with self._connection() as conn:
                    nested = conn.info.transaction_status != TransactionStatus.IDLE
                    blocks = self.transaction_blocks
                    if blocks is None:  # once per store: is the binding to reach workers?
                        with conn.cursor(row_factory=dict_row) as cur:
                            cur.execute(*citussql.session())
                            blocks = self.needs_blocks(cur.fetchone() or {})
                    rounds = Rounds(plan, self._bind_query, nested=nested,
                                    begun=not conn.autocommit, blocks=blocks,
                                    split=self.distributed)
                    try:
                        while statements := rounds.next():
                            cursors = [psycopg.RawCursor(conn, row_factory=dict_row)
                                       for _ in statements]
                            with conn.pipeline():
                                for cur, q in zip(cursors, statements, strict=True):
                                    cur.execute(*numbered(q.sql, q.params),
                                                prepare=True)
                            rounds.deliver([cur.fetchall() if returns_rows(cur) else []
                                            for cur in cursors])
                    except BaseException:
                        self._abandon(conn, rounds)
                        raise
                return None
            case RunTransaction(plan):
                # DDL may hold several commands: the simple protocol, a statement at a time,
                # never prepared (PostgreSQL refuses to), whatever the connection's
                # prepare_threshold.
                with (
                    self._connection() as conn,
                    conn.transaction(),
                    conn.cursor(row_factory=dict_row) as ddl,
                ):
                    bound = None
                    while (statement := plan.next_query()) is not None:
                        if (bind := plan.binding()) != bound:
                            conn.execute(*self._bind_query(bind)[:2])
                            bound = bind
                        pre = None
                        if statement.pre is not None:
                            ddl.execute(*statement.pre, prepare=False)
                            pre = ddl.fetchall() if returns_rows(ddl) else []
                        ddl.execute(statement.sql, statement.params, prepare=False)
                        rows = ddl.fetchall() if returns_rows(ddl) else []
                        plan.deliver_rows(rows if pre is None else (pre, rows))
                return None
            case EmbedDocuments(texts):
                return self._model().embed_documents(texts)
            case EmbedQuery(text):
                return self._model().embed_query(text)
            case Sleep(seconds):
                return time.sleep(seconds)
            case Autocommit(statement):
                with self._connection() as conn:
                    if conn.info.transaction_status != TransactionStatus.IDLE:
                        raise psycopg.errors.ActiveSqlTransaction(
                            "the connection is in a transaction of the caller's")
                    manual = not conn.autocommit
                    if manual:
                        conn.set_autocommit(True)
                    try:
                        conn.execute(statement, prepare=False)
                    finally:
                        if manual:
                            conn.set_autocommit(False)
                return None
        raise TypeError(f"unknown I/O step {io!r}")

    def _drive(self, job: Job) -> Any:
        step = Stepper(job)
        while (io := step.io) is not None:
            try:
                reply = self._io(io)
            except Exception as e:
                step.throw(e)
            else:
                step.send(reply)
        return step.result

    def setup(self, *, distributed: bool | None = None) -> list[int]:
        """Create or upgrade the schema. Idempotent; returns the versions applied.

        On Citus (``distributed=True``, or by default when the database has the
        ``citus`` extension) the per-user tables are then distributed on ``user_id``
        and the others made reference tables (``langmem_layer.sql.citus``);
        ``distributed=False`` leaves the tables local.
        """
        return self._drive(self._setup_job(distributed))  # type: ignore[no-any-return]

    def index_large_users(self, *, threshold: int = ANN_MIN_USER_VECTORS) -> list[str]:
        """Give every user with ``threshold`` or more vectors an HNSW index and a full-text
        (GIN) index of their own; recall then takes the large-user path.

        Run it as a periodic job. Each index is built in its own transaction, which holds
        writes to the embeddings table for the build (seconds per 100k vectors).
        Returns the users indexed.
        """
        return self._drive(self._index_large_users_job(threshold))  # type: ignore[no-any-return]

    def sweep_ttl(self, *, now: datetime | None = None) -> int:
        """Delete expired items now; returns how many were deleted."""
        return int(self._drive(self._op_job(SweepExpiredOp(now))))

    def purge_embedding_cache(self, *, now: datetime | None = None) -> int:
        """Delete embedding-cache entries older than 30 days; returns how many."""
        return int(self._drive(self._op_job(PurgeEmbeddingCacheOp(now))))

    # --- end of generated code ---

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the store for the block: one of the pool's, or the store's
        single connection (held under the store's lock, reopened if the server broke it).

        For code that sends its own statements beside the store's, such as a job's SQL
        (``langmem_layer.jobs.JobContext.execute``).
        """
        with self._connection() as conn:
            yield conn

    @contextmanager
    def pinned(self) -> Iterator[PostgresMemoryStore]:
        """A copy of this store working on one connection for the block.

        Everything the copy runs goes through that connection (``copy.conn``), in order,
        so statements sent on it directly (a session's advisory lock, a transaction
        around a user's work) and the store's own batches share one session. The copy has
        a lock of its own: a store call made while the caller holds the connection does
        not wait on itself. The connection returns to the pool when the block ends.
        """
        with self._connection() as conn:
            pinned = copy.copy(self)
            pinned.conn = conn
            pinned._lock = threading.Lock()
            yield pinned

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Execute a batch of store and memory ops in one transaction."""
        return self._drive(self._batch_job(ops))  # type: ignore[no-any-return]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``batch`` in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Run ``sweep_ttl`` every ``sweep_interval_minutes`` in a background thread.

        As LangGraph's ``PostgresStore``: the interval defaults to the TTL config's
        ``sweep_interval_minutes``, else 5; without a TTL config nothing starts; a
        second call while the sweeper runs starts no other. A failed sweep is logged and
        the next one still runs. Leaving ``from_conn_string`` stops the sweeper.

        Returns:
            A future resolved when the sweeper stops; cancelling it stops the sweeper.
        """
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if not self.ttl_config:
            future.set_result(None)
            return future
        future.add_done_callback(lambda f: self._ttl_stop_event.set() if f.cancelled() else None)
        if self._ttl_sweeper_thread is not None and self._ttl_sweeper_thread.is_alive():
            return future
        self._ttl_stop_event.clear()
        seconds = sweep_interval(self.ttl_config, sweep_interval_minutes) * 60
        stop = self._ttl_stop_event

        def sweep_loop() -> None:
            while not stop.wait(seconds):
                try:
                    if swept := self.sweep_ttl():
                        logger.info("TTL sweep deleted %d expired items", swept)
                except Exception:
                    logger.exception("TTL sweep failed; the next one runs as planned")
            if not future.done():
                future.set_result(None)

        thread = threading.Thread(target=sweep_loop, name="langmem-ttl-sweeper", daemon=True)
        self._ttl_sweeper_thread = thread
        thread.start()
        return future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the TTL sweeper thread, waiting up to ``timeout`` seconds (None: no limit).

        Returns:
            True when no sweeper runs any more, False if it was still sweeping at the
            timeout.
        """
        thread = self._ttl_sweeper_thread
        if thread is None or not thread.is_alive():
            return True
        self._ttl_stop_event.set()
        thread.join(timeout)
        if thread.is_alive():
            return False
        self._ttl_sweeper_thread = None
        return True
