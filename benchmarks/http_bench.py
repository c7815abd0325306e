"""Concurrent users of the HTTP app: the agent through LangServe and the REST API, on loopback.

N simulated users (default 50) hold a conversation each for D seconds (default 60)
against the app (``langmem_layer.server.http.app.create_app``) in a uvicorn subprocess on
127.0.0.1: every turn is a ``POST /agent/invoke`` (the offline chat model, the rule
extractor, background extraction as served), and every few turns the user reads its
memories with ``GET /v1/memories``. Each user authenticates with its own API key
(``Authorization: Bearer``), made before the run as ``keys create`` does. Then the
same conversations are driven in-process (``graph.ainvoke`` on the same lifespan,
same store options) for the same time, with the same reads through the call the route
makes (``layer.admin.abrowse``), so the HTTP overhead is a ratio of like work. Prints
requests/s, p50/p95/p99 per route and errors, and the serving process's CPU per
request in each phase (the server's from ``/proc``; in-process, this process's): the
load client shares the machine's cores with the server, so the turns/s ratio counts
the client's CPU too, and the CPU ratio does not. For the same reason each route's
time inside the server (``served_app.ServerTimes``) is printed beside the
client's latencies: the difference is the client's and the sockets' share.

Bounded: ``--duration`` seconds per phase, at most ``--max-requests`` requests per
phase, loopback only. The database is a fresh embedded PostgreSQL (or
``--database-url``); no embedding model (keyword recall).

    .venv/bin/python benchmarks/http_bench.py [--users 50] [--duration 60]
        [--app module:attribute] [--header 'x-bench-user={user}'] [--pool-size 8]

``--app`` serves another app (an ASGI app or a factory taking no argument; it must
read ``LANGMEM_DATABASE_URL``); ``--header`` is the header each user authenticates
with, ``{user}`` replaced by its id and ``{key}`` by its API key. The default app is
this file's ``app``: ``create_app`` as ``langmem-layer serve`` builds it, with the
offline model, the rule extractor and no embedding model.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from common import add_noise_option, header, summary
from served_app import (
    HOST,
    MEMORY_ROUTE,
    ROOT,
    SCRIPT,
    SERVER_TIMES_ROUTE,
    database,
    free_port,
    layer_options,
    make_keys,
    offline_agent,
    store_options,
    wait_ready,
)

# -- measuring ---------------------------------------------------------------------------

@dataclass
class Phase:
    name: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    elapsed: float = 0.0
    requests: int = 0
    cpu: float | None = None  # seconds of the serving process's CPU during the phase
    # Seconds each request spent inside the server, by route (None: the app does not say)
    server: dict[str, list[float]] | None = None

    def report(self) -> list[str]:
        lines = [f"  {self.name}: {self.requests} requests in {self.elapsed:.1f} s = "
                 f"{self.requests / self.elapsed:.1f} req/s, errors "
                 f"{sum(self.errors.values())}"]
        for route in sorted(set(self.latencies) | set(self.errors)):
            ms = sorted(x * 1000 for x in self.latencies[route])
            if ms:
                q = summary(ms)
                lines.append(f"    {route:<22} n={len(ms):<6} p50 {q['p50']:7.1f} ms  "
                             f"p95 {q['p95']:7.1f} ms  p99 {q['p99']:7.1f} ms  "
                             f"errors {self.errors[route]}")
            else:
                lines.append(f"    {route:<22} n=0  errors {self.errors[route]}")
        for route, seconds in sorted((self.server or {}).items()):
            if route in self.latencies:
                q = summary(sorted(x * 1000 for x in seconds))
                lines.append(f"    {route:<22} inside the server: p50 {q['p50']:7.1f} ms  "
                             f"p95 {q['p95']:7.1f} ms  p99 {q['p99']:7.1f} ms")
        return lines


async def _drive(phase: Phase, users: int, duration: float, max_requests: int,
                 turn: Any, read: Any | None, read_every: int) -> None:
    deadline = time.monotonic() + duration
    budget = [max_requests]

    async def user_loop(u: int) -> None:
        i = 0
        while time.monotonic() < deadline and budget[0] > 0:
            budget[0] -= 1
            text = SCRIPT[i % len(SCRIPT)]
            await _timed(phase, "agent/invoke", turn(u, text))
            i += 1
            if read is not None and i % read_every == 0 and budget[0] > 0:
                budget[0] -= 1
                await _timed(phase, f"GET {MEMORY_ROUTE}", read(u))

    t0 = time.perf_counter()
    await asyncio.gather(*(user_loop(u) for u in range(users)))
    phase.elapsed = time.perf_counter() - t0


async def _timed(phase: Phase, route: str, call: Any) -> None:
    t0 = time.perf_counter()
    try:
        await call
    except Exception as e:  # counted, and the first of each kind shown
        if not phase.errors[route]:
            print(f"    first error on {route}: {type(e).__name__}: {e}"[:300])
        phase.errors[route] += 1
    else:
        phase.latencies[route].append(time.perf_counter() - t0)
    phase.requests += 1


def _cpu_seconds(pid: int) -> float | None:
    """User and system CPU of process ``pid`` (all its threads), from ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _http_phase(base: str, args: argparse.Namespace, run_id: str,
                      keys: dict[str, str], server_pid: int) -> Phase:
    phase = Phase("HTTP (uvicorn subprocess, loopback)")
    name, _, template = args.header.partition("=")
    limits = httpx.Limits(max_connections=args.users * 2, max_keepalive_connections=args.users)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        paths = (await client.get("/openapi.json")).json().get("paths", {})
        has_memories = MEMORY_ROUTE in paths

        def headers(u: int) -> dict[str, str]:
            user = f"{run_id}-http-{u}"
            return {name: template.format(user=user, key=keys.get(user, ""))}

        async def turn(u: int, text: str) -> None:
            r = await client.post("/agent/invoke", headers=headers(u), json={
                "input": {"messages": [{"type": "human", "content": text}]},
                "config": {"configurable": {"thread_id": f"t{u}"}}})
            r.raise_for_status()

        async def read(u: int) -> None:
            r = await client.get(MEMORY_ROUTE, headers=headers(u))
            r.raise_for_status()

        print(f"  {MEMORY_ROUTE} {'served: read every' if has_memories else 'not served:'}"
              f"{f' {args.read_every} turns' if has_memories else ' agent route only'}")
        # The bench's app times each request inside the server; asking starts its record.
        timed = (await client.get(SERVER_TIMES_ROUTE)).status_code == 200
        before = _cpu_seconds(server_pid)
        await _drive(phase, args.users, args.duration, args.max_requests, turn,
                     read if has_memories else None, args.read_every)
        after = _cpu_seconds(server_pid)
        if before is not None and after is not None:
            phase.cpu = after - before
        if timed:
            phase.server = (await client.get(SERVER_TIMES_ROUTE)).json()
    return phase


