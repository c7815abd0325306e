"""Benchmark: langmem_layer's PostgresMemoryStore against LangGraph's PostgresStore.

One run, one machine, one embedded PostgreSQL 18 + pgvector server, the same data:

* put throughput (items/s) when loading through ``store.batch([PutOp, ...])`` in
  chunks (500 by default, the same for every store);
* search latency p50 / p95 (ms) of a vector search inside ONE user's namespace,
  ``search(("memories", user_id), query=..., limit=10)``, at every size (10k and
  100k memories in total by default, spread over 100 users);
* the fraction of ``limit`` actually returned (mean count / 10), and recall@10 against
  an exact top-10 computed with numpy over that user's vectors;
* the same latencies for our hybrid ``RecallOp`` (vector + full-text + refs + pinned in
  one SQL round trip).

The anchor is LangGraph's PostgresStore with its default configuration (HNSW index).
Its exact-search configuration (``ann_index_config={"kind": "flat"}``: no ANN index)
is measured too, in a second database of the same server, because its tables
(``store``/``store_vectors``) cannot hold both configurations at once.

Every store stores the same values: typed memories (a ``MemoryRecord`` value) under
``("memories", user_id, "work")``; every store embeds the ``content`` field. All vectors
are computed ONCE before anything is timed; every store gets the same cached embedder
(a dict text -> vector), so embedding cost neither dominates nor differs.

Run:  .venv/bin/python benchmarks/store_bench.py  [--sizes 10000,100000] [--users 100]
      [--queries 100] [--embedder {hash,minilm}] [--data-dir DIR] [--explain]
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from common import Log, add_noise_option, header, percentile
from langgraph.store.base import BaseStore, PutOp, SearchOp
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.base import PLACEHOLDER
from psycopg.conninfo import make_conninfo
from tqdm import tqdm
from workload import DIMS, CachedEmbeddings, HashEmbedder, MiniLMEmbedder, TextGen, embed_all

from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.ops import RecallOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, MemoryRecord

DEFAULT_DATA_DIR = "/tmp/helper_bench/pgdata"
DB_MAIN = "store_bench"  # ours + PostgresStore (HNSW): their tables coexist
DB_FLAT = "store_bench_flat"  # PostgresStore with kind="flat" (exact scan)
LIMIT = 10
SCOPE = "work"
SEED = 20240611
WARMUP = 20
VALIDATE = 5
OURS, HNSW, FLAT = "langmem_layer", "PostgresStore", "PostgresStore flat"

# --------------------------------------------------------------------------------------
# Measurement helpers.
# --------------------------------------------------------------------------------------


@dataclass
class Stats:
    """Latencies and result quality of one store at one size."""

    lat_ms: list[float] = field(default_factory=list)
    returned: list[int] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    put_rate: float | None = None
    denom: int = LIMIT

    def pct(self, q: float) -> float:
        return percentile(self.lat_ms, q)

    @property
    def frac(self) -> float:
        return float(np.mean(self.returned)) / self.denom if self.returned else float("nan")

    @property
    def mean_recall(self) -> float:
        return float(np.mean(self.recall)) if self.recall else float("nan")




def user_id(u: int) -> str:
    return f"u{u:03d}"


def item_key(i: int) -> str:
    return f"m{i:06d}"


def chunks(lo: int, hi: int, size: int) -> Iterator[range]:
    for start in range(lo, hi, size):
        yield range(start, min(hi, start + size))


def load(stores: dict[str, BaseStore], values: list[dict[str, Any]], users: int, lo: int,
         hi: int, chunk: int) -> dict[str, float]:
    """Put items ``lo..hi-1`` into every store, chunk by chunk.

    Each chunk goes to every store in turn (the order alternates between chunks), so a
    slow moment of a shared machine hits all stores alike. Returns, per store, the
    seconds spent inside ``store.batch``.
    """
    spent = dict.fromkeys(stores, 0.0)
    names = list(stores)
    with tqdm(total=(hi - lo) * len(stores), desc=f"put {lo}->{hi}", unit="item",
              file=sys.stderr, disable=None, leave=False) as bar:
        for n, r in enumerate(chunks(lo, hi, chunk)):
            ops = [PutOp(("memories", user_id(i % users), SCOPE), item_key(i), values[i])
                   for i in r]
            for name in names if n % 2 == 0 else names[::-1]:
                t0 = time.perf_counter()
                stores[name].batch(ops)
                spent[name] += time.perf_counter() - t0
                bar.update(len(ops))
    return spent


def exact_recall(keys: list[str], u: int, qv: np.ndarray, vectors: np.ndarray, users: int,
                 size: int, k: int = LIMIT) -> float:
    """Fraction of the exact top-k (this user's items, cosine) found in ``keys``.

    Ties are honoured: a returned item counts when its exact similarity reaches the
    k-th best (minus float32 noise).
    """
    idx = np.arange(u, size, users)
    if idx.size == 0:
        return 1.0
    sims = vectors[idx] @ qv
    k = min(k, idx.size)
    kth = np.partition(sims, -k)[-k]
    good = 0
    for key in keys[:k]:
        i = int(key[1:])
        if i % users == u and i < size and float(vectors[i] @ qv) >= kth - 1e-4:
            good += 1
    return good / k


def ratio(a: float, b: float) -> str:
    if not (np.isfinite(a) and np.isfinite(b)) or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


# --------------------------------------------------------------------------------------
# EXPLAIN of a given search, for both stores.
# --------------------------------------------------------------------------------------


def our_sql(store: PostgresMemoryStore, op: Any) -> tuple[str, Any]:
    """The first SQL statement our store runs for ``op`` (with its vectors in place)."""
    plan = store.plan([op])
    docs, queries = plan.embedding_work()
    emb = store.embeddings
    assert emb is not None
    plan.deliver_embeddings(emb.embed_documents(docs), [emb.embed_query(q) for q in queries])
    query = plan.next_query()
    assert query is not None
    return query.sql, query.params


def anchor_sql(store: PostgresStore, op: SearchOp) -> tuple[str, Any]:
    """The statement LangGraph's PostgresStore runs for a search (private builder)."""
    queries, requests = store._prepare_batch_search_queries([(0, op)])
    sql, params = queries[0]
    assert store.embeddings is not None
    vec = store.embeddings.embed_documents([q for _, q in requests])[0] if requests else None
    return sql, [vec if p is PLACEHOLDER else p for p in params]


_VECTOR_LITERAL = re.compile(r"'\[[-0-9.e,]{100,}\]'")


def explain(conn: psycopg.Connection[Any], sql: str, params: Any) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params)
        return [_VECTOR_LITERAL.sub("'[query vector]'", r[0]) for r in cur.fetchall()]


