"""One owner, for a server's lifetime, of the store, the MemoryLayer and its worker.

A LangGraph server (``langgraph dev``, a deployment) enters the context manager named
by ``langgraph.json``'s ``"store": {"path": ...}`` once at startup and leaves it at
shutdown; graph factories are called per run. So the store, the layer and the
background extraction worker belong here, opened once by ``langgraph_store``, and
the factories in ``graphs/`` only ask for them with ``current``. Opening the store
in a factory instead ties it to one run: the run ends, the store closes, and the
worker's extraction of that run fails on a closed connection.

The memory REST API the server mounts (``"http": {"app": "./graphs/http.py:app"}``) is
built at import, before the store is open, by ``memory_app``: its store is a
``ServedStore``, which reads ``current`` when used, so it shares this store
rather than opening a second one (and a second embedded PostgreSQL) on the same data.

At shutdown the worker's pending extraction is finished (bounded by
``drain_timeout``), the stores are closed and the embedded PostgreSQL this process
started is stopped once the checkpointer is closed too (see ``database``), so
nothing outlives the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langmem_layer import environment as config
from langmem_layer.errors import ConfigurationError
from langmem_layer.facade import MemoryLayer
from langmem_layer.settings import MemorySettings
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.embedded import embedded_uri, stop_embedded
from langmem_layer.store.sync import PostgresMemoryStore

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["Served", "ServedStore", "current", "database", "langgraph_store", "memory_app",
           "serve"]

logger = logging.getLogger("langmem_layer")

#: Seconds the shutdown waits for queued extraction before closing the store.
DEFAULT_DRAIN_TIMEOUT = 30.0


@dataclass(frozen=True)
class Served:
    """What a running server shares across runs.

    Attributes:
        store: The async store the server uses (its store API, Studio, every run).
        layer: The memory layer on ``store``; its worker extracts in the background.
        sync_store: A sync store on the same database, for code that runs in threads
            (the job graph's node).
        database_url: The database both stores use.
    """

    store: AsyncPostgresMemoryStore
    layer: MemoryLayer
    sync_store: PostgresMemoryStore
    database_url: str


_current: Served | None = None


def current() -> Served:
    """The server's store and layer, while ``serve`` runs.

    Raises:
        ConfigurationError: Nothing is served: the server was not given our store.
    """
    if _current is None:
        raise ConfigurationError(
            "No memory store is being served. Declare it in langgraph.json: "
            '"store": {"path": "./graphs/store.py:store"}, or open one with '
            "langmem_layer.server.served.serve() before building the graph.")
    return _current


@asynccontextmanager
async def serve(url: str | None = None, *, data_dir: str | Path | None = None,
                settings: MemorySettings | None = None,
                drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
                **store_kwargs: Any) -> AsyncIterator[Served]:
    """Open the store and the layer for a server's lifetime; see the module docstring.

    Args:
        url: A PostgreSQL URL; default ``LANGMEM_DATABASE_URL``, else the embedded
            server in ``data_dir`` (see ``langmem_layer.environment.data_dir``).
        data_dir: The embedded server's directory when no URL is set.
        settings: Layer settings (default: from the ``LANGMEM_*`` environment).
        drain_timeout: Seconds the shutdown waits for queued extraction.
        **store_kwargs: Passed to both stores (``ttl``, ``index`` ...).

    Raises:
        ConfigurationError: Something is being served already in this process.
        DatabaseUnavailableError: PostgreSQL cannot be reached.
    """
    global _current
    if _current is not None:
        raise ConfigurationError(
            "serve() is already running in this process; use serving.current().")
    async with database(url, data_dir=data_dir) as found, \
            AsyncPostgresMemoryStore.from_conn_string(found, **store_kwargs) as store:
        await store.setup()
        with ExitStack() as stack:
            sync_store = await asyncio.to_thread(
                stack.enter_context,
                PostgresMemoryStore.from_conn_string(found, pool_size=2, **store_kwargs))
            layer = MemoryLayer(store, settings=settings or config.settings_from_env())
            _current = Served(store, layer, sync_store, found)
            try:
                yield _current
            finally:
                _current = None
                await _finish(layer, drain_timeout)
                await asyncio.to_thread(stack.close)


#: Holders of each embedded server in this process (see ``database``).
_holds: dict[Path, int] = {}


@asynccontextmanager
async def database(url: str | None = None, *, data_dir: str | Path | None = None
                   ) -> AsyncIterator[str]:
    """The database URL (as ``langmem_layer.environment.database_url``), held for the block.

    With the embedded server, every block using it counts: when the last one in the
    process ends (the store and the checkpointer of a LangGraph server, which it
    closes in turn), the server is stopped, rather than left to the process's exit
    handler, which a terminated process never runs.
    """
    found = config.configured_url(url)
    if found:
        yield found
        return
    key = config.data_dir(data_dir).expanduser().resolve()
    # Starting the embedded server blocks (a subprocess, files): off the loop.
    uri = await asyncio.to_thread(embedded_uri, key)
    _holds[key] = _holds.get(key, 0) + 1
    try:
        yield uri
    finally:
        _holds[key] -= 1
        if not _holds[key]:
            del _holds[key]
            await asyncio.to_thread(stop_embedded, key)


async def _finish(layer: MemoryLayer, timeout: float) -> None:
    # What is not extracted in time stays queued; the next server extracts it.
    try:
        await asyncio.wait_for(layer.aclose(), timeout)
    except TimeoutError:
        logger.warning("Extraction did not finish in %.0f s at shutdown; the rest stays "
                       "queued for the next start", timeout)
    except Exception:
        logger.exception("Extraction at shutdown failed; what is left stays queued")


def _server_store_config() -> dict[str, Any]:
    # langgraph-api passes nothing to a custom store, and ignores its "index" and
    # "ttl" keys; it does expose langgraph.json's "store" section as LANGGRAPH_STORE.
    raw = os.environ.get("LANGGRAPH_STORE")
    if not raw:
        return {}
    try:
        section = json.loads(raw)
    except ValueError as e:
        raise ConfigurationError(f"LANGGRAPH_STORE is not JSON: {e}") from e
    return section if isinstance(section, dict) else {}


@asynccontextmanager
async def langgraph_store() -> AsyncIterator[AsyncPostgresMemoryStore]:
    """The store for ``langgraph.json`` (``"store": {"path": "...:store"}``).

    Honours the section's ``ttl`` (LangGraph's ``TTLConfig``; with
    ``sweep_interval_minutes`` the store sweeps expired items itself, as the server
    does not sweep a custom store). ``index`` must be left out: the store embeds with
    the model ``langmem_layer.environment`` picks (OpenAI when configured, else local).

    Raises:
        ConfigurationError: The section sets ``index``.
    """
    section = _server_store_config()
    if section.get("index"):
        raise ConfigurationError(
            'Remove "index" from langgraph.json\'s "store" section: the memory store '
            "embeds with the model langmem_layer.environment picks (OPENAI_API_KEY or the "
            "local all-MiniLM-L6-v2).")
    kwargs: dict[str, Any] = {}
    if section.get("ttl"):
        kwargs["ttl"] = dict(section["ttl"])
    async with serve(**kwargs) as served:
        if kwargs.get("ttl", {}).get("sweep_interval_minutes"):
            await served.store.start_ttl_sweeper()
        yield served.store


class ServedStore:
    """The served async store, looked up on each use: for an app built at import.

    A LangGraph server imports ``langgraph.json``'s ``http.app`` before its lifespan
    enters the ``store``; every attribute of this object is the one of
    ``current().store`` at the time it is read, so the app shares the server's store
    (and its embedded PostgreSQL) instead of opening a second one on the same data.

    Raises:
        ConfigurationError: On use, when nothing is served (see ``current``).
    """

    @property
    def database_url(self) -> str:
        """The served database's URL (for reads that need a connection of their own)."""
        return current().database_url

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends probe dunders: not ours
            raise AttributeError(name)
        return getattr(current().store, name)

    def __repr__(self) -> str:
        return f"<ServedStore of {_current.store!r}>" if _current else "<ServedStore: idle>"


