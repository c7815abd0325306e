"""A fact said in a turn ends up stored, whatever agent shape carried it.

Each shape — a wired graph (with and without the memory tools), ``create_react_agent``
and ``create_agent`` (each with and without the tools) — runs one thread of three turns
with the offline chat model, each turn stating one fact, then a second thread. Every
fact must be stored afterwards, by a tool or by the after-turn extraction: on a thread's
first turn and on its later ones.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langmem_layer import MemoryLayer, MemoryState, memory_prompt
from langmem_layer.offline_chat import OfflineChatModel
from tests.fakes import Clock, ScriptedChatModel, tool_call

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

FIRST_THREAD = {
    "I work at Initech.": "Works at Initech.",
    "Remember that I'm allergic to shellfish.": "Is allergic to shellfish.",
    "I live in Lisbon.": "Lives in Lisbon.",
}
SECOND_THREAD = {"I speak Portuguese.": "Speaks Portuguese."}


def _wired(memory: MemoryLayer, *, tools: bool) -> Any:
    model = OfflineChatModel()
    bound = model.bind_tools(memory.tools()) if tools else model
    prompt = memory_prompt("You are helpful.")

    def agent(state: MemoryState) -> dict:
        return {"messages": [bound.invoke(prompt(state))]}

    builder = StateGraph(MemoryState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    if tools:
        builder.add_node("tools", ToolNode(memory.tools()))
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
    return memory.wire(builder, agent="agent").compile(checkpointer=InMemorySaver())


def _react(memory: MemoryLayer, *, tools: bool) -> Any:
    return create_react_agent(OfflineChatModel(), memory.tools() if tools else [],
                              checkpointer=InMemorySaver(),
                              **memory.react_hooks("You are helpful."))


def _chat_agent(memory: MemoryLayer, *, tools: bool) -> Any:
    return create_agent(OfflineChatModel(), memory.tools() if tools else [],
                        system_prompt="You are helpful.", middleware=[memory.middleware()],
                        checkpointer=InMemorySaver())


SHAPES: dict[str, Callable[[MemoryLayer], Any]] = {
    "wire": lambda m: _wired(m, tools=False),
    "wire+tools": lambda m: _wired(m, tools=True),
    "create_react_agent": lambda m: _react(m, tools=False),
    "create_react_agent+tools": lambda m: _react(m, tools=True),
    "create_agent": lambda m: _chat_agent(m, tools=False),
    "create_agent+tools": lambda m: _chat_agent(m, tools=True),
}


def _stored(memory: MemoryLayer, user: str) -> set[str]:
    return {r.record.content for r in memory.list(user)}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_fact_said_is_stored(shape: str, store, clock: Clock) -> None:
    memory = MemoryLayer(store, clock=clock)
    agent = SHAPES[shape](memory)
    user, run = f"u-{shape}", uuid.uuid4().hex[:8]
    for thread, turns in (("a", FIRST_THREAD), ("b", SECOND_THREAD)):
        config = {"configurable": {"user_id": user, "thread_id": f"{thread}-{run}"}}
        for said in turns:
            out = agent.invoke({"messages": [("user", said)]}, config)
            assert isinstance(out["messages"][-1], AIMessage)
    memory.close()  # waits for the extraction of every queued turn
    assert set(FIRST_THREAD.values()) | set(SECOND_THREAD.values()) <= _stored(memory, user)


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_every_fact_said_is_stored_async(shape: str, astore, clock: Clock) -> None:
    memory = MemoryLayer(astore, clock=clock)
    agent = SHAPES[shape](memory)
    user, run = f"au-{shape}", uuid.uuid4().hex[:8]
    config = {"configurable": {"user_id": user, "thread_id": f"a-{run}"}}
    for said in FIRST_THREAD:
        await agent.ainvoke({"messages": [("user", said)]}, config)
    await memory.aclose()
    assert set(FIRST_THREAD.values()) <= {r.record.content for r in await memory.alist(user)}


def test_offline_tool_call_ids_never_repeat_in_a_thread(store, clock: Clock) -> None:
    memory = MemoryLayer(store, extraction="inline", clock=clock)
    agent = _react(memory, tools=True)
    config = {"configurable": {"user_id": "ids", "thread_id": uuid.uuid4().hex}}
    for said in [*FIRST_THREAD, "Where do I work?"]:
        out = agent.invoke({"messages": [("user", said)]}, config)
    ids = [c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 4 and len(set(ids)) == 4


@pytest.mark.parametrize("shape", ["create_react_agent", "create_agent"])
def test_a_turn_whose_tool_call_never_ran_still_reaches_extraction(
        shape: str, store, clock: Clock) -> None:
    """A model that repeats an answered tool-call id ends the agent without running the
    tool; the fact the user said that turn is still extracted."""
    memory = MemoryLayer(store, extraction="inline", clock=clock)

    def remember(content: str) -> str:
        """Remember a fact."""
        return f"Remembered {content}"

    model = ScriptedChatModel(script=[
        tool_call("remember", "same-id", content="Is allergic to shellfish."), "Noted.",
        tool_call("remember", "same-id", content="Works at Initech."),  # never runs
    ])
    saver = InMemorySaver()
    if shape == "create_react_agent":
        agent = create_react_agent(model, [remember], checkpointer=saver,
                                   **memory.react_hooks())
    else:
        agent = create_agent(model, [remember], middleware=[memory.middleware()],
                             checkpointer=saver)
    config = {"configurable": {"user_id": f"dup-{shape}", "thread_id": uuid.uuid4().hex}}
    agent.invoke({"messages": [("user", "I'm allergic to shellfish.")]}, config)
    agent.invoke({"messages": [("user", "I work at Initech.")]}, config)
    assert "Works at Initech." in _stored(memory, f"dup-{shape}")
