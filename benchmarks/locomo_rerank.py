"""Train the reranker (``langmem_layer/read/reranker.json``) and score it by leave one
conversation out.

Every turn of ``../shared/data/locomo-dev.json`` is written the way ``eval locomo`` writes
it (``load_locomo``: the speaker as subject, the session as thread); every question is
asked the way the block asks it (``block_inputs_flow``), and the candidates ranking is
given are kept. Offline, each question's candidates are ranked by the library with the
reranking stage off (``rerank_depth=0``); the first ``--depth`` get the library's own
features (``langmem_layer.read.rerank.features``) and the label "is evidence". A
logistic regression (L2, Newton steps, standardised inputs; numpy only) is trained:

* for each conversation, on the other four, and that conversation's questions are
  ranked with it: recall@10/@20, evidence in block (the library's block fill at its
  defaults), session recall_any@5 — held out, per category;
* on all five: the weights written with ``--write`` (what the package ships).

``--drop a,b`` zeroes features (the ablation of a part: trained and scored without it).
Figures print before (no reranker) and after, both held out. Unseen LoCoMo
conversations can be scored with ``--unseen FILE`` (a LoCoMo file; scored with the
weights trained on all five, never trained on).

``--ablation`` trains and scores, held out, without each group of features (``GROUPS``):
each group's held-out contribution. ``--windows`` scores windows of turns as candidates
(a hit with its neighbours in its session, as one), against the link walk alone.

Run:  .venv/bin/python benchmarks/locomo_rerank.py [--vector-cache FILE] [--write]
      [--drop names] [--depth 40] [--unseen FILE] [--ablation] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import statistics
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from common import add_noise_option, fresh_database, header
from langchain_core.embeddings import Embeddings

from langmem_layer import MemoryLayer
from langmem_layer.calibration.fit_reranker import features_of, fit, reorder
from langmem_layer.calibration.labelled import CATEGORIES, read_locomo
from langmem_layer.read import recall as rmod
from langmem_layer.read.block import build_context_block
from langmem_layer.read.rank import rank_candidates
from langmem_layer.read.recall import block_inputs_flow, block_memories
from langmem_layer.read.rerank import FEATURES
from langmem_layer.refs import extract_refs
from langmem_layer.settings import MemorySettings
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.tokens import get_token_counter
from langmem_layer.types import Kind, Layer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo-dev.json"
#: The ablation's groups of features (``--ablation``).
GROUPS = {
    "the temporal signals": ("asks_when", "names_time", "when_names_time", "in_window"),
    "the subject": ("subject", "other_subject"),
    "the strategies' ranks": ("vector", "keyword", "ref", "time", "link"),
    "relevance, place, cosine": ("relevance", "position", "similarity"),
}
WEIGHTS = ROOT / "langmem_layer" / "read" / "reranker.json"


class VectorCache(Embeddings):
    """The local model's vectors, kept in an npz file between runs (text -> vector)."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.model = path, None
        self.vectors: dict[str, Any] = {}
        if path is not None and path.exists():
            data = np.load(path)
            self.vectors = dict(zip(data["keys"].tolist(), data["vecs"], strict=True))

    @staticmethod
    def _h(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def ensure(self, texts: Sequence[str], desc: str = "") -> None:
        missing = list(dict.fromkeys(t for t in texts if self._h(t) not in self.vectors))
        if not missing:
            return
        if self.model is None:
            from langmem_layer.store.embedding.default_embedder import LocalEmbeddings

            self.model = LocalEmbeddings(batch_size=64)  # type: ignore[assignment]
        for t, v in zip(missing, self.model.embed_documents(missing),  # type: ignore[attr-defined]
                        strict=True):
            self.vectors[self._h(t)] = np.asarray(v, dtype=np.float32)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = list(self.vectors)
            np.savez(self.path, keys=np.array(keys),
                     vecs=np.stack([self.vectors[k] for k in keys]))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.ensure(texts)
        return [self.vectors[self._h(t)].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def dump(path: Path, cache: VectorCache, data_dir: str, keep: Path | None = None
         ) -> tuple[list[dict[str, Any]], Any]:
    """Write the file's turns; every question's candidates (what ranking is given).

    ``keep``: a pickle of the result, read instead when it exists (a later run with
    other features or drops asks nothing again)."""
    if keep is not None and keep.exists():
        with keep.open("rb") as f:
            return pickle.load(f)  # type: ignore[no-any-return]
    out = _dump(path, cache, data_dir)
    if keep is not None:
        with keep.open("wb") as f:
            pickle.dump(out, f)
    return out


def _dump(path: Path, cache: VectorCache, data_dir: str) -> tuple[list[dict[str, Any]], Any]:
    convs = read_locomo(path)
    cache.ensure([t.text for c in convs for t in c.turns], "embed turns")
    uri = fresh_database(data_dir, "locomo_rerank")
    index = {"embed": cache, "dims": 384, "model_id": "all-MiniLM-L6-v2"}
    captured: dict[str, Any] = {}
    original = rmod.rank_candidates

    def spy(candidates: Any, **kw: Any) -> Any:
        captured.update(cands=list(candidates), links=kw.get("links") or {},
                        names=tuple(kw.get("names") or ()))
        return original(candidates, **kw)

    rows = []
    with PostgresMemoryStore.from_conn_string(uri, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        # The candidates are what ranking is given: the reranker's own weights are not
        # needed (nor read) to collect them.
        st = MemoryLayer(store).settings.model_copy(update={"rerank_depth": 0})
        layer = MemoryLayer(store, settings=st)
        labels: dict[str, str] = {}
        for c in convs:
            for t in c.turns:
                item = layer.remember(c.sample_id, t.text, profile="work",
                                      kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                                      confidence=0.8, salience=0.5, refs=extract_refs(t.text),
                                      subject=t.speaker, thread_id=f"session-{t.session}",
                                      now=t.when)
                labels[item.key] = t.dia_id
        rmod.rank_candidates = spy  # type: ignore[assignment]
        try:
            for c in convs:
                for q in c.questions:
                    layer.run(block_inputs_flow(layer.env, c.sample_id, q.text, profile=None,
                                                now=c.asked_at))
                    rows.append({"conv": c.sample_id, "q": q.text, "cat": q.category,
                                 "ev": set(q.evidence), "now": c.asked_at, **captured,
                                 "labels": labels})
                print(f"asked {c.sample_id}", file=sys.stderr)
        finally:
            rmod.rank_candidates = original  # type: ignore[assignment]
    return rows, st


def prepare(rows: list[dict[str, Any]], st: MemorySettings, depth: int) -> None:
    """Each question's ranking without the reranker, its features and labels."""
    off = st.model_copy(update={"rerank_depth": 0})
    for row in rows:
        ranked = [r for r in rank_candidates(row["cands"], now=row["now"], settings=off,
                                             limit=100, links=row["links"],
                                             names=row["names"]) if not r.record.pinned]
        row["ranked"] = ranked
        row["X"] = features_of(ranked, row["q"], row["now"], depth=depth)
        row["y"] = [float(row["labels"].get(r.key) in row["ev"]) for r in ranked[:depth]]


def train(rows: Sequence[dict[str, Any]], drop: Sequence[str]) -> dict[str, Any]:
    """The weights trained on ``rows`` (``langmem_layer.calibration.fit_reranker.fit``)."""
    return fit([x for r in rows for x in r["X"]], [y for r in rows for y in r["y"]],
               drop=drop)


def score(rows: Sequence[dict[str, Any]], st: MemorySettings,
          model: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each question's figures, its ranking reordered by ``model`` (None: as ranked)."""
    counter = get_token_counter(st.encoding)
    env = SimpleNamespace(settings=st, counter=counter)
    out = []
    for row in rows:
        ranked = list(row["ranked"])
        if model is not None and row["X"]:
            ranked = reorder(ranked, row["X"], model)
        dias = [row["labels"].get(r.key) for r in ranked]
        ev = row["ev"]
        block = build_context_block(
            block_memories(env, ranked[: st.block_memory_limit]),  # type: ignore[arg-type]
            budget_tokens=st.context_budget_tokens, counter=counter,
            semantic_share=st.semantic_share, now=row["now"],
            target_tokens=st.block_target_tokens or None)
        placed = {row["labels"].get(k) for k in block.placements}
        seen: list[str] = []
        for r in ranked:
            thread = r.record.source.thread_id if r.record.source else None
            if thread and thread not in seen and len(seen) < 5:
                seen.append(thread)
        sessions = {"session-" + e.split(":")[0][1:] for e in ev}
        out.append({"conv": row["conv"], "cat": row["cat"],
                    "r10": len(ev & set(dias[:10])) / len(ev),
                    "r20": len(ev & set(dias[:20])) / len(ev),
                    "block": len(ev & placed) / len(ev), "tokens": block.tokens,
                    "any5": float(bool(sessions & set(seen)))})
    return out


def windows(rows: Sequence[dict[str, Any]], path: Path, st: MemorySettings) -> None:
    """Windows as candidates: each of the first ``n`` ranked hits (no reranker) brings the
    turns ``radius`` before and after it in its session into the block with it; ``n``
    chosen on four conversations, scored on the fifth (the block filled to
    ``block_target_tokens`` in rank order, the relevance floor on the hit)."""
    counter = get_token_counter(st.encoding)
    turns = {(c.sample_id, t.dia_id): counter.count(t.text) + 2
             for c in read_locomo(path) for t in c.turns}
    grid = [(0, 0), (3, 1), (5, 1), (10, 1)]

    def block(row: dict[str, Any], n: int, radius: int) -> float:
        placed: list[str] = []
        used = 0
        for i, r in enumerate(row["ranked"][: st.block_memory_limit]):
            dia = row["labels"].get(r.key)
            if dia is None or (r.relevance or 0) < st.block_min_relevance \
                    or used >= st.block_target_tokens:
                continue
            session, k = dia.split(":")
            group = ([f"{session}:{j}" for j in range(int(k) - radius, int(k) + radius + 1)]
                     if i < n else [dia])
            for g in group:
                cost = turns.get((row["conv"], g))
                if cost is None or g in placed or (
                        g != dia and used + cost > st.block_target_tokens):
                    continue
                placed.append(g)
                used += cost
        return len(row["ev"] & set(placed)) / len(row["ev"])

    scores = {g: [(row["conv"], block(row, *g)) for row in rows] for g in grid}

    def mean(g: tuple[int, int], conv: str | None = None, out: bool = False) -> float:
        """Over every conversation, or ``conv`` alone, or (``out``) all but ``conv``."""
        return statistics.fmean(v for c, v in scores[g]
                                if conv is None or (c != conv if out else c == conv))
    convs = list(dict.fromkeys(r["conv"] for r in rows))
    print("\nWindows (the first n hits with the turns around them; block filled in rank "
          "order): evidence in block")
    for g in grid:
        print(f"  n={g[0]:<3} radius {g[1]}: {mean(g):.3f}")
    held, none = [], []
    for conv in convs:
        best = max(grid, key=lambda g: mean(g, conv, out=True))
        held.append(mean(best, conv))
        none.append(mean((0, 0), conv))
        print(f"  held out {conv}: n={best[0]} chosen on the others, {held[-1]:.3f} "
              f"(no windows {none[-1]:.3f})")
    print(f"  mean of the held-out conversations: {statistics.fmean(held):.3f} "
          f"(no windows {statistics.fmean(none):.3f})")


def report(label: str, res: Sequence[dict[str, Any]]) -> None:
    def m(rs: Sequence[dict[str, Any]], k: str) -> float:
        return statistics.fmean(r[k] for r in rs) if rs else float("nan")
    convs = list(dict.fromkeys(r["conv"] for r in res))
    per = [m([r for r in res if r["conv"] == c], "block") for c in convs]
    cats = "  ".join(f"{CATEGORIES[c]} {m([r for r in res if r['cat'] == c], 'r10'):.3f}/"
                     f"{m([r for r in res if r['cat'] == c], 'block'):.3f}" for c in CATEGORIES)
    print(f"{label:<34} block {m(res, 'block'):.3f} (mean of conversations "
          f"{statistics.fmean(per):.3f})  R@10 {m(res, 'r10'):.3f}  R@20 {m(res, 'r20'):.3f}  "
          f"sess@5 {m(res, 'any5'):.3f}  tokens p50 "
          f"{statistics.median(r['tokens'] for r in res):.0f}")
    print(f"{'':<34} R@10/in block: {cats}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--unseen", type=Path, default=None,
                   help="a LoCoMo file of other conversations, scored, never trained on")
    p.add_argument("--data-dir", default="/tmp/langmem-locomo/pgdata")
    p.add_argument("--vector-cache", type=Path, default=None)
    p.add_argument("--depth", type=int, default=40)
    p.add_argument("--keep", type=Path, default=None, metavar="DIR",
                   help="keep each file's candidates in DIR (pickles) and reuse them")
    p.add_argument("--drop", default="", help="features to leave out, comma-separated")
    p.add_argument("--floor", type=float, default=None,
                   help="block_min_relevance to score the blocks with (default: the library's)")
    p.add_argument("--write", action="store_true", help=f"write {WEIGHTS.name}")
    p.add_argument("--windows", action="store_true",
                   help="also score windows of turns as candidates (leave one out)")
    p.add_argument("--ablation", action="store_true",
                   help="also train and score without each group of features (held out)")
    add_noise_option(p)  # accepted for the suite's sake; the run never waits (see header)
    args = p.parse_args(argv)
    # Accuracy figures only: a busy machine changes none of them, so it does not wait.
    header("locomo_rerank", wait_seconds=0, allow_noisy=True)
    print("(accuracy figures only: the machine's load does not change them)")
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR")
    drop = [n.strip() for n in args.drop.split(",") if n.strip()]
    unknown = sorted(set(drop) - set(FEATURES))
    if unknown:
        raise SystemExit(f"unknown features {unknown}; known: {list(FEATURES)}")
    cache = VectorCache(args.vector_cache)
    keep = (lambda f: args.keep / f"{f.stem}.candidates.pkl") if args.keep else (lambda f: None)
    rows, st = dump(args.data, cache, args.data_dir, keep(args.data))
    if args.floor is not None:
        st = st.model_copy(update={"block_min_relevance": args.floor})
    prepare(rows, st, args.depth)
    convs = list(dict.fromkeys(r["conv"] for r in rows))
    held: list[dict[str, Any]] = []
    for c in convs:
        model = train([r for r in rows if r["conv"] != c], drop)
        held += score([r for r in rows if r["conv"] == c], st, model)
    report("before (no reranker)", score(rows, st, None))
    report("after, held out (leave one out)", held)
    if args.ablation:
        print("\nAblation: each row trained and scored without one group of features, "
              "held out (leave one conversation out)")
        for name, group in GROUPS.items():
            res: list[dict[str, Any]] = []
            for c in convs:
                model = train([r for r in rows if r["conv"] != c], [*drop, *group])
                res += score([r for r in rows if r["conv"] == c], st, model)
            report(f"without {name}", res)
    if args.windows:
        windows(rows, args.data, st)
    final = train(rows, drop)
    print("weights (standardised):", ", ".join(
        f"{n} {w:+.2f}" for n, w in zip(FEATURES, final["weights"], strict=True)))
    if args.unseen is not None:
        unseen, _ = dump(args.unseen, cache, args.data_dir, keep(args.unseen))
        prepare(unseen, st, args.depth)
        report("unseen, before", score(unseen, st, None))
        report("unseen, after", score(unseen, st, final))
    if args.write:
        final["trained_on"] = f"{args.data.name}: {', '.join(convs)}; depth {args.depth}"
        WEIGHTS.write_text(json.dumps(final, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {WEIGHTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
