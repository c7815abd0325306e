"""``langmem-layer eval locomo PATH``: what the agent gets on LoCoMo, and how well the
defaults hold on conversations they were not tuned on.

Every turn of the chosen conversations is written with ``MemoryLayer.remember(...,
thread_id=<session>)`` as a memory of its conversation's user; every question of
categories 1-4 is asked the way ``load_memory`` / ``assemble_context`` ask it (the block's
recall, which does not reinforce, then the block). Reported per conversation and per
category:

* ``recall@k``: |evidence ∩ the k best-ranked memories| / |evidence|;
* session-level ``recall_any@5``: whether a session holding evidence is among the first
  five distinct sessions the ranking reaches (the figure other memory systems report);
* evidence in block: |evidence ∩ the memories the rendered block holds| / |evidence| —
  what the agent actually sees;
* block tokens, and their share of the conversation's tokens (every turn's text: what
  putting the whole history in the prompt would cost);
* the latency of the read, the query's embedding included.

The vector-only baseline (``store.search``, what a plain LangGraph store gives) runs on
the same embedder in the same run.

Cross-validation (two conversations or more): a small grid of settings (``GRID``:
the RRF constant, the block's token target and relevance floor) is scored on every
conversation. For each conversation, the setting with the most evidence in block at
most ``MAX_SHARE`` of the history's tokens on the *other* conversations is chosen
and scored on it. The held-out mean, its spread and its gap to the tuned-on mean tell
whether a setting generalises; a change that raises the tuned-on figure but not the
held-out mean is not an improvement. The users written are deleted afterwards.

Ablation (``--ablation``): each row of ``ABLATIONS`` changes one of the library's
settings (a retrieval strategy off, the block's target off, another keyword ranking)
and asks every question again on the same memories: what each part adds, measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any

from langmem_layer.calibration.labelled import (
    CATEGORIES,
    SPLITS,
    LabelledSet,
    Measure,
    load_locomo,
    locomo_units,
    progress,
    split_units,
)
from langmem_layer.errors import ConfigurationError
from langmem_layer.types import memory_namespace

__all__ = ["ABLATIONS", "GRID", "MAX_SHARE", "Fold", "LocomoReport", "Outcome", "add_arguments",
           "choose", "cross_validate", "run_locomo", "run_suite"]

#: The settings cross-validation chooses among. ``rrf_k`` changes the ranking (one read
#: per question per value); the block's settings only change what is rendered from it.
GRID: dict[str, tuple[Any, ...]] = {
    "rrf_k": (5, 20, 60),
    "block_target_tokens": (400, 600, 800, 1000, 1200),
    "block_min_relevance": (0.0, 0.2, 0.4),
}
_SHORT = {"block_target_tokens": "target", "block_min_relevance": "floor", "rrf_k": "k"}
#: The most of a conversation's tokens a block may cost (mean over questions).
MAX_SHARE = 0.05

#: The ablation's rows: one change each from the settings evaluated (name: what it is,
#: the settings it changes). Block settings in a row change the block it renders.
ABLATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "ten_best": ("block = recall's ten best, no target",
                 {"block_target_tokens": 0, "block_min_relevance": 0.0,
                  "block_memory_limit": 10}),
    "no_floor": ("no relevance floor", {"block_min_relevance": 0.0}),
    "no_links": ("no link walk (neighbours)", {"link_types": ()}),
    "no_context": ("no context strategy", {"context_candidates": 0}),
    "no_context_floor": ("no context similarity floor", {"context_similarity_floor": -1.0}),
    "no_time": ("no time window", {"temporal_window": False}),
    "no_refs": ("no query references", {"query_refs": False}),
    "no_keyword": ("keyword strategy weight 0", {"source_weights": {"keyword": 0.0}}),
    "cover_density": ("ts_rank_cd, not BM25", {"keyword_ranking": "cover_density"}),
    "names_embedded": ("the question's names embedded", {"embed_query_refs": True}),
    "no_subject_focus": ("no subject focus", {"subject_focus": 1.0}),
    "no_rerank": ("no reranking stage", {"rerank_depth": 0}),
}
#: Rows besides ``ABLATIONS``: the reranker trained on the other conversations (from the
#: ``no_rerank`` row's rankings) and scored on each one, so its contribution is held out.
_EXTRA_ROWS: dict[str, tuple[str, dict[str, Any]]] = {
    "rerank_held_out": ("reranker trained on the others (held out)", {})}
_BLOCK = ("block_target_tokens", "block_min_relevance")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question under one setting."""

    unit: str
    category: int | None
    recall: float
    block: float
    tokens: int
    share: float
    any5: float = float("nan")


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _tokens_p50(rows: Sequence[Outcome]) -> int:
    tokens = sorted(r.tokens for r in rows)
    return tokens[len(tokens) // 2] if tokens else 0


def _means(rows: Sequence[Outcome]) -> dict[str, float]:
    return {"recall": _mean([r.recall for r in rows]), "block": _mean([r.block for r in rows]),
            "share": _mean([r.share for r in rows]),
            "any5": _mean([r.any5 for r in rows if r.any5 == r.any5])}  # NaN: no sessions


def _any5(recalled: Sequence[Any], sessions: frozenset[str]) -> float:
    """1 when a session of ``sessions`` is among the first five distinct sessions of the
    ranking (``recalled`` in order), else 0; NaN for a question without sessions."""
    if not sessions:
        return float("nan")
    seen: list[str] = []
    for r in recalled:
        thread = r.record.source.thread_id if r.record.source else None
        if thread and thread not in seen:
            seen.append(thread)
            if len(seen) == 5:
                break
    return 1.0 if sessions & set(seen) else 0.0


@dataclass(frozen=True, slots=True)
class Fold:
    """One conversation held out: the setting chosen on the others, scored on it."""

    unit: str
    chosen: dict[str, Any]
    tuned: dict[str, float]
    held_out: dict[str, float]


def _key(setting: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(setting.items()))


def cross_validate(outcomes: Mapping[tuple[tuple[str, Any], ...], Sequence[Outcome]],
                   *, max_share: float = MAX_SHARE) -> list[Fold]:
    """Leave one conversation out: choose on the rest, score on the one left out.

    Args:
        outcomes: For each setting (a sorted tuple of ``(name, value)``), every
            question's ``Outcome``.
        max_share: The settings whose blocks cost more than this share of the tuning
            conversations' tokens (mean) are not chosen, unless none is cheaper.

    Returns:
        One ``Fold`` per conversation, in first-seen order; none with fewer than
        two conversations (nothing would be left to tune on).
    """
    units = list(dict.fromkeys(o.unit for rows in outcomes.values() for o in rows))
    if len(units) < 2:
        return []
    folds = []
    for held in units:
        best, tuned = choose(outcomes, max_share=max_share, leave_out=held)
        held_rows = [r for r in outcomes[best] if r.unit == held]
        folds.append(Fold(held, dict(best), tuned, _means(held_rows)))
    return folds


def choose(outcomes: Mapping[tuple[tuple[str, Any], ...], Sequence[Outcome]], *,
           max_share: float = MAX_SHARE, leave_out: str | None = None
           ) -> tuple[tuple[tuple[str, Any], ...], dict[str, float]]:
    """The setting with the most evidence in block whose blocks cost at most
    ``max_share`` of the history (mean; the best of all when none does), ties to the
    cheaper; on every conversation but ``leave_out``. Returns it and its means there."""
    scored = []
    for key, rows in outcomes.items():
        tune = _means([r for r in rows if r.unit != leave_out])
        scored.append((tune["share"] > max_share, -round(tune["block"], 6), tune["share"],
                       key, tune))
    _, _, _, best, tuned = min(scored, key=lambda t: t[:3])
    return best, tuned


@dataclass
class LocomoReport:
    """One run: the defaults' outcomes, the baseline, and the cross-validation."""

    file: str
    split: str
    conversations: list[str]
    turns: int
    questions: int
    profile: str
    k: int
    defaults: list[Outcome]
    settings: dict[str, Any]
    seconds: list[float]
    baseline: Measure
    folds: list[Fold] = field(default_factory=list)
    ingest_seconds: float = 0.0
    chosen_on_all: dict[str, Any] = field(default_factory=dict)
    #: The ablation's rows, in ``ABLATIONS`` order: name -> every question's outcome.
    ablation: dict[str, list[Outcome]] = field(default_factory=dict)
    #: Whether the turns were written with their speaker as ``subject``.
    subjects: bool = True

    def _latency(self) -> tuple[float, float]:
        m = Measure(self.k, seconds=self.seconds)
        return m.percentile_ms(0.5), m.percentile_ms(0.95)

    def summary(self) -> dict[str, Any]:
        """The cross-validated figures: held-out mean and spread, tuned-on mean, gap."""
        if not self.folds:
            return {}
        held = [f.held_out["block"] for f in self.folds]
        tuned = [f.tuned["block"] for f in self.folds]
        return {"held_out_block_mean": statistics.fmean(held),
                "held_out_block_sd": statistics.pstdev(held),
                "tuned_on_block_mean": statistics.fmean(tuned),
                "gap": statistics.fmean(tuned) - statistics.fmean(held),
                "held_out_recall_mean": statistics.fmean(f.held_out["recall"]
                                                         for f in self.folds),
                "held_out_share_mean": statistics.fmean(f.held_out["share"]
                                                        for f in self.folds)}

    def json(self) -> dict[str, Any]:
        def block(rows: Sequence[Outcome]) -> dict[str, Any]:
            tokens = sorted(r.tokens for r in rows)
            return {**{k: round(v, 4) for k, v in _means(rows).items()},
                    "tokens_p50": tokens[len(tokens) // 2] if tokens else None,
                    "tokens_p95": tokens[int(0.95 * len(tokens))] if tokens else None,
                    "questions": len(rows)}
        p50, p95 = self._latency()
        return {
            "file": self.file, "split": self.split, "conversations": self.conversations,
            "turns": self.turns, "questions": self.questions, "k": self.k,
            "profile": self.profile, "ingest_seconds": round(self.ingest_seconds, 1),
            "settings": self.settings, "subjects": self.subjects,
            "layer": {**block(self.defaults), "p50_ms": round(p50, 1), "p95_ms": round(p95, 1),
                      "by_category": {CATEGORIES[c]: block([r for r in self.defaults
                                                            if r.category == c])
                                      for c in CATEGORIES
                                      if any(r.category == c for r in self.defaults)},
                      "by_conversation": {u: block([r for r in self.defaults if r.unit == u])
                                          for u in self.conversations}},
            "vector_baseline": {"recall": round(self.baseline.mean, 4),
                                "by_category": {CATEGORIES[c]: round(v, 4) for c, v
                                                in self.baseline.by_category().items()},
                                "p50_ms": round(self.baseline.percentile_ms(0.5), 1),
                                "p95_ms": round(self.baseline.percentile_ms(0.95), 1)},
            "cross_validation": {
                "grid": {k: list(v) for k, v in GRID.items()}, "max_share": MAX_SHARE,
                "chosen_on_all": self.chosen_on_all,
                "folds": [{"held_out": f.unit, "chosen": f.chosen,
                           "tuned_on": {k: round(v, 4) for k, v in f.tuned.items()},
                           "held_out_figures": {k: round(v, 4) for k, v in f.held_out.items()}}
                          for f in self.folds],
                **{k: round(v, 4) for k, v in self.summary().items()}},
            "ablation": {name: {"change": {**ABLATIONS, **_EXTRA_ROWS}[name][1], **block(rows),
                                "multi_hop": block([r for r in rows if r.category == 1])}
                         for name, rows in self.ablation.items()},
        }

    def table(self) -> str:
        k = self.k
        lines = [f"LoCoMo {self.file} — split {self.split} ({', '.join(self.conversations)}): "
                 f"{self.turns} turns, {self.questions} questions; profile {self.profile}; "
                 f"block target {self.settings['block_target_tokens']} tokens, relevance "
                 f"floor {self.settings['block_min_relevance']}, rrf_k {self.settings['rrf_k']}"
                 + ("" if self.subjects else "; turns written without a subject")]
        head = (f"{'':<20}{'n':>5}{'R@' + str(k):>8}{'in block':>10}{'tokens p50':>12}"
                f"{'share':>8}{'sess@5':>8}")
        lines += ["", "The library's settings (evidence in block = what the agent sees)",
                  head, "-" * len(head)]

        def row(name: str, rows: Sequence[Outcome]) -> str:
            m = _means(rows)
            return (f"{name[:20]:<20}{len(rows):>5}{m['recall']:>8.3f}{m['block']:>10.3f}"
                    f"{_tokens_p50(rows):>12}{100 * m['share']:>7.1f}%{m['any5']:>8.3f}")
        lines.append(row("all", self.defaults))
        for c, name in CATEGORIES.items():
            rows = [r for r in self.defaults if r.category == c]
            if rows:
                lines.append(row(f"  {name}", rows))
        for u in self.conversations:
            lines.append(row(f"  {u}", [r for r in self.defaults if r.unit == u]))
        p50, p95 = self._latency()
        lines.append(f"read latency, the query's embedding included: p50 {p50:.1f} ms, "
                     f"p95 {p95:.1f} ms")
        lines.append(f"vector only (store.search): R@{k} {self.baseline.mean:.3f} "
                     f"(p50 {self.baseline.percentile_ms(0.5):.1f} ms)")
        if self.folds:
            lines += ["", f"Leave one conversation out: chosen on the others (most evidence in "
                      f"block at <= {100 * MAX_SHARE:.0f} % of their tokens), scored on it",
                      f"{'held out':<12}{'chosen':<34}{'tuned-on':>10}{'held-out':>10}"
                      f"{'R@' + str(k):>7}{'share':>8}"]
            for f in self.folds:
                chosen = " ".join(f"{_SHORT.get(n, n)}={v}" for n, v in f.chosen.items())
                lines.append(f"{f.unit:<12}{chosen[:33]:<34}{f.tuned['block']:>10.3f}"
                             f"{f.held_out['block']:>10.3f}{f.held_out['recall']:>7.3f}"
                             f"{100 * f.held_out['share']:>7.1f}%")
            s = self.summary()
            lines.append(f"evidence in block: held-out mean {s['held_out_block_mean']:.3f} "
                         f"(sd {s['held_out_block_sd']:.3f}), tuned-on mean "
                         f"{s['tuned_on_block_mean']:.3f}, gap {s['gap']:+.3f}")
            lines.append("chosen on every conversation: " + ", ".join(
                f"{n}={v}" for n, v in self.chosen_on_all.items()))
        else:
            lines.append("(cross-validation needs two conversations or more)")
        if self.ablation:
            lines += self._ablation_table()
        lines.append(f"writing the turns took {self.ingest_seconds:.0f}s")
        return "\n".join(lines)

    def _ablation_table(self) -> list[str]:
        k = self.k
        head = (f"{'change':<38}{'R@' + str(k):>7}{'in block':>10}{'multi-hop':>11}"
                f"{'m-h block':>11}{'tokens p50':>12}{'share':>8}")
        lines = ["", "Ablation: one change from these settings per row, the same memories "
                 "(multi-hop: R@k and in block)", head, "-" * len(head)]
        for label, rows in (("(these settings)", self.defaults),
                            *(({**ABLATIONS, **_EXTRA_ROWS}[n][0], r)
                              for n, r in self.ablation.items())):
            m = _means(rows)
            hop = _means([r for r in rows if r.category == 1])
            lines.append(f"{label[:37]:<38}{m['recall']:>7.3f}{m['block']:>10.3f}"
                         f"{hop['recall']:>11.3f}{hop['block']:>11.3f}"
                         f"{_tokens_p50(rows):>12}{100 * m['share']:>7.1f}%")
        return lines


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


def _history_tokens(layer: Any, data: LabelledSet) -> dict[str, int]:
    """Each user's tokens: every turn's text, as written."""
    return {user: sum(layer.env.counter.count(t) for t in texts)
            for user, texts in data.texts.items()}


#: The block settings of ``GRID``, rendered from each read.
_BLOCK_GRID = [dict(zip(("block_target_tokens", "block_min_relevance"), v, strict=True))
               for v in product(GRID["block_target_tokens"], GRID["block_min_relevance"])]


def _score_all(layer: Any, data: LabelledSet, k: int, prefix: str, show: bool, desc: str,
               blocks: Sequence[Mapping[str, Any]], collect: list[Any] | None = None
               ) -> tuple[dict[tuple[tuple[str, Any], ...], list[Outcome]], list[float]]:
    """Every question under every block setting of ``blocks`` for ``layer``'s ranking.

    One read per question (what ``assemble_context`` is given, uncut); the block of each
    setting is cut and rendered from it as the layer would. The first element of the
    result is keyed by the block settings alone. ``collect`` gets each question and its
    ranking (pinned memories left out).
    """
    from langmem_layer.read.recall import block_inputs_flow, block_memories, context_block

    history = _history_tokens(layer, data)
    envs = [(b, replace(layer.env, settings=layer.settings.model_copy(update=b)))
            for b in blocks]
    uncut = replace(layer.env, settings=layer.settings.model_copy(
        update={"block_min_relevance": 0.0, "block_target_tokens": 0}))
    out: dict[tuple[tuple[str, Any], ...], list[Outcome]] = {_key(b): [] for b in blocks}
    seconds: list[float] = []
    with progress(len(data.queries), desc, show) as bar:
        for q in data.queries:
            t0 = time.perf_counter()
            inputs = layer.run(block_inputs_flow(uncut, q.user, q.text, profile=q.profile,
                                                 now=q.now))
            seconds.append(time.perf_counter() - t0)
            ranked = [r.key for r in inputs.recalled if not r.record.pinned]
            if collect is not None:
                collect.append((q, [r for r in inputs.recalled if not r.record.pinned]))
            recall = q.score(ranked, k)
            any5 = _any5([r for r in inputs.recalled if not r.record.pinned], q.sessions)
            for b, env in envs:
                block = context_block(env, block_memories(env, inputs.recalled), now=q.now)
                placed = list(block.placements)
                out[_key(b)].append(Outcome(
                    q.user.removeprefix(prefix), q.category, recall,
                    q.score(placed, len(placed)) if placed else 0.0, block.tokens,
                    block.tokens / max(1, history[q.user]), any5))
            bar.update()
    return out, seconds


def run_locomo(store: Any, path: Path, *, k: int = 10, split: str = "all",
               calib: Sequence[str] | None = None, sessions: int | None = None,
               settings: Any = None, cross_validation: bool = True,
               ablation: bool = False, show: bool = True, subjects: bool = True
               ) -> LocomoReport:
    """Run the benchmark on ``store`` (which must embed); see the module docstring.

    Args:
        store: A store with an embedding index (``PostgresMemoryStore``).
        path: A LoCoMo JSON file.
        k: The cut-off of recall@k.
        split: ``all``, ``calib`` (the calibration conversations) or ``heldout``.
        calib: The calibration conversations (default: the first two fifths).
        sessions: Only the first N sessions of each conversation.
        settings: ``MemorySettings`` (default: the library's, for the store's embedder).
        cross_validation: Also score ``GRID`` and cross-validate it (one more read
            per question per ``rrf_k`` value).
        ablation: Also score each row of ``ABLATIONS`` (one more read per question
            per row).
        show: Progress bars on standard error.
        subjects: Write each turn with its speaker as ``subject`` (``False``: none, what
            a deployment whose messages carry no names gets).
    """
    from langmem_layer.facade import MemoryLayer
    from langmem_layer.settings import MemorySettings
    from langmem_layer.settings.calibration import profile_for

    if not getattr(store, "model_id", None):
        raise ConfigurationError("eval locomo needs a store with an embedding index; "
                                 "open it with index='default' or an index config")
    units = split_units(locomo_units(path), split, calib)
    layer = MemoryLayer(store, settings=settings)
    prefix = f"locomo-{uuid.uuid4().hex[:8]}-"
    t0 = time.perf_counter()
    data = load_locomo(layer, path, units, prefix=prefix, sessions=sessions, show=show,
                       subjects=subjects)
    ingest = time.perf_counter() - t0
    st = layer.settings
    mine = {n: getattr(st, n) for n in GRID}
    own_block = {n: mine[n] for n in ("block_target_tokens", "block_min_relevance")}
    # The layer's own block settings are rendered too when off the grid (not chosen from).
    blocks = _BLOCK_GRID if own_block in _BLOCK_GRID else [*_BLOCK_GRID, own_block]
    try:
        own, seconds = _score_all(layer, data, k, prefix, show, "block", blocks)
        defaults = own[_key(own_block)]
        folds: list[Fold] = []
        chosen_on_all: dict[str, Any] = {}
        if cross_validation and len(units) > 1:
            everything: dict[tuple[tuple[str, Any], ...], list[Outcome]] = {}
            for value in GRID["rrf_k"]:
                if value == st.rrf_k:
                    scored = own
                else:
                    other = MemoryLayer(store, settings=MemorySettings.model_validate(
                        {**st.model_dump(), "rrf_k": value}))
                    scored, _ = _score_all(other, data, k, prefix, show, f"rrf_k {value}",
                                           _BLOCK_GRID)
                for block in _BLOCK_GRID:
                    everything[_key({**block, "rrf_k": value})] = scored[_key(block)]
            folds = cross_validate(everything)
            chosen_on_all = dict(choose(everything)[0])
        ablated: dict[str, list[Outcome]] = {}
        fused: list[Any] = []
        for name, (_, change) in (ABLATIONS.items() if ablation else ()):
            varied = MemorySettings.model_validate(_changed(st.model_dump(), change))
            block = {n: getattr(varied, n) for n in _BLOCK}
            scored, _ = _score_all(MemoryLayer(store, settings=varied), data, k, prefix, show,
                                   name, [block], fused if name == "no_rerank" else None)
            ablated[name] = scored[_key(block)]
        if fused and len(units) > 1:
            ablated["rerank_held_out"] = _rerank_held_out(layer, data, fused, k, prefix)
        base = _baseline(store, data, k, show)
    finally:
        data.cleanup(layer)
    chosen = st.calibration
    name = profile_for(store.model_id).name if chosen == "auto" else chosen
    return LocomoReport(path.name, split, units, data.turns, len(data.queries), name, k,
                        defaults, mine, seconds, base, folds, ingest, chosen_on_all, ablated,
                        subjects)


def _rerank_held_out(layer: Any, data: LabelledSet, fused: Sequence[Any], k: int,
                     prefix: str) -> list[Outcome]:
    """Each conversation's questions reranked by a reranker trained on the *other*
    conversations (``langmem_layer.calibration.fit_reranker``), from the rankings without the
    reranker (``fused``: question, ranking), blocks rendered as the layer's."""
    from langmem_layer.calibration.fit_reranker import features_of, fit, reorder
    from langmem_layer.read.recall import block_memories, context_block

    st = layer.settings
    depth = st.rerank_depth or 40
    history = _history_tokens(layer, data)
    rows = [(q, ranked, features_of(ranked, q.text, q.now, depth=depth,
                                    query_refs=st.query_refs)) for q, ranked in fused]
    out: list[Outcome] = []
    for held in dict.fromkeys(q.user for q, _, _ in rows):
        train = [(x, float(q.score([r.key], 1) > 0))
                 for q, ranked, feats in rows if q.user != held
                 for r, x in zip(ranked, feats, strict=False)]
        weights = fit([x for x, _ in train], [y for _, y in train])
        for q, ranked, feats in rows:
            if q.user != held:
                continue
            order = reorder(ranked, feats, weights)
            block = context_block(layer.env, block_memories(layer.env, order), now=q.now)
            placed = list(block.placements)
            out.append(Outcome(q.user.removeprefix(prefix), q.category,
                               q.score([r.key for r in order], k),
                               q.score(placed, len(placed)) if placed else 0.0, block.tokens,
                               block.tokens / max(1, history[q.user]),
                               _any5(order, q.sessions)))
    return out


def _changed(settings: dict[str, Any], change: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with ``change``; a dict-valued setting is updated key by key."""
    out = dict(settings)
    for name, value in change.items():
        out[name] = {**out[name], **value} if isinstance(value, dict) else value
    return out


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
    group.add_argument("--no-cv", action="store_true",
                       help="skip the leave-one-conversation-out cross-validation")
    group.add_argument("--ablation", action="store_true",
                       help="also ask every question once per ablation row (one setting "
                       "changed each: a strategy off, the block's target off, ...)")
    group.add_argument("--no-subjects", action="store_true",
                       help="write the turns without their speaker as subject (what a "
                       "deployment whose messages carry no names gets)")
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
                        cross_validation=not args.no_cv, ablation=args.ablation,
                        show=not args.no_progress, subjects=not args.no_subjects)
    print(json.dumps(report.json(), indent=2) if args.json else report.table())
    return 0

