"""The read path with and without row-level security, side by side in one run.

One user holds `--big` memories (50k by default, the large-user path: their own HNSW
and full-text indexes) in a store of `--total` shared with users of `--small-size`.
Each timed turn runs `layer.load_memory` + `layer.assemble_context` (query embedding
excluded) through two stores on the same database: `rls=False` (the connection's own
role, a superuser here, which policies never restrict) and `rls=True` (every
transaction acts as `langmem_app`, bound to the user, under the policies). The two
alternate query by query, so the machine's drift hits both alike. Prints p50/p95 of
each, and the ratio, for the large user and for a small one; then the same for the
write path (``ingest`` of one turn with the rule extractor, inline: the lookup of an
identical memory, the thread's tail, the memory's insert and its links).

    .venv/bin/python benchmarks/rls_bench.py [--total 60000 --big 50000 --queries 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg
from common import add_noise_option, hashed_corpus, header
from common import percentile as pct
from langchain_core.messages import AIMessage, HumanMessage
from workload import BIG, load, owner

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.store.embedded import embedded_uri


def write(layer: MemoryLayer, user: str, text: str, thread: str) -> float:
    """One turn's extraction and apply (the rule extractor, inline): the write path."""
    t0 = time.perf_counter()
    layer.ingest(user, [HumanMessage(text), AIMessage("Noted.")], thread_id=thread)
    return (time.perf_counter() - t0) * 1000


def turn(layer: MemoryLayer, user: str, query: str) -> float:
    config = {"configurable": {"user_id": user, "thread_id": "bench"}}
    state = {"messages": [HumanMessage(query)]}
    t0 = time.perf_counter()
    out = layer.load_memory.invoke(state, config)
    layer.assemble_context.invoke({**state, **out}, config)
    return (time.perf_counter() - t0) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total", type=int, default=60_000)
    parser.add_argument("--big", type=int, default=50_000)
    parser.add_argument("--small-size", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=5000)
    parser.add_argument("--data-dir", default="/tmp/langmem-rls-bench")
    add_noise_option(parser)
    args = parser.parse_args(argv)
    header("rls_bench", allow_noisy=args.allow_noisy)
    texts, queries, embedder, embeddings = hashed_corpus(29, args.total, args.queries)
    uri = embedded_uri(Path(args.data_dir))
    index = {"embed": embeddings, "dims": embedder.dims, "model_id": embedder.name}
    with PostgresMemoryStore.from_conn_string(uri, index=index, rls=False) as plain:
        plain.setup()
        have = plain.conn.execute("SELECT count(*) FROM langmem_items").fetchone()[0]
        if have != args.total:
            plain.conn.execute("TRUNCATE langmem_items, langmem_embeddings, "
                               "langmem_context_vectors, langmem_links, "
                               "langmem_embedding_cache, langmem_vector_indexes, langmem_terms")
            load(plain, texts, args.big, args.small_size, args.chunk, "langmem_layer")
        plain.index_large_users()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
        with PostgresMemoryStore.from_conn_string(uri, index=index, rls=True) as secured:
            layers = {"off": MemoryLayer(plain, extractor=RuleExtractor(), extraction="inline"),
                      "on": MemoryLayer(secured, extractor=RuleExtractor(), extraction="inline")}
            small_user = owner(args.big, args.big, args.small_size)
            times: dict[tuple[str, str], list[float]] = {}
            writes: dict[tuple[str, str], list[float]] = {}
            run = time.time_ns()
            for user in (BIG, small_user):
                for n, q in enumerate(queries[:10] + queries):
                    for mode in (("off", "on") if n % 2 else ("on", "off")):
                        ms = turn(layers[mode], user, q)
                        if n >= 10:
                            times.setdefault((user, mode), []).append(ms)
                # the write path: a new memory each, in a thread of its own per turn
                for n, q in enumerate(queries[:10] + queries[:args.queries // 2]):
                    for mode in (("off", "on") if n % 2 else ("on", "off")):
                        ms = write(layers[mode], user, f"I moved to Porto in {q}",
                                   f"w{run}-{mode}-{n}")
                        if n >= 10:
                            writes.setdefault((user, mode), []).append(ms)
    print(f"rls_bench  total={args.total} memories, big user={args.big}, others "
          f"{args.small_size} each, {args.queries} queries per mode (alternating), "
          f"hash-{embedder.dims}, query embedding excluded, load_memory + assemble_context; "
          f"write: ingest of one turn (rule extractor, inline), {args.queries // 2} per mode")
    print(f"  {'user':<26} {'RLS off p50':>12} {'p95':>8} {'RLS on p50':>12} {'p95':>8} "
          f"{'ratio p50':>10} {'p95':>7}")
    rows = [(times, user, label) for user, label in ((BIG, f"large ({args.big})"),
                                                     (small_user, f"small ({args.small_size})"))]
    rows += [(writes, user, f"{label}, write") for _, user, label in rows]
    for table, user, label in rows:
        off, on = table[(user, "off")], table[(user, "on")]
        print(f"  {label:<26} {pct(off, 50):>12.2f} {pct(off, 95):>8.2f} {pct(on, 50):>12.2f} "
              f"{pct(on, 95):>8.2f} {pct(on, 50) / pct(off, 50):>9.2f}x "
              f"{pct(on, 95) / pct(off, 95):>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
