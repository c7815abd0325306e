"""The reranking stage's plumbing: what it may reorder, ties, its weights file, and the
temporal signals it reads (``langmem_layer.read.rerank``). Pure: no database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from langmem_layer import Kind, Layer, MemorySettings
from langmem_layer.errors import ConfigurationError, LangmemError
from langmem_layer.read.rank import rank_candidates
from langmem_layer.read.rerank import (
    FEATURES,
    RerankItem,
    RerankQuery,
    asks_when,
    features,
    load_reranker,
    names_time,
)
from langmem_layer.store.ops import Candidate
from langmem_layer.types import MemoryRecord

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)


def _cand(key: str, ranks: dict[str, int], content: str = "", sim: float = 0.9) -> Candidate:
    record = MemoryRecord(content=content or f"memory {key}", kind=Kind.EPISODIC_EVENT,
                          layer=Layer.EPISODIC, occurred_at=NOW, last_accessed_at=NOW)
    return Candidate(("memories", "u1", "work"), key, record.to_value(), NOW, NOW, sim, ranks)


def _weights(tmp_path: Path, **by_feature: float) -> str:
    """A weights file scoring only the features given."""
    path = tmp_path / "w.json"
    path.write_text(json.dumps({
        "features": list(FEATURES), "bias": 0.0,
        "weights": [by_feature.get(n, 0.0) for n in FEATURES],
        "mean": [0.0] * len(FEATURES), "scale": [1.0] * len(FEATURES)}))
    load_reranker.cache_clear()
    return str(path)


def _cands() -> list[Candidate]:
    # Fused order a, b, c, d, e, f (vector ranks); only f and c are keyword hits.
    return [_cand(k, {"vector": n, **({"keyword": 0} if k in "fc" else {})})
            for n, k in enumerate("abcdef")]


ASKED = RerankQuery(False, None, frozenset())


def _ranked(settings: MemorySettings) -> list[str]:
    return [r.key for r in rank_candidates(_cands(), now=NOW, settings=settings, limit=10,
                                           query=ASKED)]


def test_order_changes_only_within_the_candidates_reranked(tmp_path: Path) -> None:
    base = MemorySettings(rerank_depth=0, rrf_k=60)
    fused = _ranked(base)
    model = _weights(tmp_path, keyword=5.0)
    reranked = _ranked(base.model_copy(update={"rerank_depth": 3, "rerank_model": model}))
    # The keyword hit among the first three moves up; the rest keep their places.
    assert set(reranked[:3]) == set(fused[:3])
    assert reranked[3:] == fused[3:]
    assert reranked[0] == "c"
    scores = [r.score for r in rank_candidates(
        _cands(), now=NOW, limit=10, query=ASKED, settings=base.model_copy(
            update={"rerank_depth": 3, "rerank_model": model}))]
    assert scores == sorted(scores, reverse=True)  # the scores stay the list's


def test_equal_scores_keep_the_fused_order(tmp_path: Path) -> None:
    base = MemorySettings(rerank_depth=0, rrf_k=60)
    flat = base.model_copy(update={"rerank_depth": 40, "rerank_model": _weights(tmp_path)})
    assert _ranked(flat) == _ranked(base)


@pytest.mark.parametrize("text", [None, "{not json", json.dumps({"features": ["x"]}),
                                  json.dumps({"features": list(FEATURES), "bias": 0}),
                                  json.dumps({"features": list(FEATURES), "bias": 0.0,
                                              "weights": [1.0] * len(FEATURES),
                                              "mean": [0.0] * len(FEATURES),
                                              "scale": [0.0] * len(FEATURES)})])
def test_a_missing_or_corrupt_weights_file_is_a_configuration_error(
        tmp_path: Path, text: str | None) -> None:
    path = tmp_path / "weights.json"
    if text is not None:
        path.write_text(text)
    load_reranker.cache_clear()
    settings = MemorySettings(rerank_model=str(path))
    with pytest.raises(ConfigurationError) as err:
        rank_candidates(_cands(), now=NOW, settings=settings, limit=10, query=ASKED)
    assert isinstance(err.value, LangmemError)
    assert "reranker" in str(err.value)


def test_a_ranking_that_answers_no_question_is_not_reranked(tmp_path: Path) -> None:
    # The write path ranks similar memories with no question: nothing to rerank for.
    settings = MemorySettings(rrf_k=60, rerank_model=_weights(tmp_path, keyword=5.0))
    plain = [r.key for r in rank_candidates(_cands(), now=NOW, settings=settings, limit=10)]
    assert plain == _ranked(settings.model_copy(update={"rerank_depth": 0}))


def test_the_shipped_weights_load_and_name_the_features() -> None:
    load_reranker.cache_clear()
    model = load_reranker()
    assert len(model.weights) == len(FEATURES)
    assert MemorySettings().rerank_depth > 0


def test_the_temporal_signals() -> None:
    assert asks_when("When did Evan go skiing in Banff?")
    assert asks_when("How long did Jolene work on the project?")
    assert not asks_when("What did Evan do in Banff?")
    assert names_time("Yesterday I met some artists in Boston")
    assert names_time("I went there two years ago")
    assert not names_time("I met some artists in Boston")
    said = datetime(2023, 10, 4, 12, 0, tzinfo=UTC)
    items = [RerankItem("y", {}, 0.5, 1.0, None, "Yesterday I met artists in Boston", said),
             RerankItem("n", {}, 0.5, 1.0, None, "Boston was lovely", said)]
    third = datetime(2023, 10, 3, tzinfo=UTC)
    rows = features(items, RerankQuery(False, (third, third + timedelta(days=1)),
                                       frozenset()))
    window = FEATURES.index("in_window")
    # "yesterday", said on the 4th, is the 3rd; the other turn's own date is not.
    assert [r[window] for r in rows] == [1.0, 0.0]
    assert rows[0][FEATURES.index("when_names_time")] == 1.0
