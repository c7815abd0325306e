"""What an operator alerts on: ``/healthz``, ``/readyz`` and Prometheus ``/metrics``.

* ``/healthz``: the process is up and answers (200 whatever the database does).
* ``/readyz``: ready to serve turns: the database answers within
  ``READY_TIMEOUT`` seconds, its schema is the one this version writes (every migration
  applied), and a local embedding model is loaded. 503 with the reason otherwise; each
  probe checks anew, so it recovers by itself when the database does.
* ``/metrics``: the Prometheus text format, by ``prometheus-client``: the extraction
  backlog and the age of its oldest turn, turns retrying and parked, each job's last
  success and its duration, the served turns' memory read (``load_memory``) as a
  latency histogram, errors answered by class, and the connection pool's use.

The database figures are read at scrape time by one statement each, acting for no user
(the maintenance binding of ``langmem_layer.sql.rls``), on a connection of the store's
pool. None of these routes needs a key, and none shows a user's data: counts and ages
only (docs/operating.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from langmem_layer.sql import jobs as jsql
from langmem_layer.sql import queue as qsql
from langmem_layer.sql.migrations import MIGRATIONS, applied_versions
from langmem_layer.sql.rls import bind

__all__ = ["READY_TIMEOUT", "Metrics", "router"]

#: Seconds a readiness probe waits for the database.
READY_TIMEOUT = 2.0

router = APIRouter(include_in_schema=False, tags=["operations"])


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


async def _rows(store: Any, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
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


def _service(request: Request) -> Any:
    return getattr(request.app.state, "memory", None)


@router.get("/healthz")
async def healthz() -> JSONResponse:
    """The process is up."""
    return JSONResponse({"status": "ok"})


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready for turns: database reachable, schema current, embedding model loaded."""
    service = _service(request)
    if service is None:
        return JSONResponse({"status": "starting"}, status_code=503)
    problems: list[str] = []
    try:
        versions = await asyncio.wait_for(_rows(service.store, *applied_versions()),
                                          READY_TIMEOUT)
        missing = set(range(len(MIGRATIONS))) - {v for (v,) in versions}
        if missing:
            problems.append(f"schema not current: {len(missing)} migration(s) not applied "
                            "(run `langmem-layer setup`)")
    except LookupError:
        pass  # one connection, shared with the store: not probed
    except Exception as e:  # the database's failure is the answer: not ready
        problems.append(f"database unreachable: {type(e).__name__}")
    embedder = getattr(service.store, "embeddings", None)
    if getattr(embedder, "loaded", True) is False:
        problems.append("embedding model not loaded")
    if problems:
        return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
    return JSONResponse({"status": "ready"})


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    """The Prometheus text format (``prometheus_client``)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    found: Metrics = request.app.state.metrics
    service = _service(request)
    if service is not None:
        await _collect(found, service.store)
    return Response(generate_latest(found.registry), media_type=CONTENT_TYPE_LATEST)


async def _collect(found: Metrics, store: Any) -> None:
    """Read the database's figures into ``found`` (left as they were if it fails)."""
    pool = getattr(store, "conn", None)
    stats = getattr(pool, "get_stats", None)
    if callable(stats):
        s = stats()
        found.pool_size.set(s.get("pool_size", 0))
        found.pool_free.set(s.get("pool_available", 0))
        found.pool_waiting.set(s.get("requests_waiting", 0))
    try:
        ((waiting, oldest, retrying, parked),) = await _rows(
            store, *qsql.backlog(datetime.now(UTC)))
        found.backlog.set(waiting)
        found.oldest.set(float(oldest))
        found.retrying.set(retrying)
        found.parked.set(parked)
        for job, finished, seconds in await _rows(store, *jsql.last_successes()):
            found.job_success.labels(job).set(float(finished))
            found.job_seconds.labels(job).set(float(seconds))
    except Exception:  # a scrape while the database is down shows the last figures
        found.errors.labels("DatabaseUnavailableError").inc()
