"""The nightly lifecycle at scale, and the read path while it runs.

Fills a database of its own with ``--memories`` typed memories (1M) over ``--users``
users (1,000; sizes skewed, from about 2/3 of the mean to 10x it), bulk-loaded with
server-side SQL (``INSERT ... SELECT FROM generate_series``, the value built as jsonb):
10 % ephemeral context, 30 % episodic events (some already stale, since their last
mention + 30 days), the rest profile facts, preferences and habits with outcomes, open
loops with and without due dates, reflections and summaries; last access 0-200 days
before ``now``, written when last seen, 1 % pinned. The users the read path is
measured on get their vectors (the fake hash embedder of ``workload.py``, through
``COPY``); the others have none, which the lifecycle never reads.

Then prints, in one run on the same data:

* the read path, ``load_memory`` + ``assemble_context`` for a sample of users (query
  embedding excluded, as in ``read_path_bench.py``): p50/p95 quiet;
* the nightly ``lifecycle`` job through the runner (``jobs.runner.run``, every user,
  recorded): wall time, memories/s, time per user (p50/p95: the job's function, without
  the commit), outcome counts; meanwhile the read path goes on at the same pace
  (``--read-rate`` turns/s, on a connection of its own), its p50/p95 printed against
  the quiet figure;
* the next night (``now`` + 1 day: every decay score moves again, few transitions),
  after a VACUUM of the first night's dead rows (the day between), the read path
  measured quiet again, then during it, as for the first.

``--explain`` prints EXPLAIN ANALYZE of each lifecycle statement for the largest user
(rolled back, before the nightly run; ``JOBS_BENCH_PLANS=1`` prints the plans).
``--runner-only`` measures the runner's own overhead instead
(walking users, a trivial per-user job recorded, unrecorded, sharded) on ``--runner-users``
users of ``--items`` items. ``--keep`` keeps the loaded data (a template database in
``--data-dir``, one per schema version) and reuses it: each run works on a fresh copy.
The machine is shared and noisy (the load average is printed): read the figures as
orders of magnitude.

    .venv/bin/python benchmarks/jobs_bench.py [--users 1000 --memories 1000000] [--keep]
    .venv/bin/python benchmarks/jobs_bench.py --runner-only [--runner-users 20000]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from common import add_noise_option, header, load_average
from common import percentile as pct
from langchain_core.messages import HumanMessage
from psycopg.conninfo import make_conninfo
from workload import CachedEmbeddings, HashEmbedder

from langmem_layer import MemoryLayer, MemorySettings, PostgresMemoryStore
from langmem_layer.jobs import JOBS, JobContext, register
from langmem_layer.jobs import lifecycle_jobs as lifecycle_job
from langmem_layer.jobs.runs import PAGE, Shard, run, run_users
from langmem_layer.sql import jobs as sql
from langmem_layer.sql import transitions as lsql
from langmem_layer.sql.migrations import MIGRATIONS
from langmem_layer.store.embedded import embedded_uri

DB = "langmem_jobs_bench"
NOW = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
TARGET_RATE = 20_000
TARGET_SLOWDOWN = 1.5

_NOUNS = ("tea coffee garden dog cat piano guitar marathon bike train flight hotel sister "
         "brother mother father doctor dentist interview budget mortgage rent salary "
         "project deadline report meeting manager team client invoice laptop phone book "
         "novel recipe pasta sushi allergy medication yoga gym swimming hiking camping "
         "beach mountain museum concert movie series podcast newsletter course exam thesis "
         "vacation birthday wedding anniversary gift car insurance taxes")
_PLACES = ("Berlin Paris Lisbon Tokyo Boston Denver Oslo Rome Madrid Toronto Seattle Austin "
          "Vienna Prague Dublin Sydney")
_VERBS = ("likes prefers avoids planned booked finished started mentioned cancelled forgot "
         "bought sold visited called asked")

NOUNS, PLACES, VERBS = (_NOUNS.split(), _PLACES.split(), _VERBS.split())

# One statement per chunk of memories: ``s`` draws the randomness, ``t`` derives the
# memory's type and times, the SELECT builds the value as MemoryRecord.to_value() does.
LOAD = """
INSERT INTO langmem_items (user_id, prefix, key, value, is_memory, search_text,
                           created_at, updated_at)
