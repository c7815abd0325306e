"""Prebuilt agents with memory: ``create_react_agent`` hooks and the ``create_agent``
middleware remember across threads (the fake model's received messages prove it)."""

from __future__ import annotations

import uuid
import warnings

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.prebuilt.chat_agent_executor import AgentState

from langmem_layer import ConfigurationError, MemoryLayer, MemoryState
from tests.fakes import Clock, ScriptedChatModel, tool_call

# Deprecated in LangGraph 1.x in favour of create_agent, and still what many agents use.
pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent


_RUN = uuid.uuid4().hex[:8]  # the checkpointer's tables outlive a test: threads of our own


def _cfg(thread: str, user: str = "alice") -> dict:
    return {"configurable": {"user_id": user, "thread_id": f"{thread}-{_RUN}"}}


def _systems(messages: list) -> list[SystemMessage]:
    return [m for m in messages if isinstance(m, SystemMessage)]


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    return f"Sunny in {city}."


def test_create_react_agent_remembers_across_threads(store, saver, clock: Clock) -> None:
    memory = MemoryLayer(store, clock=clock)  # background extraction
    model = ScriptedChatModel()
    agent = create_react_agent(model, [weather], checkpointer=saver,
                               **memory.react_hooks("Be brief."))
    agent.invoke({"messages": [("user", "My name is Dana and I live in Lisbon.")]}, _cfg("t1"))
    memory.drain()
    agent.invoke({"messages": [("user", "Where do I live?")]}, _cfg("t2"))
    memory.close()

    first, second = model.seen
    assert [m.text for m in _systems(first)] == ["Be brief."]  # nothing known yet
    (system,) = _systems(second)  # one system message: instructions, then the block
    assert system.text.startswith("Be brief.") and "Lives in Lisbon" in system.text
    assert isinstance(second[-1], HumanMessage) and second[-1].text == "Where do I live?"
    assert len(second) == 2  # thread 2 holds only its own turn


def test_react_hooks_load_once_per_turn_through_a_tool_loop(store, saver, clock: Clock) -> None:
    memory = MemoryLayer(store, extraction="inline", clock=clock)
    memory.remember("alice", "Lives in Lisbon.")
    model = ScriptedChatModel(script=[tool_call("weather", "c1", city="Lisbon"), "Sunny."])
    agent = create_react_agent(model, [weather], checkpointer=saver, **memory.react_hooks())
    out = agent.invoke({"messages": [("user", "Weather where I live in Lisbon?")]},
                       _cfg("loop"))
    assert isinstance(out["messages"][2], ToolMessage)
    before_tool, after_tool = model.seen
    assert "Lives in Lisbon" in _systems(before_tool)[0].text
    assert _systems(after_tool) == _systems(before_tool)  # the same block, not reloaded
    assert out["memory_spoken"] and len(out["memory_spoken"]) == 1  # one turn counted
    # The turn, extracted once.
    assert len(memory.admin.decisions("alice", thread_id=f"loop-{_RUN}")) == 1


async def test_create_react_agent_async(astore, clock: Clock) -> None:
    memory = MemoryLayer(astore, clock=clock)
    model = ScriptedChatModel()
    agent = create_react_agent(model, [], **memory.react_hooks())
    await agent.ainvoke({"messages": [("user", "I prefer morning meetings.")]},
                        _cfg("async-1"))
    await memory.adrain()
    await agent.ainvoke({"messages": [("user", "When should we meet?")]}, _cfg("async-2"))
    await memory.aclose()
    assert _systems(model.seen[0]) == []  # no instructions, nothing known: no system message
    assert "Prefers morning meetings." in model.system_text(1)


async def test_create_agent_middleware_remembers_across_threads(astore, clock: Clock) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    memory = MemoryLayer(astore, clock=clock)
    model = ScriptedChatModel()
    agent = create_agent(model, [weather], system_prompt="Be brief.",
                         middleware=[memory.middleware()], checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [("user", "I prefer morning meetings.")]}, _cfg("t1"))
    await memory.adrain()
    await agent.ainvoke({"messages": [("user", "When should we meet?")]}, _cfg("t2"))
    await memory.aclose()

    first, second = model.seen
    assert [m.text for m in _systems(first)] == ["Be brief."]
    (system,) = _systems(second)
    assert system.text.startswith("Be brief.") and "Prefers morning meetings." in system.text


def test_create_agent_middleware_sync_and_isolated_per_user(store, clock: Clock) -> None:
    memory = MemoryLayer(store, extraction="inline", clock=clock)
    model = ScriptedChatModel()
    agent = create_agent(model, [], middleware=[memory.middleware()])
    agent.invoke({"messages": [("user", "My name is Dana and I live in Lisbon.")]}, _cfg("t1"))
    out = agent.invoke({"messages": [("user", "Where do I live?")]}, _cfg("t2"))
    agent.invoke({"messages": [("user", "Where do I live?")]}, _cfg("t3", user="bob"))
    assert "Lives in Lisbon" in model.system_text(1)
    assert "Lives in Lisbon" in out["memory_context"]
    assert _systems(model.seen[2]) == []  # bob has no memory: no block, no system message


def test_memory_state_composes_with_agent_state() -> None:
    class State(AgentState, MemoryState):
        pass

    assert {"messages", "remaining_steps", "memory_context", "recalled"} <= set(
        State.__annotations__)


def test_wire_refuses_a_compiled_graph_and_says_what_to_do(store, clock: Clock) -> None:
    memory = MemoryLayer(store, extraction="inline", clock=clock)
    agent = create_react_agent(ScriptedChatModel(), [])
    with pytest.raises(ConfigurationError, match=r"react_hooks\(\).*middleware\(\)"):
        memory.wire(agent)  # type: ignore[arg-type]
    builder = StateGraph(MemoryState)
    builder.add_node("agent", lambda state: {})
    builder.add_edge(START, "agent")
    with pytest.raises(ConfigurationError, match="before compile"):
        memory.wire(builder.compile())  # type: ignore[arg-type]
