"""The memory-enabled chat agent, for LangGraph Studio / `langgraph dev`.

Thin wiring: nothing heavy happens at import. `make_graph` uses the store and memory
layer the server opened once for its lifetime (``"store"`` in ``langgraph.json``, see
:mod:`langmem_layer.serving`); the server gives the graph that same store.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langmem_layer import MemoryLayer, MemoryState, memory_prompt, serving
from langmem_layer.config import agent_chat_model


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


def make_graph() -> CompiledStateGraph:
    """Graph factory for ``langgraph.json``, on the server's memory layer."""
    return build_agent_graph(serving.current().layer).compile()