def memory_app(**options: Any) -> FastAPI:
    """The memory REST API on the server's store, for ``langgraph.json``'s ``http.app``.

    ``langmem_layer.server.http.app.create_app`` with ``store=ServedStore()``: nothing
    connects when it is built; its lifespan, which the server runs after entering the
    ``store`` (so after ``serve`` started), takes the served store, and leaves it
    open at shutdown for ``serve`` to close. Authentication is the app's own
    (``langmem_layer.server.http.security.current_principal``: the API keys the server's
    ``auth`` handler verifies, against the same table).

    Args:
        **options: Other keyword arguments of ``create_app`` (``authenticate``,
            ``settings``, ``max_body_bytes`` ...); not ``store``, ``database_url``,
            ``data_dir`` or ``pool_size``, which would open a second store.

    Raises:
        ConfigurationError: ``options`` names one of those.
    """
    from langmem_layer.server.http.app import create_app

    opening = sorted({"store", "database_url", "data_dir", "pool_size"} & set(options))
    if opening:
        raise ConfigurationError(
            f"memory_app() serves the server's own store; remove {', '.join(opening)} "
            "(configure the database with LANGMEM_DATABASE_URL / LANGMEM_DATA_DIR).")
    # The graphs are the server's own; the REST routes serve beside them, no LangServe agent.
    options.setdefault("agent", False)
    return create_app(store=ServedStore(), **options)
