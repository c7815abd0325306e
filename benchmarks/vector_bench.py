"""Exact scan vs a per-user HNSW index, by user size: latency and recall against exact.

One user's memories grow through the sizes; at each size the same queries run as an
exact search, then through the user's own HNSW index (built at that size), and the
HNSW results are scored against the exact top-10. This is the measurement behind
`ANN_MIN_USER_VECTORS` (when a user gets an index) and `ANN_EF_SEARCH`.

    .venv/bin/python benchmarks/vector_bench.py [--sizes 1000,5000,20000,100000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import psycopg
from common import Log, add_noise_option, hashed_corpus, header, scratch_dir
from common import percentile as pct
from langgraph.store.base import PutOp, SearchOp
from tqdm import tqdm

from langmem_layer import Kind, Layer, MemoryRecord, PostgresMemoryStore
from langmem_layer.sql import vector as vsql
from langmem_layer.sql.vector import ANN_EF_SEARCH
from langmem_layer.store.core import ANN_MIN_USER_VECTORS
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.ops import IndexUserOp

USER = "big-user"
NOW = datetime(2026, 11, 18, tzinfo=UTC)


def value(text: str) -> dict:
    return MemoryRecord(content=text, kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                        occurred_at=NOW, last_accessed_at=NOW).to_value()


def timed_search(store: PostgresMemoryStore, queries: Sequence[str]) -> tuple[list[float],
                                                                              list[list[str]]]:
    lat, keys = [], []
    for q in queries:
        t0 = time.perf_counter()
        (found,) = store.batch([SearchOp(("memories", USER), None, 10, 0, q)])
        lat.append((time.perf_counter() - t0) * 1000)
        keys.append([i.key for i in found])
    return lat, keys





def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,5000,20000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--data-dir", default=None)
    add_noise_option(parser)
    args = parser.parse_args(argv)
    header("vector_bench", allow_noisy=args.allow_noisy)
    sizes = [int(s) for s in args.sizes.split(",")]
    log = Log()
    texts, queries, embedder, embeddings = hashed_corpus(11, sizes[-1], args.queries,
                                                         batch=2000)
    index = {"embed": embeddings, "dims": embedder.dims, "model_id": embedder.name}
    rows = []
    with scratch_dir(args.data_dir, "langmem-vector-bench-") as data_dir:
        uri = embedded_uri(data_dir)
        with PostgresMemoryStore.from_conn_string(uri, index=index) as store:
            store.setup()
            loaded = 0
            for size in sizes:
                with store.conn.cursor() as cur:  # a clean slate for the exact run
                    cur.execute("SELECT index_name FROM langmem_vector_indexes")
                    for (name,) in cur.fetchall():
                        cur.execute(f'DROP INDEX IF EXISTS "{name}"')
                    cur.execute("DELETE FROM langmem_vector_indexes")
                for lo in tqdm(range(loaded, size, 1000), desc=f"load {size}", file=sys.stderr,
                               leave=False):
                    store.batch([PutOp(("memories", USER, "work"), f"m{i}", value(texts[i]))
                                 for i in range(lo, min(size, lo + 1000))])
                loaded = size
                with psycopg.connect(uri, autocommit=True) as conn:
                    conn.execute("VACUUM ANALYZE langmem_embeddings")
                    conn.execute("VACUUM ANALYZE langmem_items")
                timed_search(store, queries[:10])  # warm-up
                exact_lat, exact_keys = timed_search(store, queries)
                t0 = time.perf_counter()
                store.batch([IndexUserOp(USER)])
                build = time.perf_counter() - t0
                timed_search(store, queries[:10])
                ann_lat, ann_keys = timed_search(store, queries)
                recall = statistics.mean(
                    len(set(a) & set(e)) / max(1, len(e)) for a, e in
                    zip(ann_keys, exact_keys, strict=True))
                returned = statistics.mean(len(k) for k in ann_keys) / 10
                rows.append((size, exact_lat, ann_lat, recall, returned, build))
                log(f"size {size}: index built in {build:.1f}s")
    print(f"vector_bench  one user, hash-{embedder.dims} vectors, {args.queries} queries, "
          f"limit 10, ef_search {ANN_EF_SEARCH}, index name e.g. "
          f"{vsql.index_name(USER, embedder.name)}")
    print("  vectors  exact p50  p95 ms   hnsw p50  p95 ms   hnsw/exact p50  recall@10  "
          "returned  build s")
    for size, ex, an, recall, returned, build in rows:
        print(f"  {size:>7}  {pct(ex, 50):>9.2f} {pct(ex, 95):>7.2f}   {pct(an, 50):>8.2f} "
              f"{pct(an, 95):>7.2f}   {pct(an, 50) / pct(ex, 50):>13.2f}x  {recall:>9.3f}  "
              f"{returned:>8.2f}  {build:>7.1f}")
    print(f"  current threshold ANN_MIN_USER_VECTORS = {ANN_MIN_USER_VECTORS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
