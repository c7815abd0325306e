"""The single embedded server beside a Citus cluster of two workers, in one run, on this
machine: the read path, served turns, the nightly lifecycle, and faults under load.

Both sides get the same data: ``--memories`` synthetic memories (``common.hashed_corpus``,
vectors precomputed by the benchmarks' hashed bag of words) over one large user holding
``--big`` of them (given their own HNSW index: the large-user path) and users of
``--small-size`` memories. The cluster is the local one of ``make citus``
(``tests/citus_cluster.py``: a coordinator and two workers on loopback), on a database of
its own on every node, distributed by ``setup()``. Measured on each side:

* **read path**: ``load_memory`` + ``assemble_context`` (the turn's recall and context),
  ``--queries`` questions for the large user and for a small one: p50 and p95 in ms;
* **served turns**: the served app's turn (as ``serve_bench`` serves it:
  ``memory_lifespan``, the offline chat model, the rule extractor, extraction behind the
  turns, drained at exit) for each count of ``--users``, ``--duration`` seconds each:
  turns/s and p50/p95;
* **nightly lifecycle**: the ``lifecycle`` job through the runner over every user (on
  Citus each user's pass runs on their shard group): users and seconds;
* **what a turn costs each process**, for the capacity model (docs/scaling.md): the CPU
  seconds of the client (this process) and of each server node (a postmaster and every
  process it forked, read from /proc: the servers run on this machine) while the turns
  are served, per turn; and the bytes on disk per memory after the load.

Then, on the cluster only (``--skip-faults`` to leave it out), **faults under load**:
``--fault-users`` users served for ``--fault-duration`` seconds while one shard group
is moved to the other worker (``citus_move_shard_placement``, online) and a worker is
stopped and started again. Each turn's text names its user and turn; afterwards every
turn the client saw succeed must be in the user's message log (``lost turns``: those
missing) and no row of a user may carry another user's tag or namespace (``cross-user
rows``); both must be 0. Errors are counted by when they happened: while the worker
was down (expected) or not. The app is not restarted: ``after recovery`` counts the
turns that succeeded once the worker was back.

The figures are the machine's: three servers share its cores here, and each statement
on Citus takes the coordinator's extra hop. Compare the sides of one run only. Both
sides serve and read without the row-level-security role (`LANGMEM_RLS=0`), the same
settings on each side; then each serves the most users again with every transaction
acting as the role (`LANGMEM_RLS=1`), and the run prints what the policies cost each side.

    .venv/bin/python benchmarks/citus_bench.py [--memories 5000] [--users 1,50]
        [--duration 10] [--queries 40] [--skip-faults] [--allow-noisy]

Needs the cluster running: ``make citus CITUS_SRC=<the Citus source>`` starts it (and
builds Citus the first time), ``make citus-stop`` stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from common import Log, add_noise_option, hashed_corpus, header, percentile
from psycopg import conninfo
from served_app import SCRIPT, database, drive, served_graph
from workload import BIG, NOW, load, owner

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.citus_cluster: the local cluster's nodes

START_HINT = ("citus_bench needs the local Citus cluster: start it with "
              "`make citus CITUS_SRC=<the Citus source>` (see tests/citus_cluster.py)")

log = Log()


# -- the two databases -------------------------------------------------------------------


def _citus_nodes(server: str) -> list[tuple[str, int, int]]:
    """(host, port, group) of the cluster's primary nodes, the coordinator (group 0) first."""
    with psycopg.connect(server, autocommit=True, connect_timeout=5) as conn:
        if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            raise SystemExit(f"{server} has no citus extension. {START_HINT}")
        return [(h, int(p), int(g)) for h, p, g in conn.execute(
            "SELECT nodename, nodeport, groupid FROM pg_dist_node "
            "WHERE noderole = 'primary' ORDER BY groupid").fetchall()]


