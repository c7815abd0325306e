"""``langmem-layer calibrate LABELLED_FILE``: derive a calibration profile from labelled
queries and say what it would change, and by how much.

The labelled file is LoCoMo JSON or evaluation fixtures with ``retrieve`` expectations
(``langmem_layer.calibration.labelled``). Its conversations are split: the profile is
chosen on the calibration part and its figure reported on the held-out part, beside the
figure of the settings the library would use today (the embedder's profile).

The search is one coordinate at a time over a small grid (``GRID``): from today's
settings, each value of one knob is tried with the others fixed and the best kept (ties
keep the current value), knob after knob, twice over — about 20 recall passes over the
calibration questions instead of the grid's 72 combinations.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langmem_layer.calibration.labelled import LabelledQuery, load_labelled, measure
from langmem_layer.errors import ConfigurationError
from langmem_layer.settings import MemorySettings, RankingWeights
from langmem_layer.settings.calibration import profile_for

__all__ = ["GRID", "Calibration", "add_arguments", "calibrate", "handle"]

#: Knob -> values tried. ``floor`` sets both similarity floors; ``recency`` the weight.
GRID: dict[str, tuple[float, ...]] = {
    "rrf_k": (5, 10, 60),
    "floor": (0.3, 0.5, 0.7),
    "recency": (0.0, 0.1),
    "candidates_per_source": (20, 40),
}


def _knobs(s: MemorySettings) -> dict[str, float]:
    return {"rrf_k": s.rrf_k, "floor": s.similarity_floor, "recency": s.weights.recency,
            "candidates_per_source": s.candidates_per_source}


def _values(knobs: dict[str, float]) -> dict[str, Any]:
    """``MemorySettings`` fields of a point of the grid (explicit: no profile applies)."""
    return {"rrf_k": int(knobs["rrf_k"]), "similarity_floor": knobs["floor"],
            "episodic_similarity_floor": knobs["floor"],
            "weights": RankingWeights(recency=knobs["recency"]),
            "candidates_per_source": int(knobs["candidates_per_source"])}


@dataclass
class Calibration:
    """What calibration found.

    Attributes:
        current: Knobs of the settings used today (the embedder's profile).
        chosen: Knobs chosen on the calibration split.
        tried: Every point tried (knobs, recall@k on the calibration split).
        calib_current / calib_chosen: recall@k of each on the calibration split.
        heldout_current / heldout_chosen: the same on the held-out split (None: empty).
    """

    k: int
    current: dict[str, float]
    chosen: dict[str, float]
    tried: list[tuple[dict[str, float], float]] = field(default_factory=list)
    calib_current: float = float("nan")
    calib_chosen: float = float("nan")
    heldout_current: float | None = None
    heldout_chosen: float | None = None

    @property
    def settings(self) -> dict[str, Any]:
        """The chosen profile as ``MemorySettings`` keyword values (JSON-ready)."""
        v = _values(self.chosen)
        v["weights"] = {"recency": self.chosen["recency"]}
        return v


def calibrate(store: Any, paths: Sequence[Path], *, k: int = 10,
              calib: Sequence[str] | None = None, base: MemorySettings | None = None,
              show: bool = True) -> Calibration:
    """Choose retrieval settings on the calibration split; report on the held-out one.

    Args:
        store: A store with an embedding index; the labelled users are deleted after.
        paths: One LoCoMo JSON file, or fixture files/directories.
        k: recall@k (fixtures: hit@k) is what is maximised.
        calib: The calibration conversations (default: the first two fifths).
        base: The settings of today (default: the library's for the store's embedder).
        show: Progress bars on standard error.
    """
    from langmem_layer.facade import MemoryLayer

    writer = MemoryLayer(store, settings=base)
    current = _knobs(writer.settings)
    result = Calibration(k, dict(current), dict(current))

    def layer(knobs: dict[str, float]) -> Any:
        fields = {**writer.settings.model_dump(), **_values(knobs)}
        return MemoryLayer(store, settings=MemorySettings.model_validate(fields),
                           extractor=writer.extractor)

    def score(knobs: dict[str, float], queries: Sequence[LabelledQuery], desc: str) -> float:
        return measure(layer(knobs), queries, k, desc=desc, show=show).mean

    data = load_labelled(writer, paths, "calib", calib, show=show)
    try:
        if not data.queries:
            raise ConfigurationError(f"{data.name}: the calibration split has no labelled "
                                     "queries (LoCoMo questions or fixture 'retrieve' probes)")
        seen: dict[tuple[float, ...], float] = {}

        def at(knobs: dict[str, float]) -> float:
            key = tuple(knobs[n] for n in GRID)
            if key not in seen:
                seen[key] = score(knobs, data.queries, f"calibrate {key}")
                result.tried.append((dict(knobs), seen[key]))
            return seen[key]

        result.calib_current = at(current)
        best = dict(current)
        for _ in range(2):
            for name, values in GRID.items():
                for value in values:
                    trial = {**best, name: value}
                    if at(trial) > at(best) + 1e-9:
                        best = trial
        result.chosen = best
        result.calib_chosen = at(best)
    finally:
        data.cleanup(writer)
    held = load_labelled(writer, paths, "heldout", calib, show=show)
    try:
        if held.queries:
            result.heldout_current = score(current, held.queries, "held-out, today")
            result.heldout_chosen = score(result.chosen, held.queries, "held-out, chosen")
    finally:
        held.cleanup(writer)
    return result


def render(c: Calibration) -> str:
    """What calibration would change and by how much, as text."""
    lines = [f"recall@{c.k} on the calibration split for each setting tried:",
             f"  {'rrf_k':>6} {'floor':>6} {'recency':>8} {'cands':>6}  recall"]
    for knobs, value in c.tried:
        lines.append(f"  {knobs['rrf_k']:>6g} {knobs['floor']:>6g} {knobs['recency']:>8g} "
                     f"{knobs['candidates_per_source']:>6g}  {value:.3f}")
    lines.append("")
    changes = [f"  {n}: {c.current[n]:g} -> {c.chosen[n]:g}" for n in GRID
               if c.current[n] != c.chosen[n]]
    lines.append("would change:" if changes else "would change nothing: today's settings "
                 "are the best of the grid on the calibration split")
    lines += changes
    lines.append(f"recall@{c.k}, calibration split: {c.calib_current:.3f} today -> "
                 f"{c.calib_chosen:.3f} ({c.calib_chosen - c.calib_current:+.3f})")
    if c.heldout_current is not None and c.heldout_chosen is not None:
        lines.append(f"recall@{c.k}, held-out split:    {c.heldout_current:.3f} today -> "
                     f"{c.heldout_chosen:.3f} ({c.heldout_chosen - c.heldout_current:+.3f})")
    else:
        lines.append("held-out split: empty (nothing to report the profile on)")
    lines.append("profile (MemorySettings values; `eval --settings FILE` takes them as JSON):")
    lines.append("  " + json.dumps(c.settings))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``calibrate``'s arguments."""
    parser.add_argument("paths", nargs="+", metavar="LABELLED_FILE",
                        help="a LoCoMo JSON file, or fixture files/directories with "
                        "'retrieve' expectations")
    parser.add_argument("--k", type=int, default=10, help="maximise recall@k (default 10)")
    parser.add_argument("--split", default=None, metavar="IDS",
                        help="comma-separated conversations (LoCoMo sample ids or fixture "
                        "names) to calibrate on; the rest is held out (default: the first "
                        "two fifths)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def handle(args: argparse.Namespace, ctx: Any) -> int:
    """Run ``calibrate`` on the command's store."""
    paths = [Path(p) for p in args.paths]
    for p in paths:
        if not p.exists():
            raise ConfigurationError(f"No labelled file at {p}")
    ctx.store.setup()
    calib = [c.strip() for c in args.split.split(",") if c.strip()] if args.split else None
    result = calibrate(ctx.store, paths, k=args.k, calib=calib, show=not args.no_progress)
    if args.json:
        print(json.dumps({"k": result.k, "profile_today": profile_for(
            getattr(ctx.store, "model_id", None)).name, "current": result.current,
            "chosen": result.chosen, "settings": result.settings,
            "calib": {"today": result.calib_current, "chosen": result.calib_chosen},
            "heldout": {"today": result.heldout_current, "chosen": result.heldout_chosen},
            "tried": [{"knobs": kn, "recall": v} for kn, v in result.tried]}, indent=2))
    else:
        print(render(result))
    return 0
