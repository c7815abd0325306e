"""Concurrent writers of one user: are all writes counted, and at what rate?

32 threads × 50 ``MemoryLayer.ingest`` of the same fact (one pooled store, 8
connections): reinforcements accepted against the memory's final
``reinforcement_count``; then 8 threads × 100 ``remember(thread_id=...)`` on one thread:
how many memories are linked from more than one (a forked chain). No embedding model
(keyword recall finds the repeated fact).

    .venv/bin/python benchmarks/write_concurrency_bench.py [--threads 32] [--rounds 50]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
from common import add_noise_option, header
from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.store.embedded import embedded_uri


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--remembers", type=int, default=100)
    add_noise_option(parser)
    args = parser.parse_args(argv)
    header("write_concurrency_bench", allow_noisy=args.allow_noisy)
    data_dir = Path(tempfile.mkdtemp(prefix="langmem-write-concurrency-"))
    try:
        uri = embedded_uri(data_dir)
        with PostgresMemoryStore.from_conn_string(uri, pool_size=8, index=None) as store:
            store.setup()
            layer = MemoryLayer(store, extraction="inline")
            (seed,) = layer.ingest("u1", [HumanMessage("I prefer green tea.", id="s")]).written

            def reinforce(t: int) -> int:
                return sum(len(layer.ingest("u1", [HumanMessage(
                    "I prefer green tea.", id=f"m{t}-{i}")]).accepted)
                    for i in range(args.rounds))

            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.threads) as pool:
                accepted = sum(pool.map(reinforce, range(args.threads)))
            elapsed = time.perf_counter() - t0
            count = layer.get("u1", seed).record.reinforcement_count

            def remember(t: int) -> None:
                for i in range(args.remembers):
                    layer.remember("u2", f"Step {t}-{i} of the plan.", thread_id="t")

            t1 = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(remember, range(8)))
            chain_elapsed = time.perf_counter() - t1
            with psycopg.connect(uri) as conn:
                links = conn.execute(
                    "SELECT dst_key FROM langmem_links WHERE user_id = 'u2'"
                    " AND link_type = 'elaborates'").fetchall()
            forks = sum(1 for n in Counter(d for (d,) in links).values() if n > 1)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    print("write_concurrency_bench  machine: 2 cores  pool 8")
    print(f"  reinforce: {args.threads} threads x {args.rounds}: {accepted} accepted, "
          f"reinforcement_count {count}, {accepted / elapsed:.1f} ingests/s")
    print(f"  remember on one thread: 8 threads x {args.remembers}: {len(links)} links, "
          f"{forks} memories linked from more than one, "
          f"{8 * args.remembers / chain_elapsed:.1f} remembers/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
