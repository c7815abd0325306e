"""Benchmark: the latency of ``recall()`` and of the block's read on LoCoMo, the query's
embedding included, with the library's defaults and the local model.

The five conversations of ``../shared/data/locomo-dev.json`` are written once into the
embedded PostgreSQL in ``--data-dir`` (users ``bench-<sample id>``; kept for the next
run, so only the first run pays the ~6 minutes of writing); then every question of
categories 1-4 is asked, in file order, with

* ``MemoryLayer.recall(user, question)`` (limit ``recall_limit``; it reinforces), and
* ``MemoryLayer.context_block(user, question)`` (the block's read: ``block_memory_limit``
  ranked memories, rendered up to ``block_target_tokens``; no reinforcement),

each timed around the call. The embedder runs on one thread (a turn's query is one
short text; a second thread contends with PostgreSQL on two cores and lengthens the
tail). ``--passes`` asks the questions that many times and prints each pass's
percentiles beside those of all passes, so one figure shows its own run-to-run spread.

Run:  .venv/bin/python benchmarks/recall_latency.py [--data-dir DIR] [--questions N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from common import add_noise_option, header, percentile

from langmem_layer import MemoryLayer
from langmem_layer.calibration.labelled import load_locomo, locomo_units
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.sync import PostgresMemoryStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"
PREFIX = "bench-"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--data-dir", default="/tmp/langmem-recall-latency")
    p.add_argument("--questions", type=int, default=None, help="ask only the first N")
    p.add_argument("--passes", type=int, default=1, help="ask the questions this many times")
    add_noise_option(p)
    args = p.parse_args(argv)
    with PostgresMemoryStore.from_conn_string(embedded_uri(args.data_dir),
                                              index="default") as store:
        store.setup()
        layer = MemoryLayer(store)
        units = locomo_units(args.data)
        fresh = not store.list_namespaces(prefix=("memories", PREFIX + units[0]))
        if fresh:
            print("writing the conversations (once per data dir)...", file=sys.stderr)
        data = load_locomo(layer, args.data, units, prefix=PREFIX, show=True, write=fresh)
        queries = data.queries[: args.questions]
        layer.recall(queries[0].user, queries[0].text, now=queries[0].now)  # load the model
        header("recall_latency", allow_noisy=args.allow_noisy)
        passes: list[tuple[list[float], list[float]]] = []
        tokens: list[int] = []
        for _ in range(max(args.passes, 1)):
            recall_s, block_s = [], []
            for q in queries:
                t0 = time.perf_counter()
                layer.recall(q.user, q.text, now=q.now)
                recall_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                block = layer.context_block(q.user, q.text, now=q.now)
                block_s.append(time.perf_counter() - t0)
                tokens.append(block.tokens)
            passes.append((recall_s, block_s))
        print(f"  {len(queries)} questions over {data.turns} memories in 5 users, "
              f"{len(passes)} pass(es); settings: recall_limit {layer.settings.recall_limit}, "
              f"block_memory_limit {layer.settings.block_memory_limit}, block_target_tokens "
              f"{layer.settings.block_target_tokens}")
        for n, name in enumerate(("recall()", "context_block()")):
            if len(passes) > 1:
                for k, p_ in enumerate(passes, 1):
                    _line(f"{name} pass {k}", p_[n])
            _line(name if len(passes) == 1 else f"{name} all", [x for p_ in passes for x in p_[n]])
        print(f"  block tokens     p50 {percentile(tokens, 50):6.0f}     p95 "
              f"{percentile(tokens, 95):6.0f}")
    return 0


def _line(name: str, seconds: list[float]) -> None:
    ms = [1000 * x for x in seconds]
    print(f"  {name:<22} p50 {percentile(ms, 50):6.1f} ms  p95 {percentile(ms, 95):6.1f} ms"
          f"  max {max(ms):6.1f} ms   (the query's embedding included)")


if __name__ == "__main__":
    raise SystemExit(main())
