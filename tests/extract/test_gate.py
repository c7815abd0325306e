"""WriteGate: every threshold at its boundary, duplicates, targets, order."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.extract.gate import GateDecision, WriteGate
from langmem_layer.settings import GateSettings
from langmem_layer.types import Kind, Layer, MemoryRecord, Recalled, Status

NOW = datetime(2026, 11, 18, 15, tzinfo=UTC)


def add(content: str = "Prefers morning meetings.", **fields: Any) -> MemoryOperation:
    return MemoryOperation(op=OpType.ADD, content=content, **fields)


def neighbor(
    key: str, content: str, similarity: float | None = None, status: Status = Status.ACTIVE
) -> Recalled:
    record = MemoryRecord(
        content=content,
        kind=Kind.PREFERENCE,
        layer=Layer.PROCEDURAL,
        occurred_at=NOW,
        last_accessed_at=NOW,
        status=status,
    )
    namespace = ("memories", "u", "work")
    return Recalled(key=key, namespace=namespace, record=record, similarity=similarity)


def review_one(op: MemoryOperation, *near: Recalled, gate: WriteGate | None = None) -> GateDecision:
    decisions = (gate or WriteGate()).review([op], neighbors={0: near} if near else {})
    assert len(decisions) == 1
    return decisions[0]


# --- content length --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "accepted"),
    [("12", False), ("123", True), ("   12   ", False), ("  123\n", True)],
)
def test_min_content_chars_after_strip(content: str, accepted: bool) -> None:
    assert GateSettings().min_content_chars == 3
    decision = review_one(add(content))
    assert decision.accepted is accepted
    if not accepted:
        assert "too short" in decision.reason


def test_max_content_chars_is_a_rejection_not_an_error() -> None:
    ops = [add("x" * 4001), add("y" * 4000), add("A perfectly fine memory.")]
    decisions = WriteGate().review(ops)
    assert [d.accepted for d in decisions] == [False, True, True]
    assert "too long" in decisions[0].reason and "4001" in decisions[0].reason


def test_missing_content_is_rejected() -> None:
    decision = review_one(MemoryOperation(op=OpType.UPDATE, target_id="k1"))
    assert not decision.accepted and "empty" in decision.reason


# --- confidence, salience, ephemeral ----------------------------------------------------------


@pytest.mark.parametrize(("confidence", "accepted"), [(0.39, False), (0.4, True), (0.41, True)])
def test_min_confidence(confidence: float, accepted: bool) -> None:
    decision = review_one(add(confidence=confidence))
    assert decision.accepted is accepted
    if not accepted:
        assert "confidence" in decision.reason


def test_min_confidence_applies_to_destructive_ops_too() -> None:
    forget = MemoryOperation(op=OpType.FORGET, target_id="k1", confidence=0.39)
    assert not review_one(forget).accepted
    assert review_one(forget.model_copy(update={"confidence": 0.4})).accepted


@pytest.mark.parametrize(("salience", "accepted"), [(0.19, False), (0.2, True), (0.21, True)])
def test_min_salience(salience: float, accepted: bool) -> None:
    decision = review_one(add(salience=salience))
    assert decision.accepted is accepted
    if not accepted:
        assert "salience" in decision.reason


@pytest.mark.parametrize(
    ("salience", "accepted"), [(0.3, False), (0.59, False), (0.6, False), (0.61, True), (0.9, True)]
)
def test_ephemeral_needs_salience_above_threshold(salience: float, accepted: bool) -> None:
    op = add("Is tired today after a long flight.", ephemeral=True, salience=salience)
    decision = review_one(op)
    assert decision.accepted is accepted
    if not accepted:
        assert "ephemeral" in decision.reason


def test_non_ephemeral_is_not_held_to_the_ephemeral_threshold() -> None:
    assert review_one(add(salience=0.3)).accepted


def test_update_is_held_to_content_rules() -> None:
    update = MemoryOperation(op=OpType.UPDATE, content="ok", target_id="k1")
    assert not review_one(update).accepted
    ok = update.model_copy(update={"content": "Works at Globex."})
    decision = review_one(ok)
    assert decision.accepted and decision.operation is ok


def test_update_without_target_is_left_to_the_write_path() -> None:
    assert review_one(MemoryOperation(op=OpType.UPDATE, content="Works at Globex.")).accepted


# --- duplicates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("similarity", "duplicate"), [(0.87, False), (0.88, False), (0.881, True)])
def test_duplicate_cosine_is_strictly_above(similarity: float, duplicate: bool) -> None:
    near = neighbor("k-near", "Likes meetings early in the day.", similarity=similarity)
    decision = review_one(add(), near)
    assert decision.accepted
    if duplicate:
        assert decision.operation.op is OpType.REINFORCE
        assert decision.operation.target_id == "k-near"
        assert decision.reason == "near-duplicate of k-near (cosine 0.881): reinforced"
    else:
        assert decision.operation is decision.proposed
        assert decision.operation.op is OpType.ADD


def test_reinforce_rewrite_keeps_the_proposal() -> None:
    proposed = add()
    decision = review_one(proposed, neighbor("k1", "Something else entirely.", similarity=0.95))
    assert decision.proposed is proposed
    assert decision.operation.op is OpType.REINFORCE
    assert decision.operation.content == proposed.content
    assert proposed.op is OpType.ADD  # the proposal itself is not mutated


def test_same_content_hash_is_a_duplicate_without_similarity() -> None:
    same = neighbor("k-same", "Prefers morning meetings.")
    decision = review_one(add("  prefers MORNING   meetings. "), same)
    assert (decision.accepted, decision.operation.op) == (True, OpType.REINFORCE)
    assert decision.operation.target_id == "k-same"
    assert "same content" in decision.reason


def test_lexical_near_duplicate_reinforces() -> None:
    existing = "Prefers meetings in the morning before ten on weekdays at the office"
    # 11 distinct tokens vs 12 with "always": Jaccard 11/12 = 0.917.
    decision = review_one(
        add("Always prefers meetings in the morning before ten on weekdays at the office."),
        neighbor("k-lex", existing),
    )
    assert decision.operation.op is OpType.REINFORCE
    assert decision.operation.target_id == "k-lex"
    assert "token overlap" in decision.reason


def test_lexical_overlap_below_threshold_is_new() -> None:
    # {works, at, acme} vs {works, at, acme, corp}: 0.75.
    decision = review_one(add("Works at Acme Corp."), neighbor("k1", "Works at Acme."))
    assert decision.operation.op is OpType.ADD


def test_exact_match_wins_over_a_closer_cosine_neighbor() -> None:
    decision = review_one(
        add("Prefers morning meetings."),
        neighbor("k-cos", "Morning meetings preferred.", similarity=0.97),
        neighbor("k-exact", "Prefers morning meetings.", similarity=0.9),
    )
    assert decision.operation.target_id == "k-exact"


def test_retired_neighbors_are_not_reinforced() -> None:
    decision = review_one(
        add("Lives in Paris now."),
        neighbor("k-old", "Lives in Paris now.", similarity=1.0, status=Status.CONTRADICTED),
        neighbor("k-arch", "Lives in Paris now.", similarity=1.0, status=Status.ARCHIVED),
    )
    assert decision.operation.op is OpType.ADD
    stale = neighbor("k-stale", "Lives in Paris now.", status=Status.STALE)
    assert review_one(add("Lives in Paris now."), stale).operation.target_id == "k-stale"


def test_duplicate_within_batch() -> None:
    ops = [add("Prefers tea."), add("Lives in Oslo."), add(" PREFERS TEA. ")]
    decisions = WriteGate().review(ops)
    assert [d.accepted for d in decisions] == [True, True, False]
    assert decisions[2].reason == (
        "rejected: duplicate within this batch (same content as operation 0)"
    )


def test_rejected_add_does_not_block_a_later_identical_one() -> None:
    ops = [add("Prefers tea.", confidence=0.1), add("Prefers tea.")]
    assert [d.accepted for d in WriteGate().review(ops)] == [False, True]


def test_batch_duplicate_of_a_reinforced_add_is_rejected() -> None:
    near = neighbor("k1", "Prefers tea.")
    ops = [add("Prefers tea."), add("prefers tea.")]
    decisions = WriteGate().review(ops, neighbors={0: [near]})
    assert decisions[0].operation.op is OpType.REINFORCE
    assert not decisions[1].accepted


def test_neighbors_only_apply_to_their_own_index() -> None:
    near = neighbor("k1", "Prefers tea.", similarity=0.99)
    ops = [add("Lives in Oslo."), add("Prefers tea.")]
    decisions = WriteGate().review(ops, neighbors={0: [near]})
    assert [d.operation.op for d in decisions] == [OpType.REINFORCE, OpType.ADD]


# --- targets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op_type", [OpType.REINFORCE, OpType.CONTRADICT, OpType.CLOSE_OPEN_LOOP, OpType.FORGET]
)
def test_targeted_ops_need_a_target(op_type: OpType) -> None:
    none = review_one(MemoryOperation(op=op_type))
    blank = review_one(MemoryOperation(op=op_type, target_hint="   "))
    by_id = review_one(MemoryOperation(op=op_type, target_id="k1"))
    by_hint = review_one(MemoryOperation(op=op_type, target_hint="my old job"))
    assert [none.accepted, blank.accepted, by_id.accepted, by_hint.accepted] == [
        False,
        False,
        True,
        True,
    ]
    assert "no target" in none.reason


def test_targeted_ops_do_not_need_content() -> None:
    assert review_one(MemoryOperation(op=OpType.FORGET, target_id="k1", content=None)).accepted


# --- settings and order ---------------------------------------------------------------------


def test_custom_settings_are_honoured() -> None:
    gate = WriteGate(
        GateSettings(
            min_content_chars=3,
            max_content_chars=20,
            min_confidence=0.7,
            min_salience=0.5,
            ephemeral_min_salience=0.8,
            duplicate_cosine=0.5,
        )
    )
    assert review_one(add("Tea"), gate=gate).accepted
    assert not review_one(add("Prefers morning meetings a lot."), gate=gate).accepted
    assert not review_one(add("Prefers tea.", confidence=0.69), gate=gate).accepted
    assert not review_one(add("Prefers tea.", salience=0.49), gate=gate).accepted
    assert not review_one(add("Is tired.", ephemeral=True, salience=0.8), gate=gate).accepted
    assert review_one(add("Is tired.", ephemeral=True, salience=0.81), gate=gate).accepted
    near = neighbor("k1", "Something else.", similarity=0.51)
    assert review_one(add("Prefers tea."), near, gate=gate).operation.op is OpType.REINFORCE
    # The defaults would have accepted what the custom gate rejected, and vice versa.
    assert review_one(add("Prefers tea.", confidence=0.69)).accepted
    assert review_one(add("Prefers tea."), near).operation.op is OpType.ADD


def test_default_settings() -> None:
    assert WriteGate().settings == GateSettings()


def test_one_decision_per_op_in_order() -> None:
    ops = [
        add("Prefers tea."),
        add("ok"),
        MemoryOperation(op=OpType.FORGET),
        MemoryOperation(op=OpType.CLOSE_OPEN_LOOP, target_id="loop-1"),
        add("x" * 5000),
        add("Lives in Oslo.", confidence=0.2),
        add("Speaks Norwegian."),
    ]
    decisions = WriteGate().review(ops)
    assert [d.proposed for d in decisions] == ops
    assert [d.accepted for d in decisions] == [True, False, False, True, False, False, True]
    assert all(d.reason for d in decisions)


def test_empty_batch() -> None:
    assert WriteGate().review([]) == []