# --------------------------------------------------------------------------------------
# The run.
# --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="PostgresMemoryStore vs LangGraph PostgresStore: put/s, search p50/p95."
    )
    p.add_argument("--sizes", default="10000,100000",
                   help="total memories at each measurement, increasing (default 10000,100000)")
    p.add_argument("--users", type=int, default=100, help="users (default 100)")
    p.add_argument("--queries", type=int, default=100,
                   help="timed queries per size and store (default 100)")
    p.add_argument("--embedder", choices=("hash", "minilm"), default="hash",
                   help="hash: deterministic random projection (fast); minilm: the local "
                   "all-MiniLM-L6-v2 (about 80 texts/s on 2 cores: use small sizes, e.g. "
                   "--sizes 2000,10000)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR,
                   help=f"embedded PostgreSQL data dir (default {DEFAULT_DATA_DIR}, wiped "
                   "first); the benchmark drops and recreates its own databases "
                   f"{DB_MAIN} and {DB_FLAT} in it")
    p.add_argument("--chunk", type=int, default=500, help="puts per batch (default 500)")
    p.add_argument("--flat", action=argparse.BooleanOptionalAction, default=True,
                   help="also measure PostgresStore with ann_index_config kind=flat "
                   "(exact scan, no HNSW) in a second database (default on)")
    p.add_argument("--explain", action="store_true",
                   help="print EXPLAIN (ANALYZE, BUFFERS) of each store's slowest query")
    add_noise_option(p)
    args = p.parse_args(argv)
    header("store_bench", allow_noisy=args.allow_noisy)
    try:
        args.size_list = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error("--sizes takes comma-separated integers")
    if not args.size_list or args.size_list != sorted(set(args.size_list)):
        p.error("--sizes must be distinct and increasing (the store grows between sizes)")
    if args.size_list[0] < args.users:
        p.error("every size must hold at least one memory per user")
    if args.users < 1 or args.queries < 1 or args.chunk < 1:
        p.error("--users, --queries and --chunk must be positive")
    return args


