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
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from langmem_layer.server.metrics import READY_TIMEOUT, Metrics, collect, rows
from langmem_layer.sql.migrations import MIGRATIONS, applied_versions

__all__ = ["READY_TIMEOUT", "Metrics", "router"]

router = APIRouter(include_in_schema=False, tags=["operations"])


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
        versions = await asyncio.wait_for(rows(service.store, *applied_versions()),
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
        await collect(found, service.store)
    return Response(generate_latest(found.registry), media_type=CONTENT_TYPE_LATEST)
