"""Input the database cannot take as it is: NUL characters and messages of any length.
Nothing may fail a turn or lose it; explicit API input gets a clear error instead."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from langmem_layer import (
    InvalidContentError,
    InvalidInputError,
    MemoryLayer,
    MemorySettings,
    MemoryState,
)
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.sql.candidates import cap_terms
from langmem_layer.store.ops import ParkedEntriesOp, PendingOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Recalled
from tests.fakes import Clock

CFG = {"configurable": {"user_id": "u1", "thread_id": "t"}}


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline", clock=clock)


def _graph(layer: MemoryLayer) -> StateGraph:
    def agent(state: MemoryState) -> dict:
        return {"messages": [AIMessage("ok")]}

    builder = StateGraph(MemoryState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return layer.wire(builder)


class Scripted:
    """Proposes fixed operations, or raises ``error`` every time."""

    def __init__(self, ops: Sequence[MemoryOperation] = (),
                 error: Exception | None = None) -> None:
        self.ops, self.error, self.calls = list(ops), error, 0

    def extract(self, messages: Sequence[BaseMessage], *, existing: Sequence[Recalled] = (),
                now: datetime) -> list[MemoryOperation]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return [op.model_copy() for op in self.ops]

    async def aextract(self, messages: Sequence[BaseMessage], *,
                       existing: Sequence[Recalled] = (), now: datetime
                       ) -> list[MemoryOperation]:
        return self.extract(messages, existing=existing, now=now)


def _contents(layer: MemoryLayer) -> list[str]:
    return [m.record.content for m in layer.list("u1")]


def test_a_nul_in_a_message_neither_fails_nor_loses_the_turn(layer: MemoryLayer,
                                                             store: PostgresMemoryStore) -> None:
    graph = _graph(layer).compile(store=store)
    graph.invoke({"messages": [HumanMessage("I prefer green tea.\x00 thanks")]}, CFG)
    assert store.batch([PendingOp("u1")])[0] == []  # queued and extracted
    (fact,) = _contents(layer)
    assert "green tea" in fact and "\x00" not in fact
    # The turn is in the message log, without the NUL.
    out = graph.invoke({"messages": [HumanMessage("What tea do I like?\x00")]},
                       {"configurable": {"user_id": "u1", "thread_id": "t2"}})
    assert "green tea" in out["memory_context"]
    assert [r.record.content for r in layer.recall("u1", "green\x00 tea")] == [fact]


def test_remember_with_a_nul_is_a_clear_error_and_writes_nothing(layer: MemoryLayer) -> None:
    with pytest.raises(InvalidContentError, match="NUL"):
        layer.remember("u1", "Prefers green\x00 tea.")
    with pytest.raises(InvalidContentError, match="NUL"):
        layer.remember("u1", "Prefers green tea.", refs=["tea\x00"])
    assert layer.export("u1")["items"] == []


def test_extracted_content_is_stored_without_nul(store: PostgresMemoryStore,
                                                 clock: Clock) -> None:
    op = MemoryOperation(op=OpType.ADD, content="Prefers green\x00 tea.", refs=["tea\x00"],
                         source_text="I prefer green\x00 tea.")
    layer = MemoryLayer(store, extractor=Scripted([op]), extraction="inline", clock=clock)
    (key,) = layer.ingest("u1", [HumanMessage("I prefer green tea.", id="m1")]).written
    record = layer.get("u1", key).record
    assert record.content == "Prefers green tea."
    assert "tea" in record.refs and record.source.text == "I prefer green tea."


def test_cap_terms_keeps_the_longest_distinct_words_in_order() -> None:
    assert cap_terms("a short question", 5) == "a short question"
    assert cap_terms("the cat saw the elephant and a hippopotamus", 3) == (
        "the elephant hippopotamus")
    assert cap_terms("Alpha alpha ALPHA beta", 1) == "Alpha"


def test_a_message_of_twenty_thousand_words_gets_a_memory_block(
        layer: MemoryLayer, store: PostgresMemoryStore) -> None:
    layer.remember("u1", "Name is Dana.", pinned=True)
    layer.remember("u1", "Prefers green tea.")
    words = " ".join(f"w{n}" for n in range(20_000))
    graph = _graph(layer).compile(store=store)
    out = graph.invoke({"messages": [HumanMessage(f"I prefer green tea. {words}")]}, CFG)
    assert "Name is Dana." in out["memory_context"]
    assert store.batch([PendingOp("u1")])[0] == []  # the turn was extracted too
    assert layer.recall("u1", words)  # the direct API as well


def test_a_queue_entry_that_always_fails_is_parked_with_its_messages(
        store: PostgresMemoryStore, clock: Clock) -> None:
    extractor = Scripted(error=RuntimeError("model unavailable"))
    settings = MemorySettings(extraction_max_attempts=3, extraction_retry_base_seconds=60)
    layer = MemoryLayer(store, extractor=extractor, settings=settings, clock=clock,
                        extraction="inline")
    entry = layer.admin.submit("u1", [HumanMessage("I play chess on Tuesdays.", id="m1")],
                         thread_id="t")
    for _ in range(10):
        layer.drain()
        clock.advance(hours=7)
    assert extractor.calls == 3
    (pending,) = store.batch([PendingOp("u1")])[0]
    assert pending["attempts"] == 3 and pending["parked_at"] is not None
    assert "model unavailable" in pending["last_error"]
    (parked,) = store.batch([ParkedEntriesOp("u1")])[0]
    assert parked.id == entry and parked.messages[0]["data"]["content"] == (
        "I play chess on Tuesdays.")
    layer.close()


def test_an_entry_the_database_refuses_is_parked_at_once(store: PostgresMemoryStore,
                                                        clock: Clock) -> None:
    extractor = Scripted(error=InvalidInputError("value out of range"))
    layer = MemoryLayer(store, extractor=extractor, clock=clock, extraction="inline")
    entry = layer.admin.submit("u1", [HumanMessage("I play chess on Tuesdays.", id="m1")])
    layer.drain()
    clock.advance(hours=7)
    layer.drain()
    assert extractor.calls == 1
    assert [p.id for p in store.batch([ParkedEntriesOp("u1")])[0]] == [entry]
    layer.close()
