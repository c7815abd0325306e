"""The Prometheus metrics an operator scrapes: from the HTTP app (``/metrics``) and from
``langmem-layer worker --metrics-port``, the same figures in the same names.

The database figures (the extraction backlog and its oldest turn, turns retrying and
parked, each job's last success) are read by one statement each that names no user,
under row-level security's maintenance binding; process figures (turns extracted and
failed by this worker, the served memory read's latency, errors by class, the pool) are
counted where they happen. ``prometheus-client`` (the ``server`` extra) is imported
only when metrics are asked for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from langmem_layer.sql import jobs as jsql
from langmem_layer.sql import queue_statements as qsql
from langmem_layer.sql.rls import bind

__all__ = ["READY_TIMEOUT", "Metrics", "collect", "collect_sync", "rows"]

#: Seconds a readiness probe or a scrape waits for the database.
READY_TIMEOUT = 2.0


class Metrics:
    """The app's Prometheus metrics, in a registry of its own (two apps in one process,
    as in tests, do not collide)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.backlog = Gauge("langmem_extraction_backlog",
                             "Turns waiting for extraction", registry=r)
        self.oldest = Gauge("langmem_extraction_oldest_seconds",
                            "Age of the oldest turn waiting for extraction", registry=r)
        self.retrying = Gauge("langmem_extraction_retrying",
                              "Turns waiting for a retry after a failed extraction",
                              registry=r)
        self.parked = Gauge("langmem_extraction_parked",
                            "Turns whose extraction failed for good (kept, not retried)",
                            registry=r)
        self.job_success = Gauge("langmem_job_last_success_timestamp_seconds",
                                 "When each job last finished without an error",
                                 ["job"], registry=r)
        self.job_seconds = Gauge("langmem_job_last_success_duration_seconds",
                                 "How long each job's last successful run took",
                                 ["job"], registry=r)
        self.recall = Histogram("langmem_recall_seconds",
                                "A served turn's memory read (load_memory)", registry=r,
                                buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5))
        self.errors = Counter("langmem_errors", "Errors answered, by class", ["error"],
                              registry=r)
        self.extracted = Counter("langmem_turns_extracted",
                                 "Turns this process extracted", registry=r)
        self.failed = Counter("langmem_turns_failed",
                              "Turns whose extraction failed in this process (retried later)",
                              registry=r)
        self.pool_size = Gauge("langmem_pool_connections", "Connections in the pool",
                               registry=r)
        self.pool_free = Gauge("langmem_pool_available", "Idle connections of the pool",
                               registry=r)
        self.pool_waiting = Gauge("langmem_pool_waiting",
                                  "Requests waiting for a connection", registry=r)

    def timed(self, read: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """``read`` (an async memory read), observed by the recall histogram."""

        async def observed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await read(*args, **kwargs)
            finally:
                self.recall.observe(time.perf_counter() - started)

        return observed


async def rows(store: Any, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One maintenance statement on a pooled connection of ``store`` (bound to no user,
    under row-level security's maintenance policy)."""
    conn = getattr(store, "conn", None)
    from psycopg import OperationalError
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    if isinstance(conn, AsyncConnectionPool):
        async def once() -> list[tuple[Any, ...]]:
            async with conn.connection(timeout=READY_TIMEOUT) as c, c.transaction():
                await c.execute(*bind(None, role=None, switch_role=False))
                cur = await c.execute(sql, params)
                return list(await cur.fetchall())

        try:
            return await once()
        except OperationalError:
            # The database came back, but the pool holds connections the outage broke:
            # replaced at once, so one probe after the outage answers for the database.
            await conn.check()
            return await once()
    if isinstance(conn, ConnectionPool):
        def run() -> list[tuple[Any, ...]]:
            with conn.connection(timeout=READY_TIMEOUT) as c, c.transaction():
                c.execute(*bind(None, role=None, switch_role=False))
                return list(c.execute(sql, params).fetchall())

        def checked() -> list[tuple[Any, ...]]:
            try:
                return run()
            except OperationalError:  # as above: the outage's broken connections
                conn.check()
                return run()

        return await asyncio.to_thread(checked)
    # A store on one connection: the store serialises its use; nothing is read beside it.
    raise LookupError("the store has no connection pool to read metrics on")




def _store_figures(found: Metrics, backlog: tuple[Any, ...], jobs: list[tuple[Any, ...]]
                   ) -> None:
    waiting, oldest, retrying, parked = backlog
    found.backlog.set(waiting)
    found.oldest.set(float(oldest))
    found.retrying.set(retrying)
    found.parked.set(parked)
    for job, finished, seconds in jobs:
        found.job_success.labels(job).set(float(finished))
        found.job_seconds.labels(job).set(float(seconds))


async def collect(found: Metrics, store: Any) -> None:
    """Read the database's figures into ``found`` (left as they were if it fails)."""
    pool = getattr(store, "conn", None)
    stats = getattr(pool, "get_stats", None)
    if callable(stats):
        s = stats()
        found.pool_size.set(s.get("pool_size", 0))
        found.pool_free.set(s.get("pool_available", 0))
        found.pool_waiting.set(s.get("requests_waiting", 0))
    try:
        (backlog,) = await rows(store, *qsql.backlog(datetime.now(UTC)))
        _store_figures(found, backlog, await rows(store, *jsql.last_successes()))
    except Exception:  # a scrape while the database is down shows the last figures
        found.errors.labels("DatabaseUnavailableError").inc()


def collect_sync(found: Metrics, store: Any) -> None:
    """``collect`` for a sync store (the worker's), on a connection of its own."""
    try:
        with store.connection() as conn, conn.transaction():
            conn.execute(*bind(None, role=None, switch_role=False))
            backlog = conn.execute(*qsql.backlog(datetime.now(UTC))).fetchone()
            jobs = list(conn.execute(*jsql.last_successes()).fetchall())
        _store_figures(found, tuple(backlog.values() if isinstance(backlog, dict)
                                    else backlog), [tuple(j.values() if isinstance(j, dict)
                                                          else j) for j in jobs])
    except Exception:  # a scrape while the database is down keeps the last figures
        found.errors.labels("DatabaseUnavailableError").inc()