SELECT t.uid, 'memories.' || t.uid || '.work', 'm' || t.g,
       jsonb_build_object(
         'content', t.content, 'kind', t.kind, 'layer', t.layer,
         'subject', NULL, 'predicate', NULL, 'object', NULL,
         'confidence', round((0.6 + 0.4 * t.r2)::numeric, 3),
         'salience', round((0.3 + 0.6 * t.r3)::numeric, 3),
         'policy', 'speak', 'status', t.status, 'pinned', t.r4 < 0.01, 'refs', '[]'::jsonb,
         'due_at', CASE WHEN t.kind = 'open_loop' AND t.r2 < 0.5
                        THEN to_char((%(now)s::timestamptz + make_interval(
                               secs => (t.r3 * 40 - 20) * 86400)) AT TIME ZONE 'UTC',
                               'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') END,
         'loop_status', CASE WHEN t.kind = 'open_loop' THEN 'open' END,
         'occurred_at', t.seen_iso, 'last_accessed_at', t.seen_iso,
         'access_count', floor(t.r1 * 10)::int, 'reinforcement_count', 0,
         'expires_at', NULL,
         'source', jsonb_build_object('agent_id', NULL, 'thread_id', NULL,
                                      'message_id', NULL, 'text', NULL),
         'content_hash', md5(t.content),
         'metadata', CASE WHEN t.rk < 0.10 THEN '{"ephemeral": true}'::jsonb
                          ELSE '{}'::jsonb END,
         'success_count', CASE WHEN t.layer = 'procedural' THEN floor(t.r1 * 8)::int ELSE 0 END,
         'failure_count', CASE WHEN t.layer = 'procedural' THEN floor(t.r2 * 8)::int ELSE 0 END,
         'history', CASE WHEN t.status = 'stale' THEN jsonb_build_array(jsonb_build_object(
             'at', to_char((t.seen + interval '30 days') AT TIME ZONE 'UTC',
                           'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
             'event', 'status', 'old', 'active', 'new', 'stale',
             'reason', 'episodic: not reinforced for 30 days')) ELSE '[]'::jsonb END),
       true, t.content, t.seen, CASE WHEN t.status = 'stale'
                                     THEN t.seen + interval '30 days' ELSE t.seen END
FROM (
  SELECT s.*, 'user-' || lpad(s.u::text, 5, '0') AS uid,
         %(now)s::timestamptz - make_interval(secs => s.ra * 200 * 86400) AS seen,
         to_char((%(now)s::timestamptz - make_interval(secs => s.ra * 200 * 86400))
                 AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS seen_iso,
         CASE WHEN s.rk < 0.40 AND s.rk >= 0.10 AND s.ra > 0.15 AND s.r2 < 0.5
              THEN 'stale' ELSE 'active' END AS status,
         CASE WHEN s.rk < 0.10 THEN 'profile_fact' WHEN s.rk < 0.40 THEN 'episodic_event'
              WHEN s.rk < 0.63 THEN 'profile_fact' WHEN s.rk < 0.73 THEN 'preference'
              WHEN s.rk < 0.78 THEN 'protocol' WHEN s.rk < 0.88 THEN 'open_loop'
              WHEN s.rk < 0.94 THEN 'reflection' ELSE 'temporal_summary' END AS kind,
         CASE WHEN s.rk < 0.10 THEN 'semantic' WHEN s.rk < 0.40 THEN 'episodic'
              WHEN s.rk < 0.58 THEN 'semantic' WHEN s.rk < 0.63 THEN 'identity'
              WHEN s.rk < 0.78 THEN 'procedural' WHEN s.rk < 0.88 THEN 'episodic'
              ELSE 'semantic' END AS layer,
         format('User %%s %%s and %%s in %%s (%%s)',
                (%(verbs)s::text[])[1 + floor(s.r5 * %(n_verbs)s)::int],
                (%(nouns)s::text[])[1 + floor(s.r6 * %(n_nouns)s)::int],
                (%(nouns)s::text[])[1 + floor(s.r7 * %(n_nouns)s)::int],
                (%(places)s::text[])[1 + floor(s.r3 * %(n_places)s)::int], s.g) AS content
  FROM (
    SELECT g, least(%(users)s - 1,
                    floor(%(users)s * power((g - 1)::float8 / %(total)s, 1.5)))::int AS u,
           random() AS rk, random() AS ra, random() AS r1, random() AS r2, random() AS r3,
           random() AS r4, random() AS r5, random() AS r6, random() AS r7
    FROM generate_series(%(lo)s::int, %(hi)s::int) g
  ) s
) t
"""


def server(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT current_setting('server_version'), "
                       "current_setting('shared_buffers')").fetchone()
    assert row is not None
    return (f"PostgreSQL {row[0]} (embedded, shared_buffers={row[1]}), "
            f"load average {load()}")


def load() -> str:
    """The load average now (each phase prints it beside its figure)."""
    return " ".join(f"{x:.2f}" for x in load_average())





# -- data -------------------------------------------------------------------------------


def fill(uri: str, users: int, total: int, chunk: int = 100_000) -> float:
    """Bulk-load the memories; returns the seconds taken (VACUUM ANALYZE included)."""
    t0 = time.perf_counter()
    params: dict[str, Any] = {"now": NOW, "users": users, "total": total,
                              "nouns": list(NOUNS), "n_nouns": len(NOUNS),
                              "verbs": list(VERBS), "n_verbs": len(VERBS),
                              "places": list(PLACES), "n_places": len(PLACES)}
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("SELECT setseed(0.23)")
        for lo in range(1, total + 1, chunk):
            conn.execute(LOAD, {**params, "lo": lo, "hi": min(total, lo + chunk - 1)})
            print(f"  loaded {min(total, lo + chunk - 1):>9} memories "
                  f"{time.perf_counter() - t0:7.1f} s", file=sys.stderr)
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - t0


def add_vectors(uri: str, user_ids: Sequence[str], embedder: HashEmbedder) -> int:
    """Embed the sampled users' memories (content) and COPY the vectors in."""
    with psycopg.connect(uri) as conn:
        rows = conn.execute(
            "SELECT user_id, prefix, key, value ->> 'content' FROM langmem_items "
            "WHERE user_id = ANY(%s) AND is_memory", [list(user_ids)]).fetchall()
        vectors = embedder([r[3] for r in rows])
        with conn.cursor().copy(
                "COPY langmem_embeddings (user_id, prefix, key, model_id, field, dims, "
                "embedding, created_at) FROM STDIN") as copy:
            for (user_id, prefix, key, _), vec in zip(rows, vectors, strict=True):
                copy.write_row((user_id, prefix, key, embedder.name, "content",
                                embedder.dims, "[" + ",".join(f"{x:.6g}" for x in vec) + "]",
                                NOW))
        conn.execute("ANALYZE langmem_embeddings")
    return len(rows)


def prepare(base: str, args: argparse.Namespace, embedder: HashEmbedder,
            index: dict[str, Any]) -> tuple[str, list[str]]:
    """A fresh database holding the data (a copy of the kept template, or loaded)."""
    # One template per schema version: the rows were laid out on their pages by the
    # schema they were loaded under (its fillfactor), and whether the night's updates
    # are in place (HOT) depends on that room; migrating a kept copy would not re-lay
    # them. The load is seeded, so every version's template holds the same data.
    seed = (f"langmem_jobs_seed_{args.users}_{args.memories}_{args.read_users}"
            f"_v{len(MIGRATIONS)}")
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        have = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                             [seed]).fetchone()
        if not (args.keep and have):
            admin.execute(f"DROP DATABASE IF EXISTS {seed} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {seed}")
            seed_uri = make_conninfo(base, dbname=seed)
            with PostgresMemoryStore.from_conn_string(seed_uri, index=index) as store:
                store.setup()
            seconds = fill(seed_uri, args.users, args.memories)
            t0 = time.perf_counter()
            n = add_vectors(seed_uri, read_users(seed_uri, args.read_users), embedder)
            print(f"  load: {args.memories} memories in {seconds:.1f} s "
                  f"({args.memories / seconds:.0f}/s, VACUUM ANALYZE included); "
                  f"{n} vectors for the read users in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        # FILE_COPY: a copy of the files after a checkpoint, not a WAL record per block.
        admin.execute(f"CREATE DATABASE {DB} TEMPLATE {seed} STRATEGY FILE_COPY")
        print(f"  copied the loaded database in {time.perf_counter() - t0:.1f} s")
        if not args.keep:
            admin.execute(f"DROP DATABASE {seed}")
    uri = make_conninfo(base, dbname=DB)
    # Nothing left to apply on a template of this version; a guard all the same.
    with PostgresMemoryStore.from_conn_string(uri, index=index) as store:
        store.setup()
    return uri, read_users(uri, args.read_users)


def read_users(uri: str, n: int) -> list[str]:
    """``n`` users spread over the size distribution (not the largest few)."""
    with psycopg.connect(uri) as conn:
        users = [r[0] for r in conn.execute(
            "SELECT DISTINCT user_id FROM langmem_items ORDER BY user_id").fetchall()]
    step = max(1, len(users) // n)
    return users[step // 2::step][:n]


def sizes(conn: psycopg.Connection[Any]) -> tuple[int, int, int, str, int]:
    row = conn.execute(
        """SELECT min(n), percentile_disc(0.5) WITHIN GROUP (ORDER BY n), max(n),
                  (array_agg(user_id ORDER BY n DESC))[1], count(*)
           FROM (SELECT user_id, count(*) AS n FROM langmem_items GROUP BY 1) s"""
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2], row[3], row[4]


# -- the read path ----------------------------------------------------------------------


class Reader:
    """Turns of the real nodes, round-robin over the sampled users."""

    def __init__(self, layer: MemoryLayer, users: Sequence[str], queries: Sequence[str]):
        self.layer = layer
        self.users = users
        self.queries = queries
        self.n = 0

    def paced(self, rate: float) -> float:
        """A turn, then a wait to the next slot of ``rate`` turns per second."""
        t0 = time.perf_counter()
        ms = self.turn()
        time.sleep(max(0.0, 1 / rate - (time.perf_counter() - t0)))
        return ms

    def turn(self) -> float:
        user = self.users[self.n % len(self.users)]
        query = self.queries[self.n % len(self.queries)]
        self.n += 1
        config = {"configurable": {"user_id": user, "thread_id": f"bench-{user}"}}
        state = {"messages": [HumanMessage(query)]}
        t0 = time.perf_counter()
        out = self.layer.load_memory.invoke(state, config)
        self.layer.assemble_context.invoke({**state, **out}, config)
        return (time.perf_counter() - t0) * 1000


def queries(n: int) -> list[str]:
    rng = np.random.default_rng(5)
    return [f"What about the {NOUNS[rng.integers(len(NOUNS))]} in "
            f"{PLACES[rng.integers(len(PLACES))]}?" for _ in range(n)]


# -- the nightly run --------------------------------------------------------------------


def timed_lifecycle(per_user: list[float]) -> Any:
    """The registered lifecycle job, its function timed per user."""
    job = JOBS["lifecycle"]

    def fn(ctx: JobContext, user_id: str, **kw: Any) -> dict[str, int]:
        t0 = time.perf_counter()
        out = job.function(ctx, user_id, **kw)
        per_user.append(time.perf_counter() - t0)
        return out  # type: ignore[no-any-return]

    return dataclasses.replace(job, function=fn)


def nightly(stores: Sequence[PostgresMemoryStore], now: datetime, total: int, label: str,
            reader: Reader | None = None, rate: float = 10.0,
            pause_ms: float = 0.0) -> dict[str, Any]:
    """Run the lifecycle over every user, recorded; ``reader`` reads meanwhile.

    With several stores (connections), the users are split into as many shards, run
    at the same time, one per store, as that many workers would (``--shard i/n``).
    """
    per_user: list[float] = []
    job = timed_lifecycle(per_user)
    runs: list[Any] = []
    n = len(stores)

    def go(i: int) -> None:
        ctx = JobContext(stores[i], settings=MemorySettings(jobs_pause_ms=pause_ms))
        runs.append(run(ctx, job, now=now, force=True,
                        shard=Shard(i, n) if n > 1 else None))

    before = updates(stores)
    threads = [threading.Thread(target=go, args=(i,), name=f"nightly-{i}") for i in range(n)]
    during: list[float] = []
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    while reader is not None and any(t.is_alive() for t in threads):
        ms = reader.paced(rate)
        if any(t.is_alive() for t in threads):
            during.append(ms)
    for thread in threads:
        thread.join()
    s = time.perf_counter() - t0
    if len(runs) != n:
        raise RuntimeError("a shard of the nightly run failed")
    counts: dict[str, int] = {}
    for one in runs:
        for k, v in one.counts.items():
            counts[k] = counts.get(k, 0) + v
    r = dataclasses.replace(runs[0], users=sum(one.users for one in runs), counts=counts)
    rate = total / s
    shards = f" in {n} shards at once" if n > 1 else ""
    print(f"  {label}{shards}: {r.users} users, {total} memories in {s:.1f} s = {rate:,.0f} "
          f"memories/s (target >= {TARGET_RATE:,}: "
          f"{'met' if rate >= TARGET_RATE else 'NOT met'}); load average {load()}")
    print(f"    per user (the job's function): p50 {pct(per_user, 50) * 1000:.1f} ms, "
          f"p95 {pct(per_user, 95) * 1000:.1f} ms, max {max(per_user) * 1000:.1f} ms")
    print("    outcomes: " + ", ".join(f"{k} {n:,}" for k, n in sorted(r.counts.items())))
    after = updates(stores)
    for table, (ins, upd, hot) in after.items():
        ins, upd, hot = (a - b for a, b in zip((ins, upd, hot), before[table], strict=True))
        print(f"    rows written to {table}: {ins:,} inserts, {upd:,} updates, {hot:,} of "
              "them HOT (in place, no index entries)")
    return {"during": during, "seconds": s}


def updates(stores: Sequence[PostgresMemoryStore]) -> dict[str, tuple[int, int, int]]:
    """Inserts and updates so far of the memory rows and of the decay scores, and how
    many updates were HOT."""
    # The runs' own connections: their pending statistics flushed before they are read.
    for one in stores:
        one.conn.execute("SELECT pg_stat_force_next_flush()")
    store = stores[0]
    rows = store.conn.execute(
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE relname IN ('langmem_items', 'langmem_decay') ORDER BY relname DESC"
    ).fetchall()
    return {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in rows}


def explain(uri: str, user_id: str, now: datetime) -> None:
    """EXPLAIN ANALYZE each lifecycle statement for one user, rolled back."""
    st = MemorySettings()
    rules = lsql.transitions(**lifecycle_job.lifecycle_thresholds(st))
    kw: dict[str, Any] = {"half_life_days": st.half_life_days(user_id),
                          "flag_below": st.decay_flag_below, "rules": rules}
    with psycopg.connect(uri) as conn:
        # The statements as the job sends them: the rules over the scan's candidates.
        text, params = lsql.rescore_decay(user_id, now, dry_run=True, **kw)
        row = conn.execute(text, params).fetchone()
        assert row is not None
        stmts = [("rescore_decay", lsql.rescore_decay(user_id, now, **kw))]
        stmts += [(t.name, lsql.apply_transition(
            user_id, t, now, among=(list(row[2 + 2 * n] or []), list(row[3 + 2 * n] or []))))
            for n, t in enumerate(rules)]
        # What the job sends now: the scores and every rule in one statement.
        stmts.append(("lifecycle_pass", lsql.lifecycle_pass(user_id, now, **kw)))
        print(f"  EXPLAIN ANALYZE for {user_id} at {now:%Y-%m-%d}:")
        for name, (text, params) in stmts:
            plan = [r[0] for r in conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS) " + text, params).fetchall()]
            if os.environ.get("JOBS_BENCH_PLANS"):
                print("\n".join("      " + line for line in plan))
            total = next((p for p in plan if p.startswith("Execution Time")), "?")
            print(f"    {name:<20} {total}")
            # Each statement on the data as it was: the per-rule ones as before, one
            # after the other; the whole pass alone.
            if name == "revalidated" or name == "lifecycle_pass":
                conn.rollback()
        conn.rollback()


def reads_quiet(reader: Reader, args: argparse.Namespace, when: str) -> list[float]:
    """The read path's latencies (ms) with nothing else going on, printed."""
    quiet = [reader.paced(args.read_rate) for _ in range(args.turns)]
    print(f"  read path (load_memory + assemble_context, {args.read_rate:g} turns/s), "
          f"quiet{when}: p50 {pct(quiet, 50):.2f} ms, p95 {pct(quiet, 95):.2f} ms "
          f"({len(quiet)} turns); load average {load()}")
    return quiet


def reads_during(during: list[float], quiet: list[float], what: str) -> None:
    """The read path's latencies during a run, against the quiet ones, printed."""
    ratio = pct(during, 95) / pct(quiet, 95)
    print(f"  read path during {what}: p50 {pct(during, 50):.2f} ms, "
          f"p95 {pct(during, 95):.2f} ms ({len(during)} turns), p95 {ratio:.2f}x "
          f"quiet (target <= {TARGET_SLOWDOWN}x: "
          f"{'met' if ratio <= TARGET_SLOWDOWN else 'NOT met'})")


def lifecycle_bench(args: argparse.Namespace) -> int:
    embedder = HashEmbedder()
    qs = queries(args.queries)
    # The query embedding is excluded from the timing: computed here once.
    embeddings = CachedEmbeddings(dict(zip(qs, embedder(qs), strict=True)), embedder,
                                  embedder.name)
    index = {"embed": embeddings, "dims": embedder.dims, "model_id": embedder.name}
    base = embedded_uri(Path(args.data_dir))
    print(f"jobs_bench: the nightly lifecycle, {args.users} users, {args.memories} "
          f"memories, read path on {args.read_users} users")
    uri, sample = prepare(base, args, embedder, index)
    try:
        with contextlib.ExitStack() as stack:
            store = stack.enter_context(PostgresMemoryStore.from_conn_string(uri, index=index))
            jobs_stores = [stack.enter_context(PostgresMemoryStore.from_conn_string(
                uri, index=None)) for _ in range(args.shards)]
            lo, mid, hi, largest, n_users = sizes(store.conn)
            print(f"  {n_users} users of {lo}..{hi} memories (median {mid}); "
                  + server(store.conn))
            if args.explain:
                explain(uri, largest, NOW)
            layer = MemoryLayer(store, extraction="inline")
            reader = Reader(layer, sample, qs)
            for _ in range(10):  # warm-up
                reader.turn()
            quiet = reads_quiet(reader, args, "")
            # The nightly run on a store (a connection) of its own, as a worker would.
            night = nightly(jobs_stores, NOW, args.memories, "nightly run, reads going on",
                            reader, args.read_rate, args.pause_ms)
            reads_during(night["during"], quiet, "the nightly run")
            if args.next_night:
                # A night like every later one: the first moved what the data's ages
                # had piled up; this one moves what one day brings. The day between
                # vacuums the first night's dead rows (as autovacuum would, here at
                # once, so it does not run under the measurements), then the reads get
                # a quiet figure of their own: the first night changed what they read.
                t0 = time.perf_counter()
                with psycopg.connect(uri, autocommit=True) as conn:
                    conn.execute("VACUUM (ANALYZE) langmem_items, langmem_decay")
                print(f"  the day between: VACUUM (ANALYZE) of the memories and scores in "
                      f"{time.perf_counter() - t0:.1f} s")
                quiet = reads_quiet(reader, args, " before the next night")
                night = nightly(jobs_stores, NOW + timedelta(days=1), args.memories,
                                "next night (now + 1 day), reads going on", reader,
                                args.read_rate, args.pause_ms)
                reads_during(night["during"], quiet, "the next night")
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    return 0


# -- the runner's own overhead ----------------------------------------------------------


def count_items(ctx: JobContext, user_id: str, *, now: datetime,
                dry_run: bool = False) -> dict[str, int]:
    rows = ctx.execute(("SELECT count(*) AS n FROM langmem_items WHERE user_id = %s",
                        [user_id]))
    return {"items": int(rows[0]["n"])}


def timed(label: str, fn: Any) -> float:
    t0 = time.perf_counter()
    out = fn()
    seconds = time.perf_counter() - t0
    print(f"  {label:<44} {seconds:8.2f} s   {out}")
    return seconds


def runner_bench(args: argparse.Namespace) -> int:
    """Walking users and a trivial per-user job: the runner's cost per user."""
    base = embedded_uri(Path(args.data_dir))
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DB}")
    uri = make_conninfo(base, dbname=DB)
    users = args.runner_users
    register("bench-count", "count a user's items", schedule="daily",
             per_user=True)(count_items)
    try:
        with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
            store.setup()
            with psycopg.connect(uri, autocommit=True) as conn:
                conn.execute(
                    """INSERT INTO langmem_items (user_id, prefix, key, value, created_at,
                                                  updated_at)
                    SELECT 'user-' || lpad(u::text, 7, '0'), 'memories.x.work', 'k' || i,
                           '{}'::jsonb, now(), now()
                    FROM generate_series(1, %s) u, generate_series(1, %s) i""",
                    [users, args.items])
                conn.execute("ANALYZE langmem_items")
            print(f"jobs_bench --runner-only: {users} users x {args.items} items; "
                  f"page {PAGE}; {server(store.conn)}")
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
            print(f"  {'':<44} {users / s:8.0f} users/s")
            s = timed("per-user job, unrecorded (run_users)",
                      lambda: run_users(ctx, job, now=NOW).detail)
            print(f"  {'':<44} {users / s:8.0f} users/s")
            s = timed("4 shards, one after the other", lambda: sum(
                run(ctx, job, now=NOW, force=True, shard=Shard(i, 4)).users
                for i in range(4)))
            print(f"  {'':<44} {users / s:8.0f} users/s")
            timed("the period again (a no-op)", lambda: run(ctx, job, now=NOW).status)
    finally:
        del JOBS["bench-count"]
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--memories", type=int, default=1_000_000)
    ap.add_argument("--read-users", type=int, default=20,
                    help="users the read path is measured on (they get vectors)")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--turns", type=int, default=200, help="quiet read-path turns")
    ap.add_argument("--read-rate", type=float, default=10.0,
                    help="read-path turns per second, quiet and during the nightly run")
    ap.add_argument("--next-night", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--pause-ms", type=float, default=0.0,
                    help="the runner's wait after each user (jobs_pause_ms) in the run "
                    "with reads going on")
    ap.add_argument("--shards", type=int, default=1,
                    help="run the nightly lifecycle as this many shards at once, each on "
                    "a connection of its own (as that many workers would)")
    ap.add_argument("--explain", action="store_true",
                    help="EXPLAIN ANALYZE the lifecycle statements for the largest user")
    ap.add_argument("--data-dir", default="/tmp/langmem-jobs-bench",
                    help="embedded PostgreSQL data dir (databases of its own are made)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the loaded data for the next run, and reuse it if there")
    ap.add_argument("--runner-only", action="store_true",
                    help="measure the runner's overhead per user instead")
    ap.add_argument("--runner-users", type=int, default=20_000)
    ap.add_argument("--items", type=int, default=5, help="items per user (--runner-only)")
    add_noise_option(ap)
    args = ap.parse_args(argv)
    header("jobs_bench", allow_noisy=args.allow_noisy)
    if args.users < 1 or args.memories < args.users or args.read_users < 1 or args.shards < 1:
        ap.error("--users, --read-users and --shards are positive; --memories >= --users")
    return runner_bench(args) if args.runner_only else lifecycle_bench(args)


if __name__ == "__main__":
    sys.exit(main())
