"""The app the HTTP benchmarks serve, and what starting it takes: ``create_app`` with the
offline parts (no embedding model, the rule extractor, the offline chat model), API
keys for the users, a free loopback port, and the wait until it answers.

A server process imports it as ``served_app:app`` (``benchmarks/`` on its path). The app
is wrapped in ``ServerTimes``, which times each request inside the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx

__all__ = ["HOST", "MEMORY_ROUTE", "ROOT", "SCRIPT", "SERVER_TIMES_ROUTE", "ServerTimes",
           "database", "drive", "free_port", "layer_options", "make_app", "make_keys",
           "offline_agent", "served_graph", "store_options", "wait_ready"]

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"  # loopback only
MEMORY_ROUTE = "/v1/memories"
SERVER_TIMES_ROUTE = "/bench/server-times"

SCRIPT = (
    "I live in Lisbon", "I am allergic to peanuts", "Where do I live?", "I work at Acme",
    "My sister is called Ana", "What do you know about me?", "I prefer green tea",
    "Remind me to call the dentist tomorrow", "Am I allergic to anything?", "I love jazz",
)

# -- the default app: create_app with offline parts ----------------------------------

def store_options() -> dict[str, Any]:
    return {"index": None, "pool_size": int(os.environ.get("BENCH_POOL_SIZE", "8"))}


def offline_agent(layer: Any) -> Any:
    from langmem_layer.facade.agent_graph import build_agent_graph
    from langmem_layer.offline_chat import OfflineChatModel

    return build_agent_graph(layer, model=OfflineChatModel())


def layer_options() -> dict[str, Any]:
    from langmem_layer.extract.rules import RuleExtractor

    return {"extractor": RuleExtractor()}


@asynccontextmanager
async def served_graph(uri: str, *, index: Any = None, pool_size: int = 8
                       ) -> AsyncIterator[Any]:
    """The lifespan the app serves (``memory_lifespan``) with the offline parts: yields
    the service; its ``graph`` is the agent a served turn invokes."""
    from langmem_layer.server.http.lifespan import memory_lifespan

    async with memory_lifespan(database_url=uri,
                               store_options={"index": index, "pool_size": pool_size},
                               layer_options=layer_options(),
                               graph_factory=offline_agent) as service:
        assert service.graph is not None  # built: agent=True
        yield service


async def drive(users: int, duration: float, max_turns: int,
                turn: Callable[[int, str], Awaitable[Any]]) -> tuple[list[float], float, int]:
    """``users`` concurrent users, each sending the next line of ``SCRIPT`` as soon as
    its previous turn is answered, for ``duration`` seconds or ``max_turns`` turns in
    all: (each answered turn's seconds, the seconds elapsed, errors). The first error
    is printed."""
    deadline = time.monotonic() + duration
    budget = [max_turns]
    latencies: list[float] = []
    errors = [0]

    async def user_loop(u: int) -> None:
        i = 0
        while time.monotonic() < deadline and budget[0] > 0:
            budget[0] -= 1
            t0 = time.perf_counter()
            try:
                await turn(u, SCRIPT[i % len(SCRIPT)])
            except Exception as e:
                if not errors[0]:
                    print(f"    first error: {type(e).__name__}: {e}"[:300])
                errors[0] += 1
            else:
                latencies.append(time.perf_counter() - t0)
            i += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(user_loop(u) for u in range(users)))
    return latencies, time.perf_counter() - t0, errors[0]


def make_app() -> Any:
    """The bench's app on ``LANGMEM_DATABASE_URL``: the real app, offline parts, timed."""
    from langmem_layer.server.http.app import create_app

    options = store_options()
    return ServerTimes(create_app(database_url=os.environ["LANGMEM_DATABASE_URL"],
                                  pool_size=options.pop("pool_size"), store_options=options,
                                  layer_options=layer_options(),
                                  graph_factory=offline_agent))


class ServerTimes:
    """ASGI middleware: each request's seconds inside the server, by route.

    From the app's call to its return (the response's last byte handed to the server),
    so neither the load client's time nor the sockets' queues are in it: the client
    shares the machine's cores with the server. ``GET SERVER_TIMES_ROUTE`` returns the
    times recorded since the last such request, as JSON, and starts a new record.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seconds: defaultdict[str, list[float]] = defaultdict(list)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == SERVER_TIMES_ROUTE:
            body, self.seconds = json.dumps(self.seconds).encode(), defaultdict(list)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            path = scope["path"]
            route = "agent/invoke" if path == "/agent/invoke" else f"{scope['method']} {path}"
            self.seconds[route].append(time.perf_counter() - t0)


def make_keys(uri: str, users: Sequence[str]) -> dict[str, str]:
    """An API key for each user (as ``langmem-layer keys create`` makes them)."""
    from langmem_layer.server.keys import create_key
    from langmem_layer.store.sync import PostgresMemoryStore

    with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
        return {user: create_key(store, user) for user in users}


def __getattr__(name: str) -> Any:
    if name == "app":  # ``served_app:app`` for the server process
        return make_app()
    raise AttributeError(name)


@contextmanager
def database(url: str | None, prefix: str) -> Iterator[str]:
    """The bench's database: ``url``, else an embedded PostgreSQL in a temporary
    directory named from ``prefix``, removed on exit."""
    if url:
        yield url
        return
    from langmem_layer.store.embedded import embedded_uri

    data_dir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield embedded_uri(data_dir)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_ready(base: str, proc: subprocess.Popen[str], limit: float = 180.0) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited at startup:\n{proc.communicate()[1]}")
        try:
            if httpx.get(f"{base}/openapi.json", timeout=5).status_code == 200:
                return time.monotonic() - t0
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the server did not start in time:\n{proc.communicate()[1]}")
