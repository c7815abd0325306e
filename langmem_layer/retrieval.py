"""Ranking of retrieval candidates: fusion, decay, composite score. Pure functions.

The store returns candidates found by any strategy (vector, keyword, reference,
pinned) with their per-strategy ranks. Here they are fused with Reciprocal Rank
Fusion over the union (R4.1), filtered by the relevance floor (R4.3), and scored
with the weighted composite of R4.2 multiplied by the decay weight (R5.1) and the
authoring agent's trust (R7.2). Pinned memories bypass ranking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from langmem_layer.ops import Candidate
from langmem_layer.settings import MemorySettings
from langmem_layer.types import Kind, Layer, LoopStatus, MemoryRecord, Recalled, to_utc

__all__ = [
    "HALF_LIFE_KINDS",
    "decay_score",
    "decay_weight",
    "rank_candidates",
    "rrf_scores",
    "urgency",
]

#: Kinds that decay by half-life instead of by Ebbinghaus stability (R5.1).
HALF_LIFE_KINDS = frozenset({Kind.TEMPORAL_SUMMARY, Kind.REFLECTION})
_FUSED_SOURCES = ("vector", "keyword", "ref")
#: Decay deprioritises but never hides: a fully decayed memory keeps this weight.
MIN_DECAY_WEIGHT = 0.25


def _days(later: datetime, earlier: datetime) -> float:
    return max(0.0, (to_utc(later) - to_utc(earlier)).total_seconds() / 86400.0)


def decay_score(record: MemoryRecord, now: datetime, *, half_life_days: float = 180.0) -> float:
    """The decay score of R5.1 (1.0 means no decay).

    Semantic, procedural and identity memories: ``confidence × e^(−t/S)`` with ``t``
    days since last access and ``S = 1 + 0.5 × access_count``. Summaries and
    reflections: ``confidence × 0.5^(t / half_life)``. Episodic events do not decay.
    """
    if record.layer == Layer.EPISODIC:
        return record.confidence
    t = _days(now, record.last_accessed_at)
    if record.kind in HALF_LIFE_KINDS:
        return record.confidence * 0.5 ** (t / half_life_days)
    stability = 1.0 + 0.5 * record.access_count
    return record.confidence * math.exp(-t / stability)


def decay_weight(record: MemoryRecord, now: datetime, *, half_life_days: float = 180.0) -> float:
    """Multiplier applied to the composite score: the decay without confidence, floored."""
    if record.layer == Layer.EPISODIC or record.pinned:
        return 1.0
    raw = decay_score(record, now, half_life_days=half_life_days)
    base = raw / record.confidence if record.confidence > 0 else 0.0
    return max(MIN_DECAY_WEIGHT, base)


def urgency(record: MemoryRecord, now: datetime) -> float:
    """Open-loop urgency in [0, 1]: 1 when due within a day or overdue, fading over 14 days."""
    if record.kind != Kind.OPEN_LOOP or record.loop_status == LoopStatus.CLOSED:
        return 0.0
    if record.due_at is None:
        return 0.3
    days_left = (to_utc(record.due_at) - to_utc(now)).total_seconds() / 86400.0
    if days_left <= 1.0:
        return 1.0
    return max(0.0, 1.0 - (days_left - 1.0) / 14.0)


def rrf_scores(candidates: Sequence[Candidate], k: int = 60) -> dict[str, float]:
    """Reciprocal Rank Fusion over the union: ``Σ 1 / (k + rank)`` (ranks 1-based)."""
    return {
        c.key: sum(1.0 / (k + c.ranks[s] + 1) for s in _FUSED_SOURCES if s in c.ranks)
        for c in candidates
    }


def rank_candidates(
    candidates: Sequence[Candidate],
    *,
    now: datetime,
    settings: MemorySettings,
    limit: int,
    trust: Mapping[str, float] | None = None,
) -> list[Recalled]:
    """Fuse, filter and score candidates; pinned first, then by composite score.

    A candidate found only by vector search must clear the similarity floor (0.72 for
    episodic memories); a keyword or reference match stands on its own, so a memory
    found only by keywords or only by reference can win.

    Args:
        candidates: From a :class:`~langmem_layer.ops.RecallOp`.
        now: Time for decay, urgency and recency.
        settings: Weights, floors, RRF constant.
        limit: How many non-pinned memories to return (pinned are always included).
        trust: Per-agent trust in [0, 1]; an agent with no history counts 0.5.
    """
    w = settings.weights
    fused = rrf_scores(candidates, settings.rrf_k)
    top = max(fused.values(), default=0.0) or 1.0
    pinned: list[Recalled] = []
    scored: list[Recalled] = []
    for c in candidates:
        record = MemoryRecord.model_validate(c.value)
        if record.pinned:
            pinned.append(Recalled(c.key, c.namespace, record, 1.0, c.similarity, dict(c.ranks)))
            continue
        lexical = "keyword" in c.ranks or "ref" in c.ranks
        floor = (
            settings.episodic_similarity_floor
            if record.layer == Layer.EPISODIC
            else settings.similarity_floor
        )
        if not lexical and (c.similarity is None or c.similarity < floor):
            continue
        relevance = fused[c.key] / top
        recency = math.exp(-_days(now, record.occurred_at) / 30.0)
        composite = (
            w.relevance * relevance
            + w.salience * record.salience
            + w.urgency * urgency(record, now)
            + w.confidence * record.confidence
            + w.recency * recency
        )
        agent = record.source.agent_id
        # R7.2: an agent with no history has trust 0.5.
        factor = decay_weight(record, now) * ((trust or {}).get(agent or "", 0.5))
        scored.append(
            Recalled(c.key, c.namespace, record, composite * factor, c.similarity, dict(c.ranks))
        )
    # The pinned weight is part of the composite; pinned memories also bypass ranking.
    pinned = [
        Recalled(p.key, p.namespace, p.record, w.pinned + p.record.salience * w.salience,
                 p.similarity, p.sources)
        for p in pinned
    ]
    pinned.sort(key=lambda r: (-r.score, r.key))
    scored.sort(key=lambda r: (-r.score, r.key))
    return pinned + scored[:limit]
