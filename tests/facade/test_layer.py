"""MemoryLayer end to end on the real embedded PostgreSQL: direct API, nodes, isolation."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langmem_layer import (
    InvalidContentError,
    Kind,
    Layer,
    MemoryLayer,
    MemoryNotFoundError,
    MemoryState,
    MissingUserError,
    Policy,
    Status,
)
from langmem_layer.store.ops import ExportOp, LinkOp, LinksOp
from langmem_layer.store.ops import memory as msql
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import Clock


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline", clock=clock)


def test_remember_then_recall_across_profiles_and_identity(layer: MemoryLayer) -> None:
    layer.remember("u1", "Works at Acme Robotics.", profile="work")
    layer.remember("u1", "Name is Dana.", layer=Layer.IDENTITY)
    layer.remember("u1", "Plays tennis on Sundays.", profile="personal")
    work = {r.record.content for r in layer.recall("u1", "where does Dana work at Acme",
                                                     profile="work")}
    assert work == {"Works at Acme Robotics.", "Name is Dana."}
    personal = {r.record.content for r in layer.recall("u1", "Dana tennis", profile="personal")}
    assert personal == {"Name is Dana.", "Plays tennis on Sundays."}


def test_identical_text_never_crosses_users(layer: MemoryLayer) -> None:
    layer.remember("alice", "Is allergic to peanuts.")
    layer.remember("bob", "Is allergic to peanuts.")
    layer.remember("alice", "Secret project codename Bluebird.", pinned=True)
    for user in ("alice", "bob"):
        found = layer.recall(user, "allergic to peanuts? Bluebird")
        assert found, user
        assert all(r.namespace[1] == user for r in found)
    assert all("Bluebird" not in r.record.content for r in layer.recall("bob", "Bluebird"))
    assert layer.export("bob")["items"] and all(
        i["namespace"][1] == "bob" for i in layer.export("bob")["items"]
    )


def test_recall_reinforces_returned_memories(layer: MemoryLayer, clock: Clock) -> None:
    m = layer.remember("u1", "Prefers morning meetings.", kind=Kind.PREFERENCE)
    clock.advance(days=2)
    layer.recall("u1", "morning meetings")
    after = layer.get("u1", m.key).record
    assert after.access_count == 1
    assert after.last_accessed_at == clock.now


def test_reinforcement_writes_no_index_entry(layer: MemoryLayer, pg_uri: str,
                                             clock: Clock) -> None:
    m = layer.remember("u1", "Prefers morning meetings.", kind=Kind.PREFERENCE)
    sql, params = msql.touch("u1", [m.key], clock.now)
    with psycopg.connect(pg_uri) as conn:
        conn.execute(sql, params)
        upd, hot = conn.execute(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables"
            " WHERE relname = 'langmem_items'").fetchone() or (0, 0)
        conn.rollback()
    assert (upd, hot) == (1, 1)  # heap-only: no index of the row was written


def test_reinforced_fields_in_every_read_until_the_value_is_written(
        layer: MemoryLayer, store: PostgresMemoryStore, clock: Clock) -> None:
    m = layer.remember("u1", "Prefers morning meetings.", kind=Kind.PREFERENCE)
    for _ in range(2):
        clock.advance(days=1)
        assert [r.key for r in layer.recall("u1", "morning meetings")] == [m.key]
    ns = layer.recall("u1", "morning meetings")[0].namespace
    clock.advance(days=1)
    assert [i.key for i in store.search(ns, filter={"access_count": 3})] == [m.key]
    exported = {i["key"]: i["value"] for i in layer.export("u1")["items"]}
    assert exported[m.key]["access_count"] == 3
    item = store.get(ns, m.key)
    assert item is not None and item.value["access_count"] == 3
    # A write of the value is authoritative: it replaces the reinforced fields.
    store.put(ns, m.key, {**item.value, "access_count": 0})
    assert layer.get("u1", m.key).record.access_count == 0
    layer.recall("u1", "morning meetings")
    assert layer.get("u1", m.key).record.access_count == 1
    assert layer.get("u1", m.key).record.last_accessed_at == clock.now


def test_pinned_always_included_and_first(layer: MemoryLayer) -> None:
    layer.remember("u1", "Works at Acme Robotics.")
    pin = layer.remember("u1", "Always answer in French.", pinned=True, kind=Kind.PROTOCOL)
    found = layer.recall("u1", "Acme")
    assert found[0].key == pin.key
    assert any(r.record.content.startswith("Works") for r in found)


def test_forget_archives_and_hard_delete_removes(layer: MemoryLayer, store) -> None:
    a = layer.remember("u1", "Lives in Lisbon near the river.")
    b = layer.remember("u1", "Lives in Porto near the coast.")
    layer.forget("u1", a.key)
    assert layer.get("u1", a.key).record.status == Status.ARCHIVED
    assert all(r.key != a.key for r in layer.recall("u1", "Lisbon river"))
    assert a.key in {i["key"] for i in layer.export("u1")["items"]}
    layer.forget("u1", b.key, hard=True)
    with pytest.raises(MemoryNotFoundError):
        layer.get("u1", b.key)
    with pytest.raises(LookupError):
        layer.forget("u1", "no-such-id")


def test_correct_re_embeds(layer: MemoryLayer, embedder) -> None:
    m = layer.remember("u1", "Favourite colour is green.")
    layer.correct("u1", m.key, "Favourite colour is purple.")
    hits = layer.recall("u1", "purple colour")
    assert hits and hits[0].key == m.key and "purple" in hits[0].record.content
    sims = [r.similarity for r in layer.recall("u1", "green")]
    assert all(s is None or s < 0.7 for s in sims)


def test_bad_input_is_a_clear_error_and_writes_nothing(layer: MemoryLayer) -> None:
    with pytest.raises(InvalidContentError):
        layer.remember("u1", "   ")
    with pytest.raises(InvalidContentError, match="limit"):
        layer.remember("u1", "x" * 5000)
    with pytest.raises(MissingUserError, match="configurable"):
        layer.remember("", "Something worth keeping.")
    assert layer.export("u1")["items"] == []


def test_ingest_applies_gate_and_updates(layer: MemoryLayer, store) -> None:
    r1 = layer.ingest("u1", [HumanMessage("I work at Acme Robotics.", id="m1")], thread_id="t1",
                      agent_id="agent-a")
    assert [d.operation.op.value for d in r1.accepted] == ["add"]
    old_key = r1.written[0]
    # The same fact again reinforces instead of duplicating.
    r2 = layer.ingest("u1", [HumanMessage("I work at Acme Robotics.", id="m2")])
    assert r2.written == [] and r2.changed == [old_key]
    assert layer.get("u1", old_key).record.reinforcement_count == 1
    r3 = layer.ingest("u1", [HumanMessage("Actually I work at Globex now.", id="m3")])
    assert r3.changed == [old_key]
    assert layer.get("u1", old_key).record.status == Status.CONTRADICTED
    new = layer.get("u1", r3.written[0]).record
    assert "Globex" in new.content
    links = store.batch([LinksOp("u1", (old_key,))])[0]
    assert [(x.src_key, x.link_type, x.dst_key) for x in links] == [
        (r3.written[0], "supersedes", old_key)]
    first = layer.get("u1", old_key).record.source
    assert (first.agent_id, first.thread_id, first.message_id) == ("agent-a", "t1", "m1")


def test_export_import_round_trip(layer: MemoryLayer, store, pg_uri, index, clock) -> None:
    layer.remember("u1", "Name is Dana.", layer=Layer.IDENTITY, refs=["Dana"])
    layer.remember("u1", "Never mention the divorce.", policy=Policy.AVOID, kind=Kind.PROTOCOL)
    layer.ingest("u1", [HumanMessage("I work at Acme.")])
    layer.ingest("u1", [HumanMessage("Actually I work at Globex now.")])
    store.put(("memories", "u1", "notes"), "n1", {"free": "form"})
    data = layer.export("u1")
    text = json.dumps(data)
    # Wipe, then import into the emptied store: everything comes back unchanged.
    for item in store.batch([ExportOp("u1")])[0].items:
        store.delete(item.namespace, item.key)
    assert layer.export("u1")["items"] == []
    assert layer.import_("u1", json.loads(text)) == len(data["items"])
    assert layer.export("u1") == data
    assert layer.recall("u1", "Dana")[0].record.content == "Name is Dana."


async def test_async_api_matches_sync(astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, extraction="inline", clock=clock)
    m = await layer.aremember("u1", "Prefers tea over coffee.", kind=Kind.PREFERENCE)
    found = await layer.arecall("u1", "tea or coffee")
    assert [r.key for r in found] == [m.key]
    result = await layer.aingest("u1", [HumanMessage("My name is Dana.")])
    assert result.written
    block = await layer.acontext_block("u1", "what is my name Dana")
    assert "Name is Dana." in block.text
    assert (await layer.aexport("u1"))["items"]


def _graph(layer: MemoryLayer) -> StateGraph:
    def agent(state: MemoryState) -> dict:
        return {"messages": [AIMessage("ok: " + (state.get("memory_context") or "none"))]}

    builder = StateGraph(MemoryState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return layer.wire(builder)


def test_nodes_in_sync_graph_remember_across_threads(layer: MemoryLayer, store) -> None:
    graph = _graph(layer).compile(store=store)
    cfg = {"configurable": {"user_id": "u1", "thread_id": "a"}}
    graph.invoke({"messages": [HumanMessage("My name is Dana and I live in Lisbon.")]}, cfg)
    out = graph.invoke({"messages": [HumanMessage("Where do I live, Dana?")]},
                       {"configurable": {"user_id": "u1", "thread_id": "b"}})
    assert "Lives in Lisbon" in out["memory_context"]
    assert any(r["section"] for r in out["recalled"])
    other = graph.invoke({"messages": [HumanMessage("Where do I live, Dana?")]},
                         {"configurable": {"user_id": "u2", "thread_id": "c"}})
    assert other["memory_context"] == ""


async def test_nodes_in_async_graph_background_extraction(astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, clock=clock)  # background extraction
    graph = _graph(layer).compile(store=astore)
    cfg = {"configurable": {"user_id": "u1", "thread_id": "a"}}
    await graph.ainvoke({"messages": [HumanMessage("I prefer morning meetings.")]}, cfg)
    await layer.adrain()
    out = await graph.ainvoke({"messages": [HumanMessage("When do I like meetings?")]}, cfg)
    await layer.aclose()
    assert "Prefers morning meetings." in out["memory_context"]


def test_nodes_reinforce_with_the_turn_they_recalled_for(layer: MemoryLayer, store,
                                                        clock: Clock) -> None:
    m = layer.remember("u1", "Works at Acme Robotics.")
    cfg = {"configurable": {"user_id": "u1", "thread_id": "t"}}
    state = {"messages": [HumanMessage("Tell me about Acme Robotics.")]}
    loaded = layer.load_memory.invoke(state, cfg)
    assert [r["key"] for r in loaded["recalled"]] == [m.key]
    assert layer.get("u1", m.key).record.access_count == 0  # the read path wrote nothing
    clock.advance(minutes=1)
    layer.extract_after_turn.invoke({**state, **loaded}, cfg)
    after = layer.get("u1", m.key).record
    assert (after.access_count, after.last_accessed_at) == (1, clock.now)
    graph = _graph(layer).compile(store=store)
    graph.invoke(state, cfg)
    assert layer.get("u1", m.key).record.access_count == 2


async def test_async_nodes_reinforce_with_the_turn(astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, extraction="inline", clock=clock)
    m = await layer.aremember("u1", "Works at Acme Robotics.")
    await _graph(layer).compile(store=astore).ainvoke(
        {"messages": [HumanMessage("Tell me about Acme Robotics.")]},
        {"configurable": {"user_id": "u1", "thread_id": "t"}})
    assert (await layer.aget("u1", m.key)).record.access_count == 1


def test_missing_user_fails_with_instructions(layer: MemoryLayer, store) -> None:
    graph = _graph(layer).compile(store=store)
    with pytest.raises(MissingUserError, match="configurable"):
        graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "x"}})


def test_over_reference_demoted_on_third_turn(layer: MemoryLayer, store) -> None:
    layer.remember("u1", "Works at Acme Robotics.")
    graph = _graph(layer).compile(store=store, checkpointer=InMemorySaver())
    cfg = {"configurable": {"user_id": "u1", "thread_id": "t"}}
    sections = []
    for _ in range(3):
        out = graph.invoke({"messages": [HumanMessage("Tell me about Acme Robotics.")]}, cfg)
        sections.append(out["recalled"][0]["section"])
    assert sections == ["RELEVANT FOR THIS TURN", "RELEVANT FOR THIS TURN", "USE SILENTLY"]


def test_avoid_memory_never_speakable_in_block(layer: MemoryLayer) -> None:
    layer.remember("u1", "Divorce in 2024 was painful.", policy=Policy.AVOID, pinned=True)
    block = layer.context_block("u1", "divorce")
    assert block.placements and set(block.placements.values()) == {
        "DO NOT SURFACE UNLESS THE USER DOES"}


def test_time_moves_with_now(layer: MemoryLayer, clock: Clock) -> None:
    m = layer.remember("u1", "Call the dentist.", kind=Kind.OPEN_LOOP,
                       due_at=clock.now + timedelta(days=1))
    later = clock.now + timedelta(days=3)
    block = layer.context_block("u1", "dentist", now=later)
    assert "[overdue]" in block.text and m.key in block.placements


def test_record_expiry_hides_and_sweep_purges_with_links(layer: MemoryLayer, store,
                                                         clock: Clock) -> None:
    from langmem_layer.types import MemoryRecord

    keep = layer.remember("u1", "Parks the car on level 3 today.")
    rec = MemoryRecord(content="Temporary door code is 4821.", kind=Kind.PROFILE_FACT,
                       layer=Layer.SEMANTIC, occurred_at=clock.now,
                       last_accessed_at=clock.now, expires_at=clock.now + timedelta(hours=1))
    store.put(("memories", "u1", "work"), "code", rec.to_value())
    store.batch([LinkOp("u1", "code", "elaborates", keep.key)])
    assert any(r.key == "code" for r in layer.recall("u1", "door code"))
    clock.advance(hours=2)
    assert all(r.key != "code" for r in layer.recall("u1", "door code"))
    assert store.sweep_ttl() == 1
    assert store.batch([LinksOp("u1", (keep.key,))])[0] == []


def test_generic_delete_of_a_memory_removes_its_links(layer: MemoryLayer, store) -> None:
    a = layer.remember("u1", "Adopted a cat named Miso.")
    b = layer.remember("u1", "Miso is afraid of the vacuum.")
    store.batch([LinkOp("u1", b.key, "elaborates", a.key)])
    store.delete(a.namespace, a.key)
    assert store.batch([LinksOp("u1", (b.key,))])[0] == []