def citus_database(server: str, name: str) -> str:
    """A new database ``name`` on every node of the cluster, its nodes registered."""
    nodes = _citus_nodes(server)
    for host, port, _ in nodes:
        node = conninfo.make_conninfo(server, host=host, port=port, dbname="postgres")
        with psycopg.connect(node, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
        with psycopg.connect(conninfo.make_conninfo(node, dbname=name),
                             autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    (chost, cport, _), workers = nodes[0], nodes[1:]
    uri = conninfo.make_conninfo(server, host=chost, port=cport, dbname=name)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (chost, cport))
        for host, port, _ in workers:
            conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
    return uri


def recover(uri: str) -> None:
    """Finish the two-phase commits a stopped worker left prepared (Citus does it every
    minute on its own): a turn committed on the coordinator is then on its worker."""
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("SELECT recover_prepared_transactions()")


def drop_citus_database(server: str, name: str) -> None:
    host, port, _ = _citus_nodes(server)[0]
    recover(conninfo.make_conninfo(server, host=host, port=port, dbname=name))
    for host, port, _ in _citus_nodes(server):
        node = conninfo.make_conninfo(server, host=host, port=port, dbname="postgres")
        with psycopg.connect(node, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# -- what is measured on each side --------------------------------------------------------


def fill(uri: str, args: argparse.Namespace, texts: list[str], embeddings: Any,
         label: str) -> tuple[dict[str, Any], float]:
    """Set up, load the memories, index the large user; the store's index config and
    the KiB on disk per memory."""
    from langmem_layer.store.sync import PostgresMemoryStore

    index = {"embed": embeddings, "dims": embeddings.compute.dims,
             "model_id": embeddings.model}
    with PostgresMemoryStore.from_conn_string(uri, index=index) as store:
        store.setup()
        rate = load(store, texts, args.big, args.small_size, args.chunk, label)
        indexed = store.index_large_users(threshold=min(args.big, 5000))
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        # Tables, indexes and TOAST; on Citus every shard's (and each copy of a reference table).
        size = conn.execute(
            "SELECT sum(citus_total_relation_size(logicalrelid)) FROM pg_dist_partition"
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
            else "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relkind = 'r'"
                 " AND c.relname LIKE 'langmem\\_%'").fetchone()[0]  # type: ignore[index]
    log(f"{label}: {len(texts)} memories loaded at {rate:.0f}/s; indexed {indexed}")
    return index, int(size) / len(texts) / 1024


def read_path(uri: str, index: dict[str, Any], queries: list[str], user: str
              ) -> list[float]:
    """ms of load_memory + assemble_context per query for ``user`` (up to 10 warm-ups
    first)."""
    from langchain_core.messages import HumanMessage

    from langmem_layer import MemoryLayer
    from langmem_layer.store.sync import PostgresMemoryStore

    out: list[float] = []
    with PostgresMemoryStore.from_conn_string(uri, index=index) as store:
        layer = MemoryLayer(store, extraction="inline")
        config = {"configurable": {"user_id": user, "thread_id": "bench"}}
        warm = queries[:10]
        for n, q in enumerate(warm + queries):
            state = {"messages": [HumanMessage(q)]}
            t0 = time.perf_counter()
            got = layer.load_memory.invoke(state, config)
            layer.assemble_context.invoke({**state, **got}, config)
            if n >= len(warm):
                out.append((time.perf_counter() - t0) * 1000)
        layer.close()
    return out


def postmasters(uri: str) -> dict[str, int]:
    """{node: postmaster pid} of ``uri``'s server, or of each node of its cluster (the
    coordinator first): the servers run on this machine (loopback)."""
    nodes = [("server", uri)]
    with psycopg.connect(uri, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            nodes = [("coordinator" if group == 0 else f"worker :{port}",
                      conninfo.make_conninfo(uri, host=host, port=port))
                     for host, port, group in _citus_nodes(uri)]
    out = {}
    for label, node in nodes:
        with psycopg.connect(node, autocommit=True) as conn:  # the backend while it lives
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
            out[label] = int(_stat(backend)[1])
    return out


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's name (state, ppid, ...)."""
    return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(postmaster: int) -> float:
    """CPU seconds of a postmaster and every process it forked: its live children's own
    time, and its own with what its exited children used (reaped by it)."""
    ticks = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = _stat(int(d.name))
        except OSError:  # gone meanwhile
            continue
        if int(d.name) == postmaster:
            ticks += sum(int(x) for x in f[11:15])  # utime, stime, cutime, cstime
        elif int(f[1]) == postmaster:
            ticks += int(f[11]) + int(f[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def settled_cpu_seconds(postmaster: int, *, limit: float = 5.0) -> float:
    """``cpu_seconds`` once backends that were closing have exited and been reaped: a
    backend between its exit and its reaping is counted neither as a live child nor in
    the postmaster's total, so a reading taken as a pool closes can miss most of what
    its connections used (a process showed 0.05 ms a turn). Read until two readings
    0.2 s apart agree, for at most ``limit`` seconds."""
    last = cpu_seconds(postmaster)
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = cpu_seconds(postmaster)
        if abs(now - last) < 0.011:  # a clock tick or so: nothing exiting
            return now
        last = now
    return last


@contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    """``name`` set to ``value`` inside the block (a store reads its settings when it
    opens), as it was after."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def served(uri: str, users: int, args: argparse.Namespace, run: str) -> dict[str, Any]:
    """The served app's turn (as ``serve_bench`` serves it), ``users`` at a time for
    ``--duration`` seconds: latencies, elapsed seconds, errors, and the CPU seconds the
    client (this process) and each server node used meanwhile."""
    nodes = postmasters(uri)
    before = {n: settled_cpu_seconds(pm) for n, pm in nodes.items()}
    client = time.process_time()
    out = asyncio.run(_served(uri, users, args, run))
    out["cpu"] = {"client": time.process_time() - client,
                  **{n: settled_cpu_seconds(pm) - before[n] for n, pm in nodes.items()}}
    return out


async def _served(uri: str, users: int, args: argparse.Namespace, run: str
                  ) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    async with served_graph(uri, pool_size=args.pool_size) as service:
        graph = service.graph

        async def turn(u: int, text: str) -> None:
            await graph.ainvoke({"messages": [HumanMessage(text)]},
                                {"configurable": {"user_id": f"{run}-{users}-{u}",
                                                  "thread_id": f"t{u}"}})

        latencies, elapsed, errors = await drive(users, args.duration, args.max_turns, turn)
    return {"latencies": latencies, "elapsed": elapsed, "errors": errors}


def lifecycle(uri: str, index: dict[str, Any]) -> tuple[int, float]:
    """The nightly lifecycle over every user: (users, seconds)."""
    from langmem_layer import MemorySettings
    from langmem_layer.jobs import JobContext
    from langmem_layer.jobs.runs import run
    from langmem_layer.store.sync import PostgresMemoryStore

    with (PostgresMemoryStore.from_conn_string(uri, index=index) as store,
          _Activity(uri) as activity):
        ctx = JobContext(store, settings=MemorySettings())
        t0 = time.perf_counter()
        done = run(ctx, "lifecycle", now=NOW + timedelta(days=45), force=True)
        seconds = time.perf_counter() - t0
    if seconds > SLOW_PASS:  # say what the server was doing, for the reader of the run
        log(f"slow pass ({seconds:.0f} s); the server's backends, sampled every "
            f"{_Activity.EVERY:.0f} s: " + "; ".join(
                f"{n}x {what}" for what, n in activity.seen.most_common(6)))
    return done.users, seconds


#: A pass slower than this prints what the server's backends were doing during it.
SLOW_PASS = 60.0


class _Activity:
    """Samples ``pg_stat_activity`` of the database in a thread while the block runs:
    each active backend's wait (or CPU) and the start of its statement, counted."""

    EVERY = 2.0

    def __init__(self, uri: str) -> None:
        from collections import Counter

        self.uri, self.seen = uri, Counter[str]()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _Activity:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _sample(self) -> None:
        with psycopg.connect(self.uri, autocommit=True) as conn:
            while not self.stop.wait(self.EVERY):
                for wait, query in conn.execute(
                        "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), "
                        "left(regexp_replace(query, '\\s+', ' ', 'g'), 70) "
                        "FROM pg_stat_activity WHERE datname = current_database() "
                        "AND state = 'active' AND pid <> pg_backend_pid()").fetchall():
                    self.seen[f"{wait} [{query}]"] += 1


# -- faults under load (the cluster only) ------------------------------------------------

_TAG = re.compile(r"\[(f\d+)#\d+\]")
#: Seconds the users are served after the stopped worker is back.
RECOVERY = 10.0


class Faults:
    """A shard move, then a worker stopped and started, in a thread, timed."""

    def __init__(self, uri: str, args: argparse.Namespace) -> None:
        self.uri, self.args = uri, args
        self.events: list[tuple[str, float]] = []
        self.error: BaseException | None = None
        self.down: tuple[float, float] | None = None

    def _at(self, what: str) -> None:
        self.events.append((what, time.monotonic()))
        log(f"fault: {what}")

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by the caller
            self.error = e

    def _run(self) -> None:
        from tests import citus_cluster as cluster

        pause = self.args.fault_duration / 5
        time.sleep(pause)
        with psycopg.connect(self.uri, autocommit=True) as conn:
            row = conn.execute(
                """SELECT s.shardid, n.nodename, n.nodeport FROM pg_dist_shard s
                JOIN pg_dist_placement p ON p.shardid = s.shardid
                JOIN pg_dist_node n ON n.groupid = p.groupid
                WHERE s.logicalrelid = 'langmem_items'::regclass AND n.groupid > 0
                ORDER BY n.nodeport, s.shardid LIMIT 1""").fetchone()
            assert row is not None
            shard, host, port = row
            target = conn.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid > 0 "
                "AND noderole = 'primary' AND nodeport <> %s ORDER BY nodeport LIMIT 1",
                [port]).fetchone()
            assert target is not None
            self._at(f"moving shard group of {shard} from :{port} to :{target[1]}")
            conn.execute("SELECT citus_move_shard_placement(%s, %s, %s, %s, %s)",
                         [shard, host, port, target[0], target[1]])
            self._at("shard moved")
        time.sleep(pause)
        node = cluster.DATA / cluster.NODES[-1]
        ctl = [str(cluster.BIN / "pg_ctl"), "-D", str(node)]
        self._at(f"stopping worker {cluster.NODES[-1]}")
        down = time.monotonic()
        cluster._as_server([*ctl, "-m", "fast", "-w", "stop"], capture_output=True)
        time.sleep(pause)
        cluster._as_server([*ctl, "-l", str(cluster.LOGS / f"{cluster.NODES[-1]}.log"),
                            "-w", "-t", "60", "start"], capture_output=True)
        self.down = (down, time.monotonic())
        self._at(f"worker {cluster.NODES[-1]} back")


async def _faulted_turns(uri: str, args: argparse.Namespace, run: str, faults: Faults
                         ) -> dict[str, Any]:
    ok: list[tuple[str, str, float]] = []  # (user, text, when)
    errors: list[float] = []
    first: list[str] = []
    at_exit: list[str] = []
    try:
        await _serve(uri, args, run, faults, ok, errors, first)
    except Exception as e:  # the exit's drain of the extraction queue
        at_exit.append(f"{type(e).__name__}: {e}"[:200])
    return {"ok": ok, "errors": errors, "first": first, "at_exit": at_exit}


async def _serve(uri: str, args: argparse.Namespace, run: str, faults: Faults,
                 ok: list[tuple[str, str, float]], errors: list[float], first: list[str]
                 ) -> None:
    from langchain_core.messages import HumanMessage

    async with served_graph(uri, pool_size=args.pool_size) as service:
        graph = service.graph
        deadline = time.monotonic() + args.fault_duration
        thread = threading.Thread(target=faults.run, daemon=True)

        def serving() -> bool:
            # --fault-duration at least, and RECOVERY seconds past the worker's return
            now = time.monotonic()
            if now < deadline or thread.is_alive():
                return True
            return faults.down is not None and now < faults.down[1] + RECOVERY

        async def user_loop(u: int) -> None:
            user, i = f"{run}-f{u}", 0
            while serving():
                text = f"{SCRIPT[i % len(SCRIPT)]} [f{u}#{i}]"
                i += 1
                try:
                    await graph.ainvoke({"messages": [HumanMessage(text)]},
                                        {"configurable": {"user_id": user,
                                                          "thread_id": f"t{u}"}})
                except Exception as e:
                    errors.append(time.monotonic())
                    if not first:
                        first.append(f"{type(e).__name__}: {e}"[:200])
                    await asyncio.sleep(0.2)
                else:
                    ok.append((user, text, time.monotonic()))

        thread.start()
        await asyncio.gather(*(user_loop(u) for u in range(args.fault_users)))
        thread.join()


def check_rows(uri: str, run: str, ok: list[tuple[str, str, float]]
               ) -> tuple[list[tuple[str, str, float]], int]:
    """(lost turns, cross-user rows) of the faulted run's users."""
    recover(uri)
    with psycopg.connect(uri) as conn:
        logged = conn.execute(
            "SELECT user_id, text FROM langmem_messages WHERE user_id LIKE %s",
            [f"{run}-f%"]).fetchall()
        misplaced = conn.execute(
            """SELECT count(*) FROM langmem_items WHERE user_id LIKE %(u)s
            AND prefix LIKE 'memories.%%' AND split_part(prefix, '.', 2) <> user_id""",
            {"u": f"{run}-f%"}).fetchone()
    have = set(logged)
    lost = [(user, text, t) for user, text, t in ok if (user, text) not in have]
    crossed = sum(1 for user, text in logged
                  if (m := _TAG.search(text)) and user != f"{run}-{m.group(1)}")
    return lost, crossed + int(misplaced[0] if misplaced else 0)


# -- the run -------------------------------------------------------------------------------


def _ms(values: list[float]) -> str:
    return f"p50 {percentile(values, 50):7.1f} ms  p95 {percentile(values, 95):7.1f} ms"


def _rate(s: dict[str, Any]) -> float:
    """Turns a second of a ``served`` run."""
    return len(s["latencies"]) / s["elapsed"] if s["elapsed"] else 0.0


def _served_row(side: str, s: dict[str, Any]) -> str:
    """A ``served`` run's line: turns, their rate, latencies and errors."""
    ms = [1000 * x for x in s["latencies"]]
    return (f"    {side:<18} {len(ms):>6} turns {_rate(s):7.1f}/s  {_ms(ms)}  "
            f"errors {s['errors']}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--memories", type=int, default=5_000, help="memories in all (200000, 1M)")
    p.add_argument("--big", type=int, default=0,
                   help="the large user's memories (default: a fifth of --memories)")
    p.add_argument("--small-size", type=int, default=200, help="memories per small user")
    p.add_argument("--queries", type=int, default=40, help="timed read-path queries per user")
    p.add_argument("--users", default="1,50", help="served turns: concurrent users per row")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per served row")
    p.add_argument("--max-turns", type=int, default=100_000)
    p.add_argument("--pool-size", type=int, default=8)
    p.add_argument("--chunk", type=int, default=500, help="memories per store.batch at load")
    p.add_argument("--citus-url", default=None,
                   help="the coordinator (default: the local cluster's, tests/citus_cluster)")
    p.add_argument("--database-url", default=None,
                   help="the single server (default: an embedded one in a temp directory)")
    p.add_argument("--fault-users", type=int, default=50)
    p.add_argument("--fault-duration", type=float, default=30.0)
    p.add_argument("--skip-faults", action="store_true")
    p.add_argument("--faults-only", action="store_true",
                   help="only the faults under load (on the cluster; no comparison)")
    add_noise_option(p)
    args = p.parse_args(argv)
    args.big = args.big or max(1, args.memories // 5)
    counts = [int(u) for u in args.users.split(",")]
    most = max(counts)
    # Both sides without the row-level-security role, the same settings on each side of
    # the comparison; the served turns as the role are a run of their own (served_rls).
    os.environ["LANGMEM_RLS"] = "0"

    from tests import citus_cluster

    server = args.citus_url or citus_cluster.url()
    try:
        _citus_nodes(server)
    except psycopg.OperationalError:
        print(START_HINT)
        return 2
    header("citus_bench", allow_noisy=args.allow_noisy)
    texts, queries, _, embeddings = hashed_corpus(7, args.memories, args.queries)
    small = owner(args.big, args.big, args.small_size) if args.memories > args.big else BIG
    run = uuid.uuid4().hex[:6]
    name = f"langmem_citus_bench_{run}"
    if args.faults_only:
        uri = citus_database(server, name)
        try:
            from langmem_layer.store.sync import PostgresMemoryStore

            with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
                store.setup()
            return 1 if faults(uri, args, run) else 0
        finally:
            drop_citus_database(server, name)
    results: dict[str, dict[str, Any]] = {}
    failed = False
    with database(args.database_url, "langmem-citus-bench-") as single:
        sides = {"single server": single, "Citus, 2 workers": citus_database(server, name)}
        try:
            for side, uri in sides.items():
                r: dict[str, Any] = {}
                index, r["kib"] = fill(uri, args, texts, embeddings, side)
                r["big"] = read_path(uri, index, queries, BIG)
                r["small"] = read_path(uri, index, queries, small)
                log(f"{side}: read path done")
                for users in counts:
                    r[f"served{users}"] = served(uri, users, args, f"{run}{side[0]}")
                    log(f"{side}: {users} users served")
                with _env("LANGMEM_RLS", "1"):  # every transaction as langmem_app
                    r["served_rls"] = served(uri, most, args, f"{run}{side[0]}r")
                log(f"{side}: {most} users served as the app role")
                r["lifecycle"] = lifecycle(uri, index)
                log(f"{side}: lifecycle done")
                results[side] = r
            print(f"  {args.memories} memories: a large user of {args.big} (own index), "
                  f"users of {args.small_size}")
            print(f"  read path (load_memory + assemble_context), {args.queries} queries")
            for who, label in (("big", f"large user ({args.big})"),
                               ("small", f"small user ({args.small_size})")):
                for side, r in results.items():
                    print(f"    {label:<22} {side:<18} {_ms(r[who])}")
            for users in counts:
                print(f"  served turns, {users} user{'s' if users > 1 else ''}, "
                      f"{args.duration:.0f} s")
                rates = []
                for side, r in results.items():
                    s = r[f"served{users}"]
                    rates.append(_rate(s))
                    print(_served_row(side, s))
                    if n := len(s["latencies"]):  # what a turn costs each process
                        print("      CPU ms per turn: " + ", ".join(
                            f"{name} {1000 * sec / n:.2f}" for name, sec in s["cpu"].items()))
                    failed = failed or bool(s["errors"])
                if rates[0]:
                    print(f"    Citus / single turns/s: {rates[1] / rates[0]:.2f}x")
            print(f"  served turns, {most} users, as the app role (row-level security), "
                  f"{args.duration:.0f} s")
            rls_rates = []
            for side, r in results.items():
                s, base = r["served_rls"], _rate(r[f"served{most}"])
                rls_rates.append(_rate(s))
                print(_served_row(side, s) + f"  ({_rate(s) / base if base else 0.0:.2f}x its "
                      "turns without the role)")
                failed = failed or bool(s["errors"])
            if rls_rates[0]:
                print(f"    Citus / single turns/s: {rls_rates[1] / rls_rates[0]:.2f}x")
            print("  on disk (tables, indexes, TOAST; on Citus every shard): " + ", ".join(
                f"{side} {r['kib']:.1f} KiB per memory" for side, r in results.items()))
            capacity(results["Citus, 2 workers"][f"served{most}"], most,
                     results["Citus, 2 workers"]["kib"])
            print("  nightly lifecycle (every user, through the runner)")
            for side, r in results.items():
                users, seconds = r["lifecycle"]
                print(f"    {side:<18} {users} users in {seconds:.1f} s")
            if not args.skip_faults:
                failed = faults(sides["Citus, 2 workers"], args, run) or failed
        finally:
            drop_citus_database(server, name)
    return 1 if failed else 0


#: The machines the capacity model sizes: cores of each worker, and of the coordinator.
MODEL_CORES = 8
MODEL_WORKERS = (2, 4, 8, 16)
MODEL_MEMORIES = (1_000_000, 10_000_000, 100_000_000)


def capacity(served: dict[str, Any], users: int, kib: float) -> None:
    """The capacity model: what a turn cost each process here, as the bound it puts on
    turns/s when each runs on cores of its own, and the disk each worker needs. Checked
    first against this run: every process here shares this machine's cores."""
    turns = len(served["latencies"])
    if not turns or not served["elapsed"]:
        return
    per = {n: 1000 * sec / turns for n, sec in served["cpu"].items()}
    app, coordinator = per["client"], per["coordinator"]
    workers = sum(v for n, v in per.items() if n.startswith("worker"))
    cores = os.cpu_count() or 1
    print(f"  capacity model (CPU per served turn at {users} users; a bound, as each process "
          "gets cores of its own)")
    print(f"    CPU per turn: coordinator {coordinator:.1f} ms, workers {workers:.1f} ms "
          f"(all), app {app:.1f} ms")
    print(f"    this run, all on {cores} cores: {1000 * cores / (app + coordinator + workers):.0f}"
          f" turns/s predicted, {turns / served['elapsed']:.0f} measured")
    print(f"    a coordinator of {MODEL_CORES} cores: at most "
          f"{1000 * MODEL_CORES / coordinator:.0f} turns/s; an app core: "
          f"{1000 / app:.0f} turns/s")
    for n in MODEL_WORKERS:
        bound = 1000 * n * MODEL_CORES / workers
        disk = ", ".join(f"{m / 1e6:g}M memories {m * kib / n / 2**20:.0f} GiB"
                         for m in MODEL_MEMORIES)
        print(f"    {n:>2} workers of {MODEL_CORES} cores: at most {bound:,.0f} turns/s "
              f"({bound * 60:,.0f} users at a turn a minute); per worker: {disk}")


def faults(uri: str, args: argparse.Namespace, run: str) -> bool:
    """The faults under load; prints them; whether something was lost or leaked."""
    f = Faults(uri, args)
    got = asyncio.run(_faulted_turns(uri, args, run, f))
    if f.error is not None:
        print(f"  faults: the fault thread failed: {type(f.error).__name__}: {f.error}")
        return True
    lost, crossed = check_rows(uri, run, got["ok"])
    down = f.down or (0.0, 0.0)
    grace = 5.0  # the pool's connections to the worker reopen on their next use
    during = sum(1 for t in got["errors"] if down[0] <= t <= down[1] + grace)
    other = len(got["errors"]) - during
    after = sum(1 for *_, t in got["ok"] if t > down[1])
    print(f"  faults under load: {args.fault_users} users for {args.fault_duration:.0f} s, "
          "a shard group moved, then a worker stopped and started")
    print(f"    turns ok {len(got['ok'])}, errors while the worker was down {during}, "
          f"errors otherwise {other}, ok after recovery {after}")
    print(f"    lost turns {len(lost)}, cross-user rows {crossed}"
          + (f"  (first error: {got['first'][0]})" if got["first"] else ""))
    for user, _, t in lost:  # when the client saw it succeed, against the faults
        print(f"    lost: {user}'s turn acknowledged " + ", ".join(
            f"{t - at:+.1f} s from '{what}'" for what, at in f.events))
    if got["at_exit"]:
        print(f"    the app's exit (draining extraction) failed: {got['at_exit'][0]}")
    return bool(lost or crossed or other or not after or got["at_exit"])


if __name__ == "__main__":
    raise SystemExit(main())
