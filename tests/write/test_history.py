"""The per-user message log (the long-term tier) and the short-term window:
recent history from other threads in the memory block, its budget, boundaries,
profiles, retention."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.store.base import BaseStore

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.read.block import AVOID, HEADER, RECENT_HISTORY, build_context_block
from langmem_layer.tokens import get_token_counter
from langmem_layer.types import Kind, Layer, Policy
from tests.facade.test_working import build_graph
from tests.fakes import Clock
from tests.read.test_context import mem

COUNTER = get_token_counter("o200k_base")
SECTION = f"### {RECENT_HISTORY}"


pytestmark = pytest.mark.usefixtures("clean_working_tables")


def say(graph: Any, user: str, thread: str, text: str, clock: Clock,
        profile: str = "work") -> dict[str, Any]:
    clock.advance(minutes=1)
    return graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {
        "user_id": user, "thread_id": thread, "profile": profile}})


def recent_section(block: str) -> list[str]:
    if SECTION not in block:
        return []
    return [line[2:] for line in block.split(SECTION)[1].strip().splitlines()]


def test_new_thread_sees_the_users_last_day_from_other_threads(store, saver,
                                                               clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock,
                        settings=MemorySettings(extract_every_n_turns=10_000))
    graph = build_graph(layer, extract=True).compile(store=store, checkpointer=saver)
    t1, t2, t3 = (uuid.uuid4().hex for _ in range(3))
    say(graph, "ana", t1, "I booked a table at Nopa for Friday.", clock)
    say(graph, "ana", t1, "Please use the tool to check the weather.", clock)
    say(graph, "ben", uuid.uuid4().hex, "Ben's own secret plans.", clock)
    say(graph, "ana", uuid.uuid4().hex, "My personal diary entry.", clock, profile="personal")
    clock.advance(hours=2)

    out = say(graph, "ana", t2, "Hello again", clock)
    assert recent_section(out["memory_context"]) == [
        "user: I booked a table at Nopa for Friday.",
        "assistant: Reply to: I booked a table at Nopa for Friday.",
        "user: Please use the tool to check the weather.",  # tool traffic is not logged
        "assistant: Reply to: Please use the tool to check the weather.",
    ]
    assert out["memory_context"].startswith(HEADER)
    # the section follows the memory sections, after everything else
    assert out["memory_context"].rstrip().split("\n\n")[-1].startswith(SECTION)

    clock.advance(hours=23)  # t1 is now more than 24 h old; t2 is not
    out = say(graph, "ana", t3, "Anything new?", clock)
    lines = recent_section(out["memory_context"])
    assert lines[:2] == ["user: Hello again", "assistant: Reply to: Hello again"]
    assert not any("Nopa" in line for line in lines)
    layer.close()


def test_recent_history_api_limits_and_order(store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    for n in range(30):
        clock.advance(minutes=1)
        layer.threads.record_turn("cy", [HumanMessage(f"message {n}", id=f"cy-h{n}"),
                                 AIMessage(f"reply {n}", id=f"cy-a{n}")],
                          thread_id=f"t{n % 3}")
    recent = layer.threads.recent_history("cy", thread_id="t0")
    assert len(recent) == 20
    assert [m.text for m in recent][-2:] == ["message 29", "reply 29"]
    assert all(m.thread_id != "t0" for m in recent)
    assert [m.at for m in recent] == sorted(m.at for m in recent)
    assert layer.threads.recent_history("cy", limit=3, hours=0.01)[-1].text == "reply 29"
    # logging is once per message
    layer.threads.record_turn("cy", [HumanMessage("message 29", id="cy-h29")], thread_id="t2")
    assert len(layer.threads.recent_history("cy", limit=100, hours=48)) == 60
    assert layer.threads.clear_history("cy", thread_id="t1") == 20
    assert layer.threads.clear_history("cy") == 40


def test_a_boundary_never_comes_back_as_recent_history(store, saver, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    graph = build_graph(layer, extract=True).compile(store=store, checkpointer=saver)
    t1 = uuid.uuid4().hex
    say(graph, "dee", t1, "Please never mention my divorce.", clock)
    say(graph, "dee", t1, "I like jazz on Sundays.", clock)
    assert any(r.record.policy == Policy.AVOID for r in layer.list("dee"))
    out = say(graph, "dee", uuid.uuid4().hex, "Hi", clock)
    lines = recent_section(out["memory_context"])
    assert "user: I like jazz on Sundays." in lines
    assert not any("divorce" in line for line in lines)  # nor the reply that echoed it
    assert not any("divorce" in m.text for m in layer.threads.recent_history("dee"))


def test_retention_purge_by_the_sweep_job(store, saver, pg_uri: str, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    t0 = clock.now
    layer.threads.record_turn("eve", [HumanMessage("old news", id="e1"), AIMessage("ok", id="e2")],
                      thread_id="t")
    clock.advance(days=89)
    layer.threads.record_turn("fay", [HumanMessage("recent", id="f1")], thread_id="t")
    assert layer.threads.sweep_sessions(saver, now=t0 + timedelta(days=89)).purged_messages == 0
    result = layer.threads.sweep_sessions(saver, now=t0 + timedelta(days=90, minutes=1))
    assert result.purged_messages == 2
    with psycopg.connect(pg_uri) as conn:
        left = conn.execute("SELECT user_id, message_id FROM langmem_messages").fetchall()
    assert left == [("fay", "f1")]
    short = MemoryLayer(store, clock=clock, settings=MemorySettings(
        message_log_retention_days=1))
    swept = short.threads.sweep_sessions(saver, now=clock.now + timedelta(days=2))
    assert swept.purged_messages == 1


def test_recent_history_only_gets_what_the_memories_leave() -> None:
    memories = [mem("p", "Pinned fact.", layer=Layer.PROCEDURAL),
                mem("s", "A semantic fact."), mem("e", "An event.", layer=Layer.EPISODIC),
                mem("x", "A boundary.", policy=Policy.AVOID)]
    lines = [f"user: line number {n} " + "word " * 5 for n in range(20)]
    full = build_context_block(memories, budget_tokens=10_000, counter=COUNTER,
                               recent_history=lines)
    assert full.history == 20 and set(full.placements) == {"p", "s", "e", "x"}
    assert full.text.index(f"### {AVOID}") < full.text.index(SECTION)
    assert recent_section(full.text) == [" ".join(line.split()) for line in lines]
    alone = build_context_block(memories, budget_tokens=10_000, counter=COUNTER)
    for budget in range(alone.tokens, full.tokens + 1, 7):
        block = build_context_block(memories, budget_tokens=budget, counter=COUNTER,
                                    recent_history=lines)
        assert block.tokens <= budget
        without = build_context_block(memories, budget_tokens=budget, counter=COUNTER)
        assert (block.placements, block.dropped) == (without.placements, without.dropped)
        kept = recent_section(block.text)
        assert len(kept) == block.history
        assert kept == [" ".join(line.split()) for line in lines][len(lines) - len(kept):]
    assert build_context_block([], budget_tokens=3, counter=COUNTER,
                               recent_history=lines).text == ""
    # a long line that does not fit ends the section: no older line skips past it
    gap = [*lines[:5], "user: " + "long " * 400, *lines[5:8]]
    block = build_context_block([], budget_tokens=150, counter=COUNTER, recent_history=gap)
    assert recent_section(block.text) == [" ".join(line.split()) for line in lines[5:8]]


class NoDatabase(BaseStore):
    """A store that fails any request: proves a node makes no round trip."""

    def batch(self, ops: Any) -> Any:
        raise AssertionError("database round trip")

    async def abatch(self, ops: Any) -> Any:
        raise AssertionError("database round trip")


def test_assemble_context_uses_the_short_term_window_without_a_round_trip(
        clock: Clock) -> None:
    layer = MemoryLayer(NoDatabase(), clock=clock)
    messages = [m for n in range(20) for m in (HumanMessage(f"q{n}", id=f"q{n}"),
                                               AIMessage(f"a{n}", id=f"a{n}"))]
    recent = [{"thread_id": "other", "message_id": f"o{n}", "role": "user", "text": text,
               "at": clock.now.isoformat()} for n, text in enumerate(["q19", "elsewhere"])]
    out = layer.assemble_context.invoke(
        {"messages": messages, "recalled": [], "recent_history": recent},
        {"configurable": {"user_id": "gus"}})
    # "q19" is already in the active thread's last 10 messages: not repeated
    assert recent_section(out["memory_context"]) == ["user: elsewhere"]


def test_short_term_window_never_starts_on_a_tool_result() -> None:
    from langmem_layer.message_log import short_term

    call = {"id": "c", "name": "f", "args": {}}
    thread = [HumanMessage("q", id="1"), AIMessage("", tool_calls=[call], id="2"),
              ToolMessage("r", tool_call_id="c", id="3"), AIMessage("a", id="4")]
    assert [m.id for m in short_term(thread, 2)] == ["4"]
    assert [m.id for m in short_term(thread, 3)] == ["2", "3", "4"]


def test_the_direct_block_is_what_the_node_renders(store, saver, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    graph = build_graph(layer, extract=True).compile(store=store, checkpointer=saver)
    layer.remember("gus", "Adopted a beagle named Biscuit.", kind=Kind.PROFILE_FACT)
    say(graph, "gus", uuid.uuid4().hex, "I booked a table at Nopa for Friday.", clock)
    clock.advance(minutes=1)
    query = "Where is the Biscuit walk on Friday?"

    direct = layer.context_block("gus", query, profile="work")
    out = graph.invoke({"messages": [HumanMessage(query)]}, {"configurable": {
        "user_id": "gus", "thread_id": uuid.uuid4().hex, "profile": "work"}})
    assert "user: I booked a table at Nopa for Friday." in recent_section(direct.text)
    assert "Biscuit" in direct.text
    assert direct.text == out["memory_context"]
    layer.close()
