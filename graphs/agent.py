"""The memory-enabled chat agent, for LangGraph Studio / `langgraph dev`.

Thin wiring: nothing heavy happens at import. `make_graph` opens the store when the
server asks for the graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langmem_layer import MemoryLayer, MemoryState, memory_prompt
from langmem_layer.config import agent_chat_model, open_store, settings_from_env


def build_agent_graph(layer: MemoryLayer) -> StateGraph:
    """A one-node chat agent with the memory nodes wired around it."""
    model = agent_chat_model()
    prompt = memory_prompt("You are a helpful assistant with long-term memory.")

    def agent(state: MemoryState) -> dict:
        return {"messages": [model.invoke(prompt(state))]}

    builder = StateGraph(MemoryState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return layer.wire(builder, agent="agent")


@contextmanager
def make_graph() -> Iterator[CompiledStateGraph]:
    """Graph factory for `langgraph.json`; database and settings from ``langmem_layer.config``."""
    with open_store() as store:
        store.setup()
        layer = MemoryLayer(store, settings=settings_from_env())
        yield build_agent_graph(layer).compile(store=store)
