"""``langmem-layer eval locomo PATH``: LoCoMo evidence recall@k through the public API,
against the vector-only baseline on the same embedder in the same run.

Every turn of the chosen conversations is written with ``MemoryLayer.remember(...,
thread_id=<session>)`` as a memory of its conversation's user; every question of
categories 1-4 is asked with ``MemoryLayer.recall``; the baseline asks the store's own
vector search (``store.search(namespace, query=...)``, what a plain LangGraph store
gives). The layer runs with the library's defaults for the store's embedder (its
calibration profile) unless ``eval --settings`` names others. The users written are
deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langmem_layer.calibration.labelled import (
    CATEGORIES,
    SPLITS,
    LabelledSet,
    Measure,
    load_locomo,
    locomo_units,
    measure,
    progress,
    split_units,
)
from langmem_layer.errors import ConfigurationError
from langmem_layer.types import memory_namespace

__all__ = ["LocomoReport", "add_arguments", "run_locomo", "run_suite"]


@dataclass
class LocomoReport:
    """One run: what was loaded, the layer's and the baseline's measures."""

    file: str
    split: str
    conversations: list[str]
    turns: int
    questions: int
    profile: str
    layer: Measure
    baseline: Measure
    ingest_seconds: float

    def json(self) -> dict[str, Any]:
        def one(m: Measure) -> dict[str, Any]:
            return {"recall": round(m.mean, 4),
                    "by_category": {CATEGORIES[c]: round(v, 4)
                                    for c, v in m.by_category().items()},
                    "p50_ms": round(m.percentile_ms(0.5), 1),
                    "p95_ms": round(m.percentile_ms(0.95), 1)}
        return {"file": self.file, "split": self.split, "conversations": self.conversations,
                "turns": self.turns, "questions": self.questions, "k": self.layer.k,
                "profile": self.profile, "ingest_seconds": round(self.ingest_seconds, 1),
                "layer": one(self.layer), "vector_baseline": one(self.baseline)}

    def table(self) -> str:
        k = self.layer.k
        cats = list(CATEGORIES)
        head = (f"{'':<34}{'R@' + str(k):>7}"
                + "".join(f"{CATEGORIES[c][:11]:>12}" for c in cats)
                + f"{'p50 ms':>8}{'p95 ms':>8}")
        lines = [f"LoCoMo {self.file} — split {self.split} ({', '.join(self.conversations)}): "
                 f"{self.turns} turns, {self.questions} questions; profile {self.profile}",
                 head, "-" * len(head)]
        for name, m in ((f"MemoryLayer.recall ({self.profile})", self.layer),
                        ("vector only (store.search)", self.baseline)):
            by = m.by_category()
            lines.append(f"{name[:34]:<34}{m.mean:>7.3f}"
                         + "".join(f"{by.get(c, float('nan')):>12.3f}" for c in cats)
                         + f"{m.percentile_ms(0.5):>8.1f}{m.percentile_ms(0.95):>8.1f}")
        lines.append(f"recall@{k} = |evidence ∩ top-{k} turns| / |evidence|, mean over "
                     f"questions; writing the turns took {self.ingest_seconds:.0f}s")
        return "\n".join(lines)


def _baseline(store: Any, data: LabelledSet, k: int, show: bool) -> Measure:
    out = Measure(k)
    with progress(len(data.queries), "vector only", show) as bar:
        for q in data.queries:
            t0 = time.perf_counter()
            found = store.search(memory_namespace(q.user, "work"), query=q.text, limit=k)
            out.seconds.append(time.perf_counter() - t0)
            out.scores.append(q.score([i.key for i in found], k))
            out.categories.append(q.category)
            bar.update()
    return out


def run_locomo(store: Any, path: Path, *, k: int = 10, split: str = "all",
               calib: Sequence[str] | None = None, sessions: int | None = None,
               settings: Any = None, show: bool = True) -> LocomoReport:
    """Run the benchmark on ``store`` (which must embed); see the module docstring.

    Args:
        store: A store with an embedding index (``PostgresMemoryStore``).
        path: A LoCoMo JSON file.
        k: The cut-off of recall@k.
        split: ``all``, ``calib`` (the calibration conversations) or ``heldout``.
        calib: The calibration conversations (default: the first two fifths).
        sessions: Only the first N sessions of each conversation.
        settings: ``MemorySettings`` (default: the library's, for the store's embedder).
        show: Progress bars on standard error.
    """
    from langmem_layer.layer import MemoryLayer
    from langmem_layer.settings.calibration import profile_for

    if not getattr(store, "model_id", None):
        raise ConfigurationError("eval locomo needs a store with an embedding index; "
                                 "open it with index='default' or an index config")
    units = split_units(locomo_units(path), split, calib)
    layer = MemoryLayer(store, settings=settings)
    t0 = time.perf_counter()
    data = load_locomo(layer, path, units, prefix=f"locomo-{uuid.uuid4().hex[:8]}-",
                       sessions=sessions, show=show)
    ingest = time.perf_counter() - t0
    try:
        mine = measure(layer, data.queries, k, desc="recall", show=show)
        base = _baseline(store, data, k, show)
    finally:
        data.cleanup(layer)
    chosen = layer.settings.calibration
    name = profile_for(store.model_id).name if chosen == "auto" else chosen
    return LocomoReport(path.name, split, units, data.turns, len(data.queries), name,
                        mine, base, ingest)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``eval locomo``'s flags."""
    group = parser.add_argument_group("eval locomo")
    group.add_argument("--k", type=int, default=10, help="recall@k cut-off (default 10)")
    group.add_argument("--split", choices=SPLITS, default="all",
                       help="LoCoMo conversations to run: all, calib (the first two fifths, "
                       "what `calibrate` tunes on) or heldout (the rest)")
    group.add_argument("--calib", default=None, metavar="IDS",
                       help="comma-separated sample ids of the calibration split")
    group.add_argument("--sessions", type=int, default=None, metavar="N",
                       help="only the first N sessions of each conversation")
    group.add_argument("--no-progress", action="store_true", help="no progress bars")


def run_suite(args: argparse.Namespace, ctx: Any, paths: Sequence[str]) -> int:
    """``langmem-layer eval locomo PATH``."""
    from langmem_layer.environment import settings_from_file

    if len(paths) != 1:
        raise ConfigurationError("eval locomo takes one LoCoMo JSON file, e.g. "
                                 "`langmem-layer eval locomo locomo-dev.json`")
    path = Path(paths[0])
    if not path.is_file():
        raise ConfigurationError(f"No LoCoMo file at {path}")
    ctx.store.setup()
    calib = [c.strip() for c in args.calib.split(",") if c.strip()] if args.calib else None
    settings = settings_from_file(args.settings)  # LANGMEM_* and --settings win over the profile
    report = run_locomo(ctx.store, path, k=args.k, split=args.split, calib=calib,
                        sessions=args.sessions, settings=settings,
                        show=not args.no_progress)
    print(json.dumps(report.json(), indent=2) if args.json else report.table())
    return 0
