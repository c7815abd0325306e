"""One history for every change: the write path's status changes, the user's corrections
and forgets, reinforcement confirming a flagged fact, the façade's history() and
record_outcome(), and the history's round trip through export and import."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from langmem_layer import (
    InvalidInputError,
    Kind,
    Layer,
    MemoryLayer,
    MemoryNotFoundError,
    NotProceduralError,
    Status,
)
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.store.ops import ReinforceOp, SetStatusOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import HistoryEntry, LoopStatus, MemoryRecord, Recalled
from tests.fakes import Clock


class Scripted:
    """An extractor that proposes the operations it is given."""

    def __init__(self, ops: Sequence[MemoryOperation]) -> None:
        self.ops = list(ops)

    def extract(self, messages: Sequence[BaseMessage], *, existing: Sequence[Recalled] = (),
                now: datetime) -> list[MemoryOperation]:
        return [op.model_copy() for op in self.ops]

    async def aextract(self, messages: Sequence[BaseMessage], *,
                       existing: Sequence[Recalled] = (), now: datetime
                       ) -> list[MemoryOperation]:
        return self.extract(messages, existing=existing, now=now)


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline", clock=clock)


def _scripted(layer: MemoryLayer, ops: Sequence[MemoryOperation]) -> MemoryLayer:
    return MemoryLayer(layer.store, extractor=Scripted(ops), extraction="inline",
                       clock=layer._clock)


def _changes(entries: Sequence[HistoryEntry]) -> list[tuple[str, str | None, str | None, str]]:
    return [(h.event, h.old, h.new, h.reason) for h in entries]


def test_every_write_path_status_change_is_in_the_history(layer: MemoryLayer,
                                                           clock: Clock) -> None:
    loop = layer.remember("u1", "Call the dentist about the crown.", kind=Kind.OPEN_LOOP)
    wrong = layer.remember("u1", "Owns a cat named Biscuit.", kind=Kind.PROFILE_FACT)
    told = layer.remember("u1", "Favourite band is Muse.", kind=Kind.PREFERENCE)
    old = layer.remember("u1", "Drives a red Volvo.", kind=Kind.PROFILE_FACT)
    ops = [
        MemoryOperation(op=OpType.UPDATE, content="Drives a blue Tesla.", target_id=old.key),
        MemoryOperation(op=OpType.CONTRADICT, target_id=wrong.key),
        MemoryOperation(op=OpType.CLOSE_OPEN_LOOP, target_id=loop.key),
        MemoryOperation(op=OpType.FORGET, target_id=told.key),
    ]
    at = clock.advance(hours=1)
    result = _scripted(layer, ops).ingest("u1", [HumanMessage("(scripted)", id="m1")])
    assert all(d.accepted for d in result.decisions), [d.reason for d in result.decisions]
    (new_key,) = result.written

    closed = layer.get("u1", loop.key).record
    assert closed.status == Status.ARCHIVED and closed.loop_status == LoopStatus.CLOSED
    reason = "closed: the user reported it done"
    assert _changes(layer.admin.history("u1", loop.key)) == [
        ("status", "active", "archived", reason), ("loop_status", "open", "closed", reason)]
    assert _changes(layer.admin.history("u1", wrong.key)) == [
        ("status", "active", "contradicted", "contradicted by a later turn")]
    assert _changes(layer.admin.history("u1", told.key)) == [
        ("status", "active", "archived", "forgotten at the user's request")]
    assert _changes(layer.admin.history("u1", old.key)) == [
        ("status", "active", "contradicted", f"superseded by a correction (memory {new_key})")]
    assert {h.at for key in (loop.key, wrong.key, told.key, old.key)
            for h in layer.admin.history("u1", key)} == {at}
    assert layer.admin.history("u1", new_key) == []
    # Only an open loop's loop_status is closed by close_open_loop.
    fact = layer.remember("u1", "Works from home on Fridays.", kind=Kind.PROFILE_FACT)
    _scripted(layer, [MemoryOperation(op=OpType.CLOSE_OPEN_LOOP, target_id=fact.key)]).ingest(
        "u1", [HumanMessage("(scripted)", id="m2")])
    assert layer.get("u1", fact.key).record.loop_status is None
    assert [h.event for h in layer.admin.history("u1", fact.key)] == ["status"]


def test_a_single_valued_fact_replaced_says_by_what(layer: MemoryLayer) -> None:
    layer.ingest("u1", [HumanMessage("I live in Lisbon.")])
    (old,) = layer.list("u1")
    # An add (not an update) of another value of a single-valued fact replaces it too.
    moved = MemoryOperation(op=OpType.ADD, content="Lives in Porto.", kind=Kind.PROFILE_FACT,
                            subject="user", predicate="lives_in", object="Porto")
    result = _scripted(layer, [moved]).ingest("u1", [HumanMessage("(scripted)", id="m1")])
    assert len(result.written) == 1 and result.changed == [old.key]
    assert _changes(layer.admin.history("u1", old.key)) == [
        ("status", "active", "contradicted",
         f"superseded by a later value (memory {result.written[0]})")]


def test_a_loop_reported_done_by_the_rules_is_closed_with_its_history(layer: MemoryLayer,
                                                                     clock: Clock) -> None:
    loop = layer.remember("u1", "Plans to call mom.", kind=Kind.OPEN_LOOP)
    at = clock.advance(days=1)
    result = layer.ingest("u1", [HumanMessage("I called my mom yesterday.")])
    assert loop.key in result.changed
    record = layer.get("u1", loop.key).record
    assert (record.status, record.loop_status) == (Status.ARCHIVED, LoopStatus.CLOSED)
    assert [(h.event, h.new, h.at) for h in layer.admin.history("u1", loop.key)] == [
        ("status", "archived", at), ("loop_status", "closed", at)]


def test_correct_keeps_the_previous_text_and_forget_says_why(layer: MemoryLayer,
                                                            clock: Clock) -> None:
    mem = layer.remember("u1", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    t1 = clock.advance(hours=1)
    layer.correct("u1", mem.key, "Lives in Porto.")
    layer.correct("u1", mem.key, "Lives in Porto.")  # the same text: nothing changed
    t2 = clock.advance(hours=1)
    assert layer.forget("u1", mem.key)
    assert layer.forget("u1", mem.key)  # already archived: no second entry
    entries = layer.admin.history("u1", mem.key)
    assert [(h.at, *c) for h, c in zip(entries, _changes(entries), strict=True)] == [
        (t1, "content", "Lives in Lisbon.", "Lives in Porto.", "corrected by the user"),
        (t2, "status", "active", "archived", "forgotten at the user's request")]
    assert layer.get("u1", mem.key).record.content == "Lives in Porto."
    layer.forget("u1", mem.key, hard=True)
    with pytest.raises(MemoryNotFoundError):
        layer.admin.history("u1", mem.key)


def test_status_changes_append_atomically(store: PostgresMemoryStore, clock: Clock,
                                          layer: MemoryLayer) -> None:
    """The entry is appended by the statement that changes the status: an entry written
    meanwhile by another statement (here, in the same batch) is kept."""
    mem = layer.remember("u1", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    store.put(("memories", "u1", "work"), mem.key, {
        **mem.record.to_value(), "status": "stale",
        "history": [{"at": "2026-01-01T00:00:00.000000Z", "event": "status",
                     "old": "active", "new": "stale", "reason": "seed"}]})
    now = clock.advance(days=1)
    store.batch([ReinforceOp("u1", (mem.key,), now),
                 SetStatusOp("u1", (mem.key,), Status.ARCHIVED, now, "by hand")])
    assert [(h.old, h.new, h.reason) for h in layer.admin.history("u1", mem.key)] == [
        ("active", "stale", "seed"), ("stale", "active", "reactivated: matched again by a turn"),
        ("active", "archived", "by hand")]


def test_reinforcement_confirms_a_fact_flagged_for_revalidation(
        store: PostgresMemoryStore, layer: MemoryLayer, clock: Clock) -> None:
    t0 = clock.now
    rec = MemoryRecord(content="Works at Acme.", kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC,
                       occurred_at=t0, last_accessed_at=t0,
                       metadata={"needs_revalidation": True, "topic": "work"})
    store.put(("memories", "u1", "work"), "job", rec.to_value())
    now = clock.advance(days=1)
    result = layer.ingest("u1", [HumanMessage("I work at Acme.")])
    assert result.changed == ["job"] and result.written == []
    back = layer.get("u1", "job").record
    assert back.metadata == {"topic": "work"} and back.reinforcement_count == 1
    assert _changes(back.history) == [
        ("flag", "needs_revalidation", None, "confirmed again: restated by a turn")]
    assert back.history[0].at == now
    # Reinforcing it again records nothing more: the flag is gone.
    store.batch([ReinforceOp("u1", ("job",), clock.advance(days=1))])
    assert len(layer.admin.history("u1", "job")) == 1


def test_history_is_per_user(layer: MemoryLayer) -> None:
    mem = layer.remember("u1", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    with pytest.raises(MemoryNotFoundError):
        layer.admin.history("u2", mem.key)
    with pytest.raises(MemoryNotFoundError):
        layer.admin.history("u1", "no-such-memory")
    with pytest.raises(MemoryNotFoundError):
        layer.trust.record_outcome("u2", mem.key, success=True)


def test_record_outcome_counts_a_habits_successes_and_failures(layer: MemoryLayer) -> None:
    habit = layer.remember("u1", "Send the weekly summary on Friday mornings.",
                           kind=Kind.PROTOCOL, layer=Layer.PROCEDURAL)
    assert layer.trust.record_outcome("u1", habit.key, success=True) == (1, 0)
    assert layer.trust.record_outcome("u1", habit.key, success=False) == (1, 1)
    assert asyncio.run(layer.trust.arecord_outcome("u1", habit.key, success=False)) == (1, 2)
    record = layer.get("u1", habit.key).record
    assert (record.success_count, record.failure_count) == (1, 2)

    fact = layer.remember("u1", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    with pytest.raises(NotProceduralError, match=r"semantic memory.*procedural"):
        layer.trust.record_outcome("u1", fact.key, success=True)
    with pytest.raises(InvalidInputError, match="success must be True or False"):
        layer.trust.record_outcome("u1", habit.key, success="yes")  # type: ignore[typeddict-item]
    assert layer.get("u1", fact.key).record.success_count == 0


async def test_async_history(store: PostgresMemoryStore, clock: Clock) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    mem = await layer.aremember("u1", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    await layer.aforget("u1", mem.key, now=clock.advance(hours=1))
    assert [h.new for h in await layer.admin.ahistory("u1", mem.key)] == ["archived"]
    with pytest.raises(MemoryNotFoundError):
        await layer.admin.ahistory("u2", mem.key)


def test_export_then_import_keeps_the_history(layer: MemoryLayer, clock: Clock) -> None:
    mem = layer.remember("u1", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    clock.advance(hours=1)
    layer.correct("u1", mem.key, "Lives in Porto.")
    clock.advance(hours=1)
    layer.forget("u1", mem.key)
    before = layer.admin.history("u1", mem.key)
    assert len(before) == 2
    data = layer.export("u1")
    (item,) = [i for i in data["items"] if i["key"] == mem.key]
    assert [h["event"] for h in item["value"]["history"]] == ["content", "status"]
    assert layer.import_("u2", data) == len(data["items"])
    assert layer.admin.history("u2", mem.key) == before
    layer.delete_user("u1")
    assert layer.import_("u1", data) == len(data["items"])
    assert layer.admin.history("u1", mem.key) == before
    assert layer.get("u1", mem.key).record.status == Status.ARCHIVED
