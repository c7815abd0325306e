"""The job runner at scale: listing users, and a per-user job's overhead per user.

Fills a database of its own with N users (M items each, written straight with SQL),
then prints: the time to walk every user a page at a time (the runner's listing),
against the time of a plain ``SELECT DISTINCT user_id``; and the runs of a per-user
job that counts a user's items: users/s recorded (each user its own transaction with
the cursor advance), unrecorded (``Job.run``), and with 4 shards run one after the
other. The machine is shared and noisy: read the figures as orders of magnitude.

    .venv/bin/python benchmarks/jobs_bench.py [--users 20000] [--items 5]
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

import psycopg
from psycopg.conninfo import make_conninfo

from langmem_layer import MemorySettings, PostgresMemoryStore
from langmem_layer.jobs import JOBS, JobContext, register
from langmem_layer.jobs.runner import PAGE, Shard, run
from langmem_layer.sql import jobs as sql
from langmem_layer.store.embedded import embedded_uri

DB = "langmem_jobs_bench"
NOW = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)


def count_items(ctx: JobContext, user_id: str, *, now: datetime,
                dry_run: bool = False) -> dict[str, int]:
    rows = ctx.execute(("SELECT count(*) AS n FROM langmem_items WHERE user_id = %s",
                        [user_id]))
    return {"items": int(rows[0]["n"])}


def fill(uri: str, users: int, items: int) -> None:
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(
            """INSERT INTO langmem_items (user_id, prefix, key, value, created_at, updated_at)
            SELECT 'user-' || lpad(u::text, 7, '0'), 'memories.x.work', 'k' || i,
                   '{}'::jsonb, now(), now()
            FROM generate_series(1, %s) u, generate_series(1, %s) i""", [users, items])
        conn.execute("ANALYZE langmem_items")


def timed(label: str, fn) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    print(f"  {label:<44} {seconds:8.2f} s   {out}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--items", type=int, default=5)
    parser.add_argument("--data-dir", default=".langmem",
                        help="embedded PostgreSQL data dir (a database of its own is made)")
    args = parser.parse_args()

    base = embedded_uri(args.data_dir)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DB}")
    uri = make_conninfo(base, dbname=DB)
    register("bench-count", "count a user's items", schedule="daily",
             per_user=True)(count_items)
    try:
        with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
            store.setup()
            fill(uri, args.users, args.items)
            print(f"jobs_bench: {args.users} users x {args.items} items; page {PAGE}")
            ctx = JobContext(store, settings=MemorySettings())

            def walk() -> int:
                seen, after = 0, None
                while page := ctx.execute(sql.users(after=after, shard=0, shards=1,
                                                    limit=PAGE)):
                    seen += len(page)
                    after = page[-1]["user_id"]
                return seen

            timed("walk every user, a page at a time", walk)
            timed("SELECT DISTINCT user_id (for comparison)", lambda: len(ctx.execute((
                "SELECT DISTINCT user_id FROM langmem_items", None))))
            timed("count the users of a shard (1/4)", lambda: ctx.execute(
                sql.count_users(after=None, shard=1, shards=4))[0]["n"])
            job = JOBS["bench-count"]
            s = timed("per-user job, recorded", lambda: run(ctx, job, now=NOW).users)
            print(f"  {'':<44} {args.users / s:8.0f} users/s")
            s = timed("per-user job, unrecorded (Job.run)",
                      lambda: job.run(ctx, now=NOW).detail)
            print(f"  {'':<44} {args.users / s:8.0f} users/s")
            s = timed("4 shards, one after the other", lambda: sum(
                run(ctx, job, now=NOW, force=True, shard=Shard(i, 4)).users
                for i in range(4)))
            print(f"  {'':<44} {args.users / s:8.0f} users/s")
            timed("the period again (a no-op)", lambda: run(ctx, job, now=NOW).status)
    finally:
        del JOBS["bench-count"]
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
