"""Benchmark: many small concurrent async calls, ours against LangGraph's AsyncPostgresStore.

One run, one embedded PostgreSQL 18 server, each store in a database of its own, each
with a pool of 10 connections, no vectors (``index=None``: the workloads have none):

* ``gather``: the shape of LangGraph's ``test_large_batches_async``: for ``m`` in
  ``range(M)`` and ``i`` in ``range(N)`` (10 x 1000 by default), six calls at once
  through one ``asyncio.gather``: a put, a get of it, a ``list_namespaces`` to depth
  ``m + 1``, a search of the root namespace, the put again, and a delete: 60,000 calls.
* ``read-heavy``: TTL refresh on read on (``default_ttl`` 5 min), ``--items`` items
  over 10 namespaces, then rounds of one put and four reads (two gets, two searches
  of the item's namespace), all through one ``gather``.

Each workload is run ``--repeat`` times per store, stores alternating who goes first;
the best wall time is kept. Errors are calls that raised (``return_exceptions=True``).
A full garbage collection runs before each timed ``gather``, so no run starts with the
garbage the one before it (the other store's, or another workload's) left behind.

Run:  .venv/bin/python benchmarks/store_concurrency_bench.py  [--n 1000] [--m 10]
      [--rounds 6000] [--items 200] [--repeat 2] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import psycopg
from common import add_noise_option, header
from langgraph.store.base import BaseStore
from langgraph.store.postgres.aio import AsyncPostgresStore
from psycopg.conninfo import make_conninfo

from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.embedded import embedded_uri

DEFAULT_DATA_DIR = "/tmp/helper_bench/concurrency_pgdata"
DBS = {"langmem_layer": "concurrency_bench_ours", "LangGraph": "concurrency_bench_langgraph"}
POOL = 10
TTL = {"default_ttl": 5, "refresh_on_read": True}


def gather_calls(store: BaseStore, n: int, m: int) -> list[Awaitable[Any]]:
    """The ``test_large_batches_async`` shape: six small calls per (m, i)."""
    calls: list[Awaitable[Any]] = []
    for j in range(m):
        ns = ("test", "foo", "bar", "baz", str(j % 2))
        for i in range(n):
            value = {"foo": f"bar{i}"}
            calls += [
                store.aput(ns, f"key{i}", value),
                store.aget(ns, f"key{i}"),
                store.alist_namespaces(prefix=None, max_depth=j + 1),
                store.asearch(("test",)),
                store.aput(ns, f"key{i}", value),
                store.adelete(ns, f"key{i}"),
            ]
    return calls


def read_heavy_calls(store: BaseStore, rounds: int, items: int) -> list[Awaitable[Any]]:
    """One put and four TTL-refreshing reads per round, over ``items`` existing items."""
    calls: list[Awaitable[Any]] = []
    for r in range(rounds):
        k = r % items
        ns = ("shelf", str(k % 10))
        calls += [
            store.aput(ns, f"item{k}", {"v": r, "text": f"item {k} round {r}"}),
            store.aget(ns, f"item{k}"),
            store.aget(ns, f"item{(k + 7) % items}"),
            store.asearch(ns, limit=10),
            store.asearch(("shelf",), limit=10, offset=r % 5),
        ]
    return calls


async def seed(store: BaseStore, items: int) -> None:
    await asyncio.gather(*(
        store.aput(("shelf", str(k % 10)), f"item{k}", {"v": -1, "text": f"item {k}"})
        for k in range(items)
    ))


class _Collections:
    """Seconds the garbage collector spent, timed by ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start


COLLECTIONS = _Collections()


async def timed(make: Callable[[], list[Awaitable[Any]]]) -> tuple[float, int, int, float]:
    """(seconds, calls, errors, seconds in garbage collection) of one ``gather`` of the
    calls ``make`` returns."""
    # Each run starts from a collected heap: otherwise what an earlier run left decides
    # whether a full pass (most of a gather's time) falls inside this one or the next.
    gc.collect()
    calls = make()
    gc_before = COLLECTIONS.seconds
    t0 = time.perf_counter()
    results = await asyncio.gather(*calls, return_exceptions=True)
    secs = time.perf_counter() - t0
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        kinds = sorted({type(e).__name__ for e in errors})
        print(f"    ({len(errors)} errors: {', '.join(kinds)}: {str(errors[0])[:120]})")
    return secs, len(results), len(errors), COLLECTIONS.seconds - gc_before


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1000, help="keys per m (upstream: 1000)")
    p.add_argument("--m", type=int, default=10, help="outer rounds (upstream: 10)")
    p.add_argument("--rounds", type=int, default=6000, help="read-heavy rounds (5 calls)")
    p.add_argument("--items", type=int, default=200, help="read-heavy items")
    p.add_argument("--repeat", type=int, default=2, help="runs per store; best is kept")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    add_noise_option(p)
    return p.parse_args(argv)


