"""The ASGI app: ``create_app``, and ``app`` for ``uvicorn langmem_layer.server.http.app:app``
(or ``langgraph.json``'s ``http.app``), configured from the ``LANGMEM_*`` environment.

One app, one lifetime (``memory_lifespan``): at
startup it opens the store (the one given, else an async pooled store on
``LANGMEM_DATABASE_URL``, else on the embedded PostgreSQL), runs ``setup()``, builds the
layer, the memory agent and the extraction worker, and mounts the agent's LangServe
routes at ``/agent``; the ``/v1`` REST routes work on the same layer. At shutdown it
drains extraction and closes what it opened.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from langmem_layer.server.http import operations, problems
from langmem_layer.server.http.lifespan import GraphFactory, memory_lifespan, served_agent
from langmem_layer.server.http.panel import router as panel_router
from langmem_layer.server.http.routes import router
from langmem_layer.server.http.security import current_principal
from langmem_layer.server.http.state import Authenticate, ServerState
from langmem_layer.settings import MemorySettings

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]

#: Largest request body accepted (an import file included): 10 MB.
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024


def create_app(*, store: Any = None, database_url: str | None = None,
               data_dir: str | Path | None = None, agent: bool = True,
               graph_factory: GraphFactory | None = None, agent_path: str = "/agent",
               settings: MemorySettings | None = None,
               authenticate: Authenticate | None = None, dev_user: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, pool_size: int = 10,
               store_options: Mapping[str, Any] | None = None,
               layer_options: Mapping[str, Any] | None = None,
               poll_seconds: float = 5.0) -> FastAPI:
    """The HTTP app: the memory agent through LangServe and the ``/v1`` memory REST API.

    Both authenticate with ``current_principal`` (API
    keys, then ``authenticate``, then dev mode) and work on one store and one layer,
    opened by ``memory_lifespan`` with the extraction
    worker; the ``MemoryService`` is
    ``app.state.memory`` while the app runs.

    Args:
        store: A memory store to serve (left open at shutdown), async or sync. Default:
            an ``AsyncPostgresMemoryStore`` with a pool of ``pool_size`` connections,
            opened at startup on ``database_url`` and closed at shutdown.
        database_url: PostgreSQL URL; default ``LANGMEM_DATABASE_URL``, else embedded.
        data_dir: The embedded server's directory when no URL is set.
        agent: Serve the memory agent at ``agent_path`` (False: the REST API only).
        graph_factory: Builds the agent for the layer; default
            ``langmem_layer.facade.agent_graph.build_agent_graph``.
        agent_path: Where the agent's LangServe routes go.
        settings: The layer's settings; default from the ``LANGMEM_*`` environment.
        authenticate: Your own verification (JWT, OIDC): called with the request when
            it carries no API key of this library; returns a
            ``Principal`` or None (may be a coroutine function).
        dev_user: Single-user demo mode: a request from loopback without credentials
            acts as this user; from any other address it is refused (401).
        max_body_bytes: Largest request body accepted (413 above).
        pool_size: Connections of the store opened at startup.
        store_options: Other arguments of the store opened at startup (``index``...).
        layer_options: Arguments of the ``MemoryLayer``
            (``extractor``...).
        poll_seconds: Pause between the extraction worker's passes.
    """
    from langmem_layer.environment import settings_from_env

    if dev_user is not None:
        from langmem_layer.flow import require_user

        require_user(dev_user)
    state = ServerState(settings or settings_from_env(), authenticate, dev_user)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with memory_lifespan(
                store=store, database_url=database_url, data_dir=data_dir,
                settings=state.settings, graph_factory=graph_factory, agent=agent,
                store_options={"pool_size": pool_size, **(store_options or {})},
                layer_options=layer_options, poll_seconds=poll_seconds) as service:
            state.store, state.layer = service.store, service.layer
            state.database_url = service.database_url
            app.state.memory = service
            # The served turns' memory read, timed for /metrics' recall histogram.
            threads = service.layer.threads
            threads.aload_thread = metrics.timed(  # type: ignore[method-assign,assignment]
                threads.aload_thread)
            try:
                async with served_agent(app, service.graph, current_principal,
                                        path=agent_path):
                    yield
            finally:
                # Requests are over; memory_lifespan now drains extraction and closes.
                state.store = state.layer = state.database_url = None

    app = FastAPI(
        title="langmem-layer", version=_version(), lifespan=lifespan,
        description="Long-term memory of LangGraph agents: the memory agent (LangServe, "
        "at /agent) and the memory REST API. Authenticate with 'Authorization: Bearer "
        "<API key>'; errors are RFC 9457 problem documents.")
    app.state.langmem = state
    metrics = app.state.metrics = operations.Metrics()
    problems.install(app)
    app.add_middleware(problems.BodyLimit, max_bytes=max_body_bytes)
    app.include_router(router)
    app.include_router(panel_router)
    app.include_router(operations.router)
    return app


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
