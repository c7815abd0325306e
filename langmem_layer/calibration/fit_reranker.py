"""Fitting the reranker (``langmem_layer.read.rerank``) on labelled questions.

A question's ranking *without* the reranker (``rerank_depth=0``) gives, for its first
``depth`` memories, the reranker's features (``features_of``) and a label (is it
evidence). ``fit`` trains a logistic regression on them (standardised inputs, L2, Newton
steps; numpy only) and returns a weights object as ``reranker.json`` holds it;
``reorder`` applies one to a ranking. ``eval locomo`` trains it on all conversations
but one and scores that one (the reranker's held-out row);
``benchmarks/locomo_rerank.py`` writes the shipped weights with the same functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langmem_layer.read.query import understand
from langmem_layer.read.rerank import (
    FEATURES,
    Reranker,
    RerankItem,
    RerankQuery,
    asks_when,
    features,
)
from langmem_layer.types import Recalled, normalize_ref

__all__ = ["DEPTH", "features_of", "fit", "reorder"]

#: How many of the fused ranking's first memories are reranked (``rerank_depth``).
DEPTH = 40


def features_of(ranked: Sequence[Recalled], question: str, now: datetime, *,
                depth: int = DEPTH, query_refs: bool = True) -> list[list[float]]:
    """The reranker's features of the first ``depth`` of ``ranked`` (a ranking without
    the reranker, pinned memories left out), as recall computes them for ``question``."""
    info = understand(question, now, slack_days=0.0, refs=query_refs)
    query = RerankQuery(asks_when(info.text),
                        (info.window.start, info.window.end) if info.window else None,
                        frozenset(info.refs))
    items = [RerankItem(r.key, r.sources, r.similarity, r.relevance or 0.0,
                        normalize_ref(r.record.subject) if r.record.subject else None,
                        r.record.content, r.record.occurred_at) for r in ranked[:depth]]
    return features(items, query)


def fit(rows: Sequence[Sequence[float]], labels: Sequence[float], *, l2: float = 1.0,
        drop: Sequence[str] = ()) -> dict[str, Any]:
    """Logistic regression of ``labels`` (1: evidence) on ``rows`` (``FEATURES``); the
    features named in ``drop`` are left out (weight 0). Returns a weights object."""
    import numpy as np

    X = np.asarray(rows, dtype=float).reshape(-1, len(FEATURES))
    y = np.asarray(labels, dtype=float)
    mean, scale = X.mean(0), X.std(0)
    scale[scale < 1e-9] = 1.0
    Z = (X - mean) / scale
    Z[:, [FEATURES.index(n) for n in drop]] = 0.0
    Z = np.hstack([np.ones((len(Z), 1)), Z])
    w = np.zeros(Z.shape[1])
    ridge = l2 * np.diag(np.r_[0.0, np.ones(Z.shape[1] - 1)])
    for _ in range(30):
        p = 1 / (1 + np.exp(-(Z @ w)))
        w -= np.linalg.solve((Z * (p * (1 - p))[:, None]).T @ Z + ridge,
                             Z.T @ (p - y) + ridge @ w)
    return {"features": list(FEATURES), "bias": round(float(w[0]), 6),
            "weights": [round(float(x), 6) for x in w[1:]],
            "mean": [round(float(x), 6) for x in mean],
            "scale": [round(float(x), 6) for x in scale]}


def reorder(ranked: Sequence[Recalled], rows: Sequence[Sequence[float]],
            weights: dict[str, Any]) -> list[Recalled]:
    """``ranked`` with its first ``len(rows)`` reordered by ``weights`` (as recall's
    reranking stage orders them: equal scores keep their order)."""
    scores = Reranker.from_json(weights).score(rows)
    order = sorted(range(len(rows)), key=lambda n: (-scores[n], n))
    return [ranked[n] for n in order] + list(ranked[len(rows):])
