"""The ASGI app: :func:`create_app`, and ``app`` for ``uvicorn langmem_layer.http.app:app``
(or ``langgraph.json``'s ``http.app``), configured from the ``LANGMEM_*`` environment.

The app opens its store when it starts (the one given, else one on
``LANGMEM_DATABASE_URL``, else the embedded PostgreSQL), runs ``setup()``, and closes
what it opened when it stops.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from langmem_layer.http import problems
from langmem_layer.http.panel import router as panel_router
from langmem_layer.http.routes import router
from langmem_layer.http.security import current_principal
from langmem_layer.http.state import Authenticate, ServerState
from langmem_layer.layer import MemoryLayer
from langmem_layer.settings import MemorySettings

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]

#: Largest request body accepted (an import file included): 10 MB.
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
_log = logging.getLogger(__name__)


async def _setup(store: Any) -> None:
    if inspect.iscoroutinefunction(store.setup):
        await store.setup()
    else:
        await asyncio.to_thread(store.setup)


def create_app(*, store: Any = None, database_url: str | None = None,
               data_dir: str | Path | None = None, graph: Any = None,
               settings: MemorySettings | None = None,
               authenticate: Authenticate | None = None, dev_user: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, pool_size: int = 10) -> FastAPI:
    """The HTTP app: the ``/v1`` memory REST API, and the agent routes for ``graph``.

    Args:
        store: A memory store to serve (left open at shutdown); default: one opened at
            startup on ``database_url`` and closed at shutdown.
        database_url: PostgreSQL URL; default ``LANGMEM_DATABASE_URL``, else embedded.
        data_dir: The embedded server's directory when no URL is set.
        graph: A compiled agent graph to serve through LangServe's routes.
        settings: The layer's settings; default from the ``LANGMEM_*`` environment.
        authenticate: Your own verification (JWT, OIDC): called with the request when
            it carries no API key of this library; returns a
            :class:`~langmem_layer.Principal` or None (may be a coroutine function).
        dev_user: Single-user demo mode: a request from loopback without credentials
            acts as this user; from any other address it is refused (401).
        max_body_bytes: Largest request body accepted (413 above).
        pool_size: Connections of the store opened at startup.
    """
    from langmem_layer.config import settings_from_env

    if dev_user is not None:
        from langmem_layer.runner import require_user

        require_user(dev_user)
    state = ServerState(settings or settings_from_env(), authenticate, dev_user)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with ExitStack() as opened:
            served = store
            if served is None:
                from langmem_layer.config import open_store

                served = await asyncio.to_thread(
                    opened.enter_context,
                    open_store(database_url, data_dir=data_dir, pool_size=pool_size))
            await _setup(served)
            layer = MemoryLayer(served, settings=state.settings)
            state.store, state.layer = served, layer
            try:
                yield
            finally:
                state.layer = None
                await layer.aclose()
                state.store = None
                await asyncio.to_thread(opened.close)

    app = FastAPI(
        title="langmem-layer", version=_version(), lifespan=lifespan,
        description="Long-term memory of LangGraph agents: the memory REST API. "
        "Authenticate with 'Authorization: Bearer <API key>'; errors are RFC 9457 "
        "problem documents.")
    app.state.langmem = state
    problems.install(app)
    app.add_middleware(problems.BodyLimit, max_bytes=max_body_bytes)
    app.include_router(router)
    app.include_router(panel_router)

    @app.get("/healthz", tags=["operations"], include_in_schema=False)
    async def healthz() -> JSONResponse:
        ready = state.layer is not None
        return JSONResponse({"status": "ok" if ready else "starting"},
                            status_code=200 if ready else 503)

    if graph is not None:
        _add_agent_routes(app, graph)
    return app


def _add_agent_routes(app: FastAPI, graph: Any) -> None:
    try:
        from langmem_layer.http.agent import add_agent_routes  # type: ignore[import-not-found,unused-ignore]
    except ImportError as e:
        _log.warning("agent routes not served: %s", e)
        return
    add_agent_routes(app, graph, principal_dependency=current_principal)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("langmem-layer")
    except PackageNotFoundError:  # run from a checkout that is not installed
        return "0"


_app: FastAPI | None = None


def __getattr__(name: str) -> Any:
    # ``app`` is built on first access, so importing this module configures nothing.
    global _app
    if name == "app":
        if _app is None:
            _app = create_app()
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