async def run(args: argparse.Namespace) -> int:
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    data_dir = Path(args.data_dir)
    base_uri = await asyncio.to_thread(embedded_uri, data_dir)
    with psycopg.connect(base_uri, autocommit=True) as admin:
        version = admin.execute("SHOW server_version").fetchone()
        for db in DBS.values():
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {db}")
    uris = {name: make_conninfo(base_uri, dbname=db) for name, db in DBS.items()}
    total = args.n * args.m * 6
    print(f"store_concurrency_bench  PostgreSQL "
          f"{version[0] if version else '?'} (embedded, Unix socket)  pool={POOL}  "
          f"gather={total} calls  read-heavy={args.rounds * 5} calls over {args.items} "
          f"items  repeat={args.repeat} (best kept)")
    sys.stdout.flush()

    workloads: dict[str, dict[str, tuple[float, int, int, float]]] = {
        "gather": {}, "read-heavy": {}}
    async with AsyncExitStack() as stack:
        stores: dict[str, dict[str, BaseStore]] = {}
        for ttl_name, ttl in (("plain", None), ("ttl", TTL)):
            ours = await stack.enter_async_context(AsyncPostgresMemoryStore.from_conn_string(
                uris["langmem_layer"], index=None, ttl=ttl, pool_size=POOL))
            theirs = await stack.enter_async_context(AsyncPostgresStore.from_conn_string(
                uris["LangGraph"], ttl=ttl,  # type: ignore[arg-type]
                pool_config={"min_size": 1, "max_size": POOL}))
            stores[ttl_name] = {"langmem_layer": ours, "LangGraph": theirs}
        for pair in stores.values():
            for store in pair.values():
                await store.setup()  # type: ignore[attr-defined]
        for store in stores["ttl"].values():
            await seed(store, args.items)

        names = list(DBS)
        for rep in range(args.repeat):
            order = names if rep % 2 == 0 else names[::-1]
            for name in order:
                plain, ttl_store = stores["plain"][name], stores["ttl"][name]
                for label, make in (
                    ("gather", lambda s=plain: gather_calls(s, args.n, args.m)),
                    ("read-heavy",
                     lambda s=ttl_store: read_heavy_calls(s, args.rounds, args.items)),
                ):
                    res = await timed(make)
                    best = workloads[label].get(name)
                    errors = res[2] + (best[2] if best else 0)
                    if best is None or res[0] < best[0]:
                        best = res
                    workloads[label][name] = (best[0], best[1], errors, best[3])

    print(f"{'workload':<12}{'store':<16}{'wall s':>9}{'ops/s':>10}{'errors':>8}{'gc s':>8}")
    rc = 0
    for label, res in workloads.items():
        for name, (secs, calls, errors, collecting) in res.items():
            print(f"{label:<12}{name:<16}{secs:>9.2f}{calls / secs:>10.0f}{errors:>8}"
                  f"{collecting:>8.2f}")
            rc |= errors > 0
        ours, theirs = res["langmem_layer"], res["LangGraph"]
        print(f"{label:<12}{'ours/LangGraph':<16}{ours[0] / theirs[0]:>8.2f}x  "
              f"(wall time; target <= 1.0x); outside garbage collection "
              f"{(ours[0] - ours[3]) / (theirs[0] - theirs[3]):.2f}x")
    print("errors: calls that raised, summed over all repeats; wall s: best of the repeats; "
          "gc s: the collector's time within it (gc.callbacks): the calls of a gather are "
          "all alive at once, so its full passes are much of both stores' time; each "
          "gather starts after a full collection")
    return int(rc)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    header("store_concurrency_bench", allow_noisy=args.allow_noisy)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