async def _inprocess_phase(uri: str, args: argparse.Namespace, run_id: str,
                           reads: bool) -> Phase:
    from langchain_core.messages import HumanMessage

    from langmem_layer.server.http.lifespan import memory_lifespan

    phase = Phase("in-process (graph.ainvoke, same lifespan)")
    os.environ["BENCH_POOL_SIZE"] = str(args.pool_size)
    async with memory_lifespan(database_url=uri, store_options=store_options(),
                               layer_options=layer_options(),
                               graph_factory=offline_agent) as service:
        async def turn(u: int, text: str) -> None:
            await service.graph.ainvoke({"messages": [HumanMessage(text)]}, {
                "configurable": {"user_id": f"{run_id}-proc-{u}", "thread_id": f"t{u}"}})

        async def read(u: int) -> None:
            # What GET /v1/memories runs for its caller (the route's default page).
            await service.layer.admin.abrowse(f"{run_id}-proc-{u}", limit=51)

        before = time.process_time()
        await _drive(phase, args.users, args.duration, args.max_requests, turn,
                     read if reads else None, args.read_every)
        phase.cpu = time.process_time() - before
    return phase


def _start_server(uri: str, args: argparse.Namespace, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "LANGMEM_DATABASE_URL": uri, "BENCH_POOL_SIZE": str(args.pool_size),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks"),
                                          os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-m", "langmem_layer.server.http.serve", args.app, "--host", HOST,
         "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per phase")
    parser.add_argument("--max-requests", type=int, default=200_000, help="per phase")
    parser.add_argument("--read-every", type=int, default=3,
                        help=f"turns between reads of {MEMORY_ROUTE}, when served")
    parser.add_argument("--pool-size", type=int, default=8)
    parser.add_argument("--app", default="served_app:app")
    parser.add_argument("--header", default="authorization=Bearer {key}")
    parser.add_argument("--database-url", default=None)
    add_noise_option(parser)
    args = parser.parse_args(argv)
    header("http_bench", allow_noisy=args.allow_noisy)

    run_id = uuid.uuid4().hex[:6]
    port = free_port()
    base = f"http://{HOST}:{port}"
    print(f"http_bench  users {args.users}  "
          f"{args.duration:.0f} s per phase  pool {args.pool_size}  app {args.app}")
    with database(args.database_url, "langmem-http-bench-") as uri:
        proc = _start_server(uri, args, port)
        try:
            started = wait_ready(base, proc)
            print(f"  server ready in {started:.1f} s")
            keys = make_keys(uri, [f"{run_id}-http-{u}" for u in range(args.users)])
            http = asyncio.run(_http_phase(base, args, run_id, keys, proc.pid))
        finally:
            t0 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=300)
            stop = time.perf_counter() - t0
        print(f"  server stopped on SIGTERM in {stop:.1f} s (queue drained), exit "
              f"{proc.returncode}, traceback in its log: {'Traceback' in err}")
        local = asyncio.run(_inprocess_phase(uri, args, run_id,
                                             reads=f"GET {MEMORY_ROUTE}" in http.latencies))
    for line in (*http.report(), *local.report()):
        print(line)
    turn = "agent/invoke"
    h, p = http.latencies[turn], local.latencies[turn]
    if h and p:
        rate_h = len(h) / http.elapsed
        rate_p = len(p) / local.elapsed
        print(f"  HTTP overhead on {turn}: turns/s in-process / HTTP = "
              f"{rate_p / rate_h:.2f}x, p50 HTTP / in-process = "
              f"{statistics.median(h) / statistics.median(p):.2f}x")
    if http.cpu and local.cpu and http.requests and local.requests:
        per_h, per_p = 1000 * http.cpu / http.requests, 1000 * local.cpu / local.requests
        print(f"  serving CPU per request (the load client's not counted): HTTP server "
              f"{per_h:.2f} ms, in-process {per_p:.2f} ms = {per_h / per_p:.2f}x")
    return 0 if not sum(http.errors.values()) and not sum(local.errors.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
