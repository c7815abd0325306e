"""The server's lifetime: the store, the memory layer, the agent and the extraction worker.

``memory_lifespan`` opens everything an HTTP server needs and closes it in order:
on exit (uvicorn's shutdown after SIGTERM, once in-flight requests finished) the
worker finishes the pass it is in (it is never cancelled: a cancelled pass would leave
its claimed turns leased until their lease expires), every queued turn is extracted,
and only then does the store close. A turn is therefore either extracted or still
queued, unleased, for the next server.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.graph import StateGraph
from langgraph.store.base import BaseStore

from langmem_layer.facade import MemoryLayer
from langmem_layer.settings import MemorySettings
from langmem_layer.worker import ExtractionLoop

if TYPE_CHECKING:
    from fastapi import FastAPI
    from langgraph.graph.state import CompiledStateGraph

__all__ = ["MemoryService", "agent_lifespan", "frozen_heap", "memory_lifespan",
           "served_agent"]

logger = logging.getLogger("langmem_layer")

#: Builds the agent for a layer: an uncompiled ``StateGraph`` (compiled here with the
#: store) or a compiled graph.
GraphFactory = Callable[[MemoryLayer], "StateGraph | CompiledStateGraph"]


@dataclass
class MemoryService:
    """What a running server holds (see ``memory_lifespan``).

    Attributes:
        store: The memory store (the async one, unless a sync store was given).
        layer: The memory layer on it.
        graph: The compiled memory agent (None when the agent was left out).
        worker: The background extraction loop.
        database_url: The URL the store was opened on (None when a store was given).
    """

    store: BaseStore
    layer: MemoryLayer
    graph: CompiledStateGraph | None
    worker: ExtractionLoop
    database_url: str | None = None


async def _open_store(stack: contextlib.AsyncExitStack, database_url: str | None,
                      data_dir: str | Path | None,
                      options: Mapping[str, Any]) -> tuple[BaseStore, str]:
    from langmem_layer.environment import database_url as resolve_url
    from langmem_layer.environment import describe_database
    from langmem_layer.store.aio import AsyncPostgresMemoryStore

    # Resolving may start the embedded server: a blocking call, kept off the loop.
    url = await asyncio.to_thread(resolve_url, database_url, data_dir=data_dir)
    logger.info("memory database: %s", describe_database(database_url, data_dir=data_dir))
    store = await stack.enter_async_context(
        AsyncPostgresMemoryStore.from_conn_string(url, **dict(options)))
    return store, url


async def _warm(store: BaseStore) -> None:
    """Load a local embedding model before the app reports ready: the first request
    would otherwise wait seconds for it. A remote model (OpenAI) has nothing to load."""
    load = getattr(getattr(store, "embeddings", None), "load", None)
    if callable(load):
        started = time.perf_counter()
        await asyncio.to_thread(load)
        logger.info("embedding model loaded in %.1f s", time.perf_counter() - started)


async def _setup(store: BaseStore) -> None:
    # A given store may be the sync one: its setup is blocking, kept off the loop.
    setup = store.setup  # type: ignore[attr-defined]
    if inspect.iscoroutinefunction(setup):
        await setup()
    else:
        await asyncio.to_thread(setup)


def _compile(graph: Any, store: BaseStore) -> CompiledStateGraph:
    return graph.compile(store=store) if isinstance(graph, StateGraph) else graph


@contextlib.contextmanager
def frozen_heap(enabled: bool = True) -> Iterator[None]:
    """Leave the objects made so far out of the garbage collector's full passes.

    A served process holds some hundred thousand objects made at start-up (modules,
    classes, schemas, the compiled graph) that live as long as it does. Under load,
    turns in flight keep their objects alive long enough to reach the collector's
    oldest generation, so full passes come often, and each one walked all of the
    start-up objects: a pause of tens of milliseconds, several times a second at 50
    concurrent users. ``gc.freeze`` moves them to the permanent generation, which
    passes skip (as servers that preload their app do). The exit undoes it, unless
    something else had frozen objects first.
    """
    if not enabled:
        yield
        return
    first = gc.get_freeze_count() == 0
    gc.freeze()
    try:
        yield
    finally:
        if first:
            gc.unfreeze()


@asynccontextmanager
async def memory_lifespan(
    *,
    store: BaseStore | None = None,
    database_url: str | None = None,
    data_dir: str | Path | None = None,
    settings: MemorySettings | None = None,
    graph_factory: GraphFactory | None = None,
    agent: bool = True,
    store_options: Mapping[str, Any] | None = None,
    layer_options: Mapping[str, Any] | None = None,
    poll_seconds: float = 5.0,
    freeze_gc: bool = True,
) -> AsyncIterator[MemoryService]:
    """Open the store, set it up, start extraction; on exit drain it and close the store.

    Args:
        store: An open store to use (left open on exit; the async one serves best, a
            sync one runs its calls in threads). Default: an async store opened on
            ``database_url`` (see ``langmem_layer.environment.database_url``: the
            argument, ``LANGMEM_DATABASE_URL``, else the embedded server in ``data_dir``).
        database_url: A PostgreSQL URL, when ``store`` is not given.
        data_dir: The embedded server's directory, when no URL is configured.
        settings: Default ``langmem_layer.environment.settings_from_env``.
        graph_factory: Builds the agent for the layer; default
            ``langmem_layer.facade.agent_graph.build_agent_graph``.
        agent: Build the agent (False: no graph; the service's ``graph`` is None).
        store_options: Passed to ``AsyncPostgresMemoryStore.from_conn_string``
            (``index``, ``pool_size``...).
        layer_options: Passed to ``MemoryLayer`` (``extractor``...).
        poll_seconds: Pause between the worker's passes.
        freeze_gc: Once everything is open, leave the objects made so far out of the
            garbage collector's full passes until the exit (see ``frozen_heap``).

    Yields:
        The ``MemoryService``: store, layer, compiled agent and worker.
    """
    from langmem_layer.environment import settings_from_env
    from langmem_layer.facade.agent_graph import build_agent_graph

    async with contextlib.AsyncExitStack() as stack:
        url = None
        if store is None:
            store, url = await _open_store(stack, database_url, data_dir, store_options or {})
        await _setup(store)
        await _warm(store)
        layer = MemoryLayer(store, settings=settings or settings_from_env(),
                            **dict(layer_options or {}))
        graph = _compile((graph_factory or build_agent_graph)(layer), store) if agent else None
        worker = ExtractionLoop(layer.admin.aprocess_pending, poll_seconds=poll_seconds)
        worker.start()
        stack.enter_context(frozen_heap(freeze_gc))
        try:
            yield MemoryService(store=store, layer=layer, graph=graph, worker=worker,
                                database_url=url)
        finally:
            # Requests have finished (uvicorn runs the lifespan's exit after them):
            # let the loop finish its pass, then extract everything still queued.
            await worker.stop()
            await layer.aclose()


@contextlib.asynccontextmanager
async def served_agent(app: FastAPI, graph: Any, principal_dependency: Callable[..., Any],
                       *, path: str = "/agent") -> AsyncIterator[None]:
    """Serve ``graph`` with LangServe at ``path`` while the block runs.

    The routes are added when the block starts (the graph needs the open store) and
    removed when it ends, so an app started again serves its new graph, not a closed
    one. Without ``graph`` (the agent left out) or without LangServe installed (the
    ``server`` extra), no agent route is added.

    Args:
        app: The FastAPI app.
        graph: The compiled agent graph, or None.
        principal_dependency: The app's authentication dependency (see
            ``add_agent_routes``).
        path: Where the agent routes go.
    """
    if graph is None:
        yield
        return
    try:
        from langmem_layer.server.http.agent_route import add_agent_routes
    except ImportError as e:  # langserve absent, e.g. beside langgraph-api (sse-starlette)
        logger.warning("agent routes not served (pip install 'langmem-layer[server]'): %s", e)
        yield
        return
    before = list(app.router.routes)
    add_agent_routes(app, graph, principal_dependency=principal_dependency, path=path)
    added = [r for r in app.router.routes if r not in before]
    app.openapi_schema = None
    try:
        yield
    finally:
        app.router.routes[:] = [r for r in app.router.routes if r not in added]
        app.openapi_schema = None


def agent_lifespan(principal_dependency: Callable[..., Any], *, path: str = "/agent",
                   **options: Any
                   ) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """A FastAPI ``lifespan`` serving the memory agent at ``path`` for its lifetime.

    On startup it enters ``memory_lifespan`` (``options`` are its arguments), keeps
    the ``MemoryService`` as ``app.state.memory`` and adds the agent routes
    (``served_agent``); on shutdown it drains extraction and closes the store. For
    the whole app (REST API, API keys, the agent) use
    ``langmem_layer.server.http.app.create_app``, which runs on the same lifespan.

    Args:
        principal_dependency: The app's authentication dependency (see
            ``add_agent_routes``).
        path: Where the agent routes go.
        **options: Keyword arguments of ``memory_lifespan``.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with memory_lifespan(**options) as service:
            app.state.memory = service
            async with served_agent(app, service.graph, principal_dependency, path=path):
                yield

    return lifespan
