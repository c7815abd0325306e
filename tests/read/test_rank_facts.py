"""Ranking reads a few fields of each candidate without validating the whole record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from langmem_layer import Kind, Layer, MemoryRecord, MemorySettings
from langmem_layer.read.rank import Facts, decay_score, rank_candidates, urgency
from langmem_layer.store.ops import Candidate

NOW = datetime(2026, 11, 18, tzinfo=UTC)


def _record(**fields: object) -> MemoryRecord:
    base: dict = {"content": "ship the report", "kind": Kind.OPEN_LOOP,
                  "layer": Layer.EPISODIC, "occurred_at": NOW, "last_accessed_at": NOW}
    return MemoryRecord.model_validate({**base, **fields})


def test_facts_read_what_the_record_holds() -> None:
    record = _record(kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC, access_count=10,
                     confidence=1.0, due_at=datetime(2026, 11, 19, tzinfo=UTC),
                     last_accessed_at=datetime(2026, 11, 12, tzinfo=UTC))
    facts = Facts.of(record.to_value())
    for name in ("kind", "layer", "pinned", "confidence", "salience", "loop_status",
                 "due_at", "occurred_at", "last_accessed_at", "access_count"):
        assert getattr(facts, name) == getattr(record, name), name
    assert decay_score(facts, NOW) == pytest.approx(decay_score(record, NOW))
    assert decay_score(facts, NOW) == pytest.approx(0.368, abs=1e-3)  # e^(-6/6)
    loop = _record(due_at=datetime(2026, 11, 25, tzinfo=UTC))
    assert urgency(Facts.of(loop.to_value()), NOW) == urgency(loop, NOW)


def test_a_malformed_candidate_raises_the_validation_error() -> None:
    value = _record().to_value()
    value["layer"] = "nonsense"
    with pytest.raises(ValidationError, match="layer"):
        Facts.of(value)
    bad = Candidate(("memories", "u", "work"), "k", value, NOW, NOW, 0.9, {"vector": 0})
    with pytest.raises(ValidationError):
        rank_candidates([bad], now=NOW, settings=MemorySettings(), limit=5)


def test_only_returned_candidates_become_records() -> None:
    cands = [
        Candidate(("memories", "u", "work"), f"k{i}", _record(content=f"m{i}").to_value(),
                  NOW, NOW, 0.9, {"keyword": i})
        for i in range(20)
    ]
    ranked = rank_candidates(cands, now=NOW, settings=MemorySettings(), limit=3)
    assert [r.key for r in ranked] == ["k0", "k1", "k2"]
    assert all(isinstance(r.record, MemoryRecord) for r in ranked)
    assert ranked[0].record.content == "m0"
