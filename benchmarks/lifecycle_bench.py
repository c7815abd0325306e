"""The lifecycle job on one user's memories: time of a nightly run, and of a re-run.

Writes ``--memories`` memories of mixed kinds and ages (0-200 days since last access,
some ephemeral, open loops with and without due dates, habits with outcomes) for one
user among ``--users`` users of the same size, then times ``lifecycle`` for that user:
the first run (every decay score written, transitions applied), a re-run at the same
``now`` (nothing changes), and a run a day later. Prints medians of ``--repeat`` runs
(each on a fresh copy of the data) and the plan of recall's "due" strategy.

    .venv/bin/python benchmarks/lifecycle_bench.py [--memories 10000] [--users 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import psycopg
from common import add_noise_option, fresh_database, header, scratch_dir
from langgraph.store.base import PutOp

from langmem_layer import MemorySettings, PostgresMemoryStore
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.sql import candidates as rsql
from langmem_layer.types import Kind, Layer, LoopStatus, MemoryRecord

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
KINDS = [(Kind.PROFILE_FACT, Layer.SEMANTIC), (Kind.PREFERENCE, Layer.PROCEDURAL),
         (Kind.EPISODIC_EVENT, Layer.EPISODIC), (Kind.OPEN_LOOP, Layer.EPISODIC),
         (Kind.REFLECTION, Layer.SEMANTIC), (Kind.PROFILE_FACT, Layer.IDENTITY)]


def records(n: int, rng: random.Random) -> list[tuple[str, MemoryRecord]]:
    out = []
    for i in range(n):
        kind, layer = KINDS[i % len(KINDS)]
        seen = NOW - timedelta(days=rng.uniform(0, 200))
        extra: dict[str, object] = {}
        if kind == Kind.OPEN_LOOP:
            extra["loop_status"] = LoopStatus.OPEN
            if rng.random() < 0.5:
                extra["due_at"] = NOW + timedelta(days=rng.uniform(-20, 20))
        if layer == Layer.PROCEDURAL:
            extra.update(success_count=rng.randint(0, 5), failure_count=rng.randint(0, 5))
        rec = MemoryRecord(content=f"Memory {i} about topic {i % 97}.", kind=kind, layer=layer,
                           occurred_at=seen, last_accessed_at=seen,
                           access_count=rng.randint(0, 10), pinned=rng.random() < 0.01,
                           metadata={"ephemeral": True} if rng.random() < 0.05 else {},
                           **extra)  # type: ignore[arg-type]
        out.append((f"m{i}", rec))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--users", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", help="embedded server directory (default: a temporary one)")
    add_noise_option(ap)
    args = ap.parse_args(argv)
    header("lifecycle_bench", allow_noisy=args.allow_noisy)
    with scratch_dir(args.data_dir, "langmem-lifecycle-bench-") as data_dir:
        uri = fresh_database(data_dir, "langmem_lifecycle_bench")
        rng = random.Random(7)
        data = records(args.memories, rng)
        timings: dict[str, list[float]] = {"first run": [], "re-run, same now": [],
                                           "next day": []}
        counts: dict[str, int] = {}
        with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
            store.setup()
            ctx = JobContext(store, settings=MemorySettings())
            run = JOBS["lifecycle"].function
            for _ in range(args.repeat):
                with psycopg.connect(uri, autocommit=True) as conn:
                    conn.execute("TRUNCATE langmem_embeddings, langmem_context_vectors, "
                                 "langmem_items, langmem_terms")
                for u in range(args.users):
                    ops = [PutOp(("memories", f"user{u}", "work"), k, r.to_value())
                           for k, r in data]
                    for start in range(0, len(ops), 2000):
                        store.batch(ops[start:start + 2000])
                with psycopg.connect(uri, autocommit=True) as conn:
                    # Written when last seen, as if the store had lived through it.
                    conn.execute("UPDATE langmem_items SET updated_at = "
                                 "(value ->> 'last_accessed_at')::timestamptz")
                    conn.execute("VACUUM ANALYZE langmem_items")
                for label, at in (("first run", NOW), ("re-run, same now", NOW),
                                  ("next day", NOW + timedelta(days=1))):
                    t = time.perf_counter()
                    got = run(ctx, "user0", now=at)
                    timings[label].append(time.perf_counter() - t)
                    if label == "first run":
                        counts = got
            sql, params = rsql.recall_candidates(
                "user0", ["memories.user0.work"], now=NOW,
                due_window=(NOW - timedelta(days=7), NOW + timedelta(hours=72)), due_limit=3)
            with psycopg.connect(uri) as conn:
                plan = [r[0] for r in conn.execute("EXPLAIN " + sql, params).fetchall()]
        print(f"lifecycle of one user with {args.memories} memories "
              f"({args.users} users in the table), median of {args.repeat}:")
        for label, values in timings.items():
            print(f"  {label:<18} {statistics.median(values) * 1000:8.1f} ms")
        print("  first run outcomes:", counts)
        print("recall's due strategy uses:",
              sorted({line.split(" using ")[1].split()[0] for line in plan
                      if " using " in line and "langmem_items" in line}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