def server_info(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(
        """SELECT current_setting('server_version'),
                  (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
                  current_setting('shared_buffers'), current_setting('work_mem'),
                  current_setting('max_parallel_workers_per_gather'),
                  current_setting('jit'), current_setting('io_method', true),
                  current_setting('hnsw.ef_search', true)"""
    ).fetchone()
    assert row is not None
    ver, vec, sb, wm, par, jit, io, ef = row
    return (f"PostgreSQL {ver} + pgvector {vec}, shared_buffers={sb} work_mem={wm} "
            f"parallel_workers_per_gather={par} jit={jit} io_method={io} "
            f"hnsw.ef_search={ef or 40}")


def disk_mb(conn: psycopg.Connection[Any], tables: Sequence[str]) -> float:
    total = 0
    for t in tables:
        row = conn.execute("SELECT pg_total_relation_size(%s::regclass)", [t]).fetchone()
        total += row[0] if row else 0
    return total / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    log = Log()
    users, sizes, nq = args.users, args.size_list, args.queries
    n_max = sizes[-1]

    # -- data: texts, queries, vectors (computed once, before anything is timed) ------
    gen = TextGen(SEED)
    texts = gen.unique(n_max)
    queries = gen.unique(nq + WARMUP, exclude=set(texts))
    warm_queries, queries = queries[:WARMUP], queries[WARMUP:]
    compute: Callable[[Sequence[str]], np.ndarray]
    if args.embedder == "hash":
        compute = HashEmbedder()
        batch = 5000
    else:
        compute = MiniLMEmbedder()
        batch = 256
        log(f"embedding {n_max + nq + WARMUP} texts with MiniLM; at ~80 texts/s on 2 cores "
            f"that is ~{(n_max + nq + WARMUP) / 80 / 60:.1f} min")
    model = compute.name  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    vectors = embed_all(compute, texts, f"embed ({model})", batch)
    qvecs = embed_all(compute, warm_queries + queries, "embed queries", batch)
    embed_secs = time.perf_counter() - t0
    cache: dict[str, np.ndarray] = dict(zip(texts, vectors, strict=True))
    cache.update(zip(warm_queries + queries, qvecs, strict=True))
    qvecs = qvecs[WARMUP:]
    embedder = CachedEmbeddings(cache, compute, model)
    log(f"{n_max} texts + {nq + WARMUP} queries embedded with {model} in {embed_secs:.1f}s")

    now = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)
    values = [
        MemoryRecord(content=t, kind=Kind.PREFERENCE, layer=Layer.PROCEDURAL,
                     occurred_at=now, last_accessed_at=now).to_value()
        for t in texts
    ]

    # -- server and stores ----------------------------------------------------------------
    data_dir = Path(args.data_dir)
    if args.data_dir == DEFAULT_DATA_DIR and data_dir.exists():
        shutil.rmtree(data_dir)
    base_uri = embedded_uri(data_dir)
    dbs = [DB_MAIN, DB_FLAT] if args.flat else [DB_MAIN]
    with psycopg.connect(base_uri, autocommit=True) as admin:
        for db in dbs:
            admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {db}")
    main_uri = make_conninfo(base_uri, dbname=DB_MAIN)
    flat_uri = make_conninfo(base_uri, dbname=DB_FLAT)
    log(f"embedded PostgreSQL up in {data_dir}")

    index_fields = ["content"]
    rc = 0
    with ExitStack() as stack:
        ours = stack.enter_context(PostgresMemoryStore.from_conn_string(
            main_uri,
            index={"embed": embedder, "dims": DIMS, "model_id": model, "fields": index_fields},
        ))
        hnsw = stack.enter_context(PostgresStore.from_conn_string(
            main_uri, index={"embed": embedder, "dims": DIMS, "fields": index_fields},
        ))
        stores: dict[str, Any] = {OURS: ours, HNSW: hnsw}
        admin_conns = {OURS: stack.enter_context(psycopg.connect(main_uri, autocommit=True))}
        admin_conns[HNSW] = admin_conns[OURS]
        tables = {OURS: ["langmem_items", "langmem_embeddings", "langmem_links"],
                  HNSW: ["store", "store_vectors"], FLAT: ["store", "store_vectors"]}
        if args.flat:
            stores[FLAT] = stack.enter_context(PostgresStore.from_conn_string(
                flat_uri,
                index={"embed": embedder, "dims": DIMS, "fields": index_fields,
                       "ann_index_config": {"kind": "flat"}},
            ))
            admin_conns[FLAT] = stack.enter_context(psycopg.connect(flat_uri, autocommit=True))
        for store in stores.values():
            store.setup()
        info = server_info(admin_conns[OURS])

        print(f"store_bench  embedder={model}  users={users}  queries={nq} (after {users} warm-up)"
              f"  chunk={args.chunk}  limit={LIMIT}")
        print(f"  {info}")
        print("  anchor = LangGraph PostgresStore, default index (HNSW m=16 "
              "ef_construction=64); flat = the same with ann_index_config kind=flat"
              if args.flat else "  anchor = LangGraph PostgresStore, default index (HNSW)")
        header = (f"{'size':>7}  {'store':<22}{'put/s':>8}{'p50 ms':>9}{'p95 ms':>9}"
                  f"{'returned/limit':>16}{'recall@10':>11}")
        print(header)
        sys.stdout.flush()

        loaded = 0
        notes: list[str] = []
        plans: list[str] = []
        problems: list[str] = []
        for size in sizes:
            res = {name: Stats() for name in stores}
            # -- load ---------------------------------------------------------------
            for conn in {id(c): c for c in admin_conns.values()}.values():
                conn.execute("CHECKPOINT")
            spent = load(stores, values, users, loaded, size, args.chunk)
            for name, secs in spent.items():
                res[name].put_rate = (size - loaded) / secs
            log(f"loaded {loaded}->{size}: " + ", ".join(
                f"{n} {secs:.1f}s" for n, secs in spent.items()))
            loaded = size
            t0 = time.perf_counter()
            for name, conn in admin_conns.items():
                if name != HNSW:  # HNSW shares the main database connection
                    conn.execute("VACUUM ANALYZE")
                    conn.execute("CHECKPOINT")
            log(f"VACUUM ANALYZE + CHECKPOINT: {time.perf_counter() - t0:.1f}s")
            sizes_mb = {n: disk_mb(admin_conns[n], tables[n]) for n in stores}

            # -- validate: a query equal to a stored text finds that text first -----
            vrng = random.Random(SEED + size)
            top1 = {name: 0 for name in stores}
            recall_top1 = 0
            for i in vrng.sample(range(size), VALIDATE):
                ns = ("memories", user_id(i % users))
                for name, store in stores.items():
                    hits = store.search(ns, query=texts[i], limit=LIMIT)
                    if hits and hits[0].key == item_key(i) and (hits[0].score or 0) > 0.999:
                        top1[name] += 1
                cands = ours.batch([RecallOp(user_id(i % users), scopes=(SCOPE,),
                                             query=texts[i])])[0]
                if any(c.key == item_key(i) and c.ranks.get("vector") == 0 for c in cands):
                    recall_top1 += 1
            if top1[OURS] != VALIDATE or recall_top1 != VALIDATE:
                problems.append(f"size {size}: exact-text top-1 ours search "
                                f"{top1[OURS]}/{VALIDATE}, RecallOp {recall_top1}/{VALIDATE}")

            # -- search latency: warm-up, then the same queries on every store ------
            qrng = random.Random(SEED + 7 * size)
            q_users = [qrng.randrange(users) for _ in queries]
            for u in range(users):  # warm-up: one query per user on every store
                for store in stores.values():
                    store.search(("memories", user_id(u)), query=warm_queries[u % WARMUP],
                                 limit=LIMIT)
            leaks = 0
            names = list(stores)
            for j, (q, u) in enumerate(zip(queries, q_users, strict=True)):
                order = names if j % 2 == 0 else names[::-1]  # alternate who goes first
                for name in order:
                    store = stores[name]
                    t0 = time.perf_counter()
                    hits = store.search(("memories", user_id(u)), query=q, limit=LIMIT)
                    res[name].lat_ms.append((time.perf_counter() - t0) * 1000)
                    res[name].returned.append(len(hits))
                    keys = [h.key for h in hits]
                    res[name].recall.append(
                        exact_recall(keys, u, qvecs[j], vectors, users, size))
                    leaks += sum(h.namespace != ("memories", user_id(u), SCOPE) for h in hits)
                    if name == OURS and any(
                        (a.score or 0) < (b.score or 0) - 1e-9
                        for a, b in itertools.pairwise(hits)
                    ):
                        problems.append(f"size {size}: our scores not descending for {q!r}")
            if leaks:
                problems.append(f"size {size}: {leaks} results outside the user's namespace")

            # -- RecallOp (ours only): vector + full-text + refs + pinned --------------
            rec = Stats(denom=RecallOp._field_defaults["per_source"])
            for u in range(users):
                ours.batch([RecallOp(user_id(u), scopes=(SCOPE,),
                                     query=warm_queries[u % WARMUP])])
            for j, (q, u) in enumerate(zip(queries, q_users, strict=True)):
                t0 = time.perf_counter()
                cands = ours.batch([RecallOp(user_id(u), scopes=(SCOPE,), query=q)])[0]
                rec.lat_ms.append((time.perf_counter() - t0) * 1000)
                vec = sorted((c for c in cands if "vector" in c.ranks),
                             key=lambda c: c.ranks["vector"])
                rec.returned.append(len(vec))
                rec.recall.append(exact_recall([c.key for c in vec], u, qvecs[j], vectors,
                                               users, size))
                if len(cands) < len(vec) or any(c.namespace[1] != user_id(u) for c in cands):
                    problems.append(f"size {size}: RecallOp returned another user's memory")

            # -- print this size ----------------------------------------------------
            def row(label: str, put: str, p50: str, p95: str, frac: str, rcl: str,
                    size: int = size) -> None:
                print(f"{size:>7}  {label:<22}{put:>8}{p50:>9}{p95:>9}{frac:>16}{rcl:>11}")

            for name, s in res.items():
                row(name, f"{s.put_rate:.0f}", f"{s.pct(50):.2f}", f"{s.pct(95):.2f}",
                    f"{s.frac:.2f}", f"{s.mean_recall:.2f}")
            for other in [n for n in (HNSW, FLAT) if n in res]:
                a, b = res[OURS], res[other]
                row("ours/" + ("anchor" if other == HNSW else "flat"),
                    ratio(a.put_rate or 0, b.put_rate or 0), ratio(a.pct(50), b.pct(50)),
                    ratio(a.pct(95), b.pct(95)), ratio(a.frac, b.frac),
                    ratio(a.mean_recall, b.mean_recall))
            row("langmem_layer RecallOp", "-", f"{rec.pct(50):.2f}", f"{rec.pct(95):.2f}",
                f"{rec.frac:.2f}", f"{rec.mean_recall:.2f}")
            sys.stdout.flush()
            notes.append(
                f"size {size}: {size // users} memories/user; exact-text top-1 "
                + ", ".join(f"{n} {top1[n]}/{VALIDATE}" for n in stores)
                + f", RecallOp {recall_top1}/{VALIDATE}; disk "
                + ", ".join(f"{n} {mb:.0f} MB" for n, mb in sizes_mb.items())
                + "; slowest search " + ", ".join(
                    f"{n} {max(s.lat_ms):.1f} ms" for n, s in res.items())
                + f", RecallOp {max(rec.lat_ms):.1f} ms"
            )

            # -- EXPLAIN the slowest query of each store ---------------------------------
            if args.explain:
                for name, s in [*res.items(), ("RecallOp", rec)]:
                    j = int(np.argmax(s.lat_ms))
                    q, uid = queries[j], user_id(q_users[j])
                    if name == "RecallOp":
                        sql, params = our_sql(ours, RecallOp(uid, scopes=(SCOPE,), query=q))
                        conn = admin_conns[OURS]
                    else:
                        op = SearchOp(("memories", uid), None, LIMIT, 0, q)
                        sql, params = (our_sql(ours, op) if name == OURS
                                       else anchor_sql(stores[name], op))
                        conn = admin_conns[name]
                    plans.append(f"--- size {size}, {name}, slowest query "
                                 f"({s.lat_ms[j]:.1f} ms timed): user {uid}, {q!r}")
                    plans.extend("    " + line for line in explain(conn, sql, params))

        print()
        legend = [
            f"put/s: items added to reach the size / seconds inside store.batch (chunks of "
            f"{args.chunk}, each chunk put into every store in turn).",
            f"p50/p95: wall ms of store.search(('memories', user), query=..., limit={LIMIT}), "
            "cached embed included, stores interleaved query by query.",
            f"returned/limit: mean hits / {LIMIT}. recall@10: share of the exact top-10 "
            "(numpy, cosine over that user's vectors) returned.",
            "ratios are ours/other: put/s > 1x and latency < 1x favour ours.",
            "RecallOp row: hybrid candidates for scope 'work'; returned/limit = vector "
            "candidates / per_source (40); recall@10 = its vector top-10.",
        ]
        print("\n".join(legend))
        for n in notes:
            print("  " + n)
        print(f"  embedder cache: {embedder.hits} hits, {embedder.misses} misses during the "
              f"run; embedding {n_max + nq + WARMUP} texts up front took {embed_secs:.1f}s")
        for p in problems:
            print(f"  VALIDATION FAILED: {p}")
            rc = 1
        if not problems:
            print("  validation: ours returned only the user's items, scores descending, "
                  "exact-text queries ranked their own text first")
        print(f"  wall time {log.elapsed():.0f}s")
        if plans:
            print()
            print("\n".join(plans))
    return rc


if __name__ == "__main__":
    sys.exit(main())
