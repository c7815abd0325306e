"""Soak: 50 concurrent users through the HTTP app for 10 minutes, with jobs running.

The app (``create_app`` as in ``served_app.py``: the agent through LangServe, the REST
API, API keys, background extraction; offline model, rule extractor, no embedding
model) runs in a uvicorn subprocess on 127.0.0.1 through
``langmem_layer.server.http.serve``. N users (default 50), each with its own API key, hold
a conversation through ``POST /agent/invoke`` and read ``GET /v1/memories`` every few
turns, for D seconds (default 600). Meanwhile another process runs a maintenance job
again and again (``langmem-layer jobs run lifecycle --force``). Prints errors (target
0), p95 per route per minute, the server's RSS and the database's open connections
each minute (start and end included), then stops the server with SIGTERM.

    .venv/bin/python benchmarks/soak_bench.py [--users 50] [--duration 600]
        [--job lifecycle] [--pool-size 8] [--database-url URL]

Not a test: loopback only, bounded by ``--duration``; the database is a fresh embedded
PostgreSQL unless ``--database-url`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg
from common import add_noise_option, header, percentile
from served_app import HOST, ROOT, SCRIPT, free_port, make_keys, wait_ready

ROUTES = ("agent/invoke", "GET /v1/memories")


class Samples:
    """Latencies and errors per route, bucketed by minute since the start."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.ok: dict[tuple[int, str], list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.first: dict[str, str] = {}

    def minute(self) -> int:
        return int((time.monotonic() - self.t0) // 60)

    async def timed(self, route: str, call: Any) -> None:
        start = time.perf_counter()
        minute = self.minute()
        try:
            await call
        except Exception as e:  # counted; the first of each route shown
            self.errors[route] += 1
            self.first.setdefault(route, f"{type(e).__name__}: {e}"[:300])
        else:
            self.ok[(minute, route)].append((time.perf_counter() - start) * 1000)



def _connections(uri: str) -> int:
    """Connections open on the database, this probe's own excluded."""
    with psycopg.connect(uri, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND pid <> pg_backend_pid()").fetchone()
    return int(row[0]) if row else 0


def _rss_mb(proc: psutil.Process) -> float:
    return proc.memory_info().rss / 2**20


class JobLoop(threading.Thread):
    """Runs ``langmem-layer jobs run JOB --force`` over and over in a subprocess."""

    def __init__(self, uri: str, job: str) -> None:
        super().__init__(daemon=True)
        self.uri, self.job = uri, job
        self.stop = threading.Event()
        self.runs = self.failures = 0
        self.last_error = ""

    def run(self) -> None:
        while not self.stop.is_set():
            done = subprocess.run(
                [sys.executable, "-m", "langmem_layer.cli", "--database-url", self.uri,
                 "jobs", "run", self.job, "--force"], cwd=ROOT, capture_output=True,
                text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            self.runs += 1
            if done.returncode != 0:
                self.failures += 1
                self.last_error = done.stderr.strip().splitlines()[-1:][0][:300] \
                    if done.stderr.strip() else f"exit {done.returncode}"
            self.stop.wait(1.0)


async def _users(base: str, args: argparse.Namespace, keys: dict[str, str],
                 samples: Samples, on_minute: Any) -> None:
    deadline = time.monotonic() + args.duration
    limits = httpx.Limits(max_connections=args.users * 2, max_keepalive_connections=args.users)
    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:
        async def user_loop(user: str, key: str) -> None:
            headers = {"Authorization": f"Bearer {key}"}

            async def turn(text: str, thread: str) -> None:
                r = await client.post("/agent/invoke", headers=headers, json={
                    "input": {"messages": [{"type": "human", "content": text}]},
                    "config": {"configurable": {"thread_id": thread}}})
                r.raise_for_status()

            async def read() -> None:
                r = await client.get("/v1/memories", headers=headers)
                r.raise_for_status()

            i = 0
            while time.monotonic() < deadline:
                text = SCRIPT[i % len(SCRIPT)]

                await samples.timed(ROUTES[0], turn(text, f"t{i // 20}"))
                i += 1
                if i % args.read_every == 0:
                    await samples.timed(ROUTES[1], read())

        async def ticker() -> None:
            minute = 0
            while time.monotonic() < deadline:
                await asyncio.sleep(1)
                if samples.minute() > minute:
                    minute = samples.minute()
                    await asyncio.to_thread(on_minute, minute)

        await asyncio.gather(ticker(), *(user_loop(u, k) for u, k in keys.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds")
    parser.add_argument("--read-every", type=int, default=3,
                        help="turns between reads of /v1/memories")
    parser.add_argument("--pool-size", type=int, default=8)
    parser.add_argument("--job", default="lifecycle", help="the job run in a loop")
    parser.add_argument("--database-url", default=None)
    add_noise_option(parser)
    args = parser.parse_args(argv)
    header("soak_bench", allow_noisy=args.allow_noisy)

    data_dir = None
    if args.database_url:
        uri = args.database_url
    else:
        from langmem_layer.store.embedded import embedded_uri

        data_dir = Path(tempfile.mkdtemp(prefix="langmem-soak-"))
        uri = embedded_uri(data_dir)
    run_id = uuid.uuid4().hex[:6]
    port = free_port()
    base = f"http://{HOST}:{port}"
    print(f"soak_bench  users {args.users}  "
          f"{args.duration:.0f} s  pool {args.pool_size}  job loop: {args.job}")
    env = {**os.environ, "LANGMEM_DATABASE_URL": uri, "BENCH_POOL_SIZE": str(args.pool_size),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "benchmarks")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "langmem_layer.server.http.serve", "served_app:app", "--host", HOST,
         "--port", str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    jobs = JobLoop(uri, args.job)
    try:
        started = wait_ready(base, proc)
        server = psutil.Process(proc.pid)
        keys = make_keys(uri, [f"{run_id}-{u}" for u in range(args.users)])
        print(f"  server ready in {started:.1f} s")
        samples = Samples()
        gauges: list[tuple[int, float, int]] = [(0, _rss_mb(server), _connections(uri))]
        print(f"  start: server RSS {gauges[0][1]:.0f} MB, database connections "
              f"{gauges[0][2]}")
        jobs.start()

        def on_minute(minute: int) -> None:
            gauges.append((minute, _rss_mb(server), _connections(uri)))
            ms = {r: samples.ok.get((minute - 1, r), []) for r in ROUTES}
            print(f"  minute {minute:>2}: " + "  ".join(
                f"{r} n={len(v)} p95 {percentile(v, 95):.0f} ms" for r, v in ms.items())
                + f"  RSS {gauges[-1][1]:.0f} MB  connections {gauges[-1][2]}", flush=True)

        asyncio.run(_users(base, args, keys, samples, on_minute))
        end = (samples.minute(), _rss_mb(server), _connections(uri))
        jobs.stop.set()
        jobs.join(300)
    finally:
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=300)
        stop = time.perf_counter() - t0
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
    total = {r: sum(len(v) for (_, rr), v in samples.ok.items() if rr == r) for r in ROUTES}
    print("  requests: " + ", ".join(f"{r} {total[r]}" for r in ROUTES)
          + f"  ({sum(total.values()) / args.duration:.1f} req/s)")
    print(f"  errors: {sum(samples.errors.values())} "
          f"({', '.join(f'{r}: {n}' for r, n in samples.errors.items()) or 'none'})")
    for route, first in samples.first.items():
        print(f"    first error on {route}: {first}")
    print("  p95 per minute (ms): ")
    for route in ROUTES:
        minutes = sorted(m for (m, r) in samples.ok if r == route)
        print(f"    {route:<18} " + " ".join(
            f"{percentile(samples.ok[(m, route)], 95):.0f}" for m in minutes))
    print(f"  server RSS: start {gauges[0][1]:.0f} MB, end {end[1]:.0f} MB  "
          f"(max {max(g[1] for g in [*gauges, end]):.0f} MB)")
    print(f"  database connections: start {gauges[0][2]}, end {end[2]}  "
          f"(max {max(g[2] for g in [*gauges, end])})")
    print(f"  job loop ({args.job}): {jobs.runs} runs, {jobs.failures} failed"
          + (f"; last error: {jobs.last_error}" if jobs.failures else ""))
    print(f"  server stopped on SIGTERM in {stop:.1f} s, exit {proc.returncode}, "
          f"traceback in its log: {'Traceback' in err}")
    ok = not samples.errors and not jobs.failures and proc.returncode == 0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
