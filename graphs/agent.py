"""The memory-enabled chat agent, for LangGraph Studio / `langgraph dev`.

Thin wiring: nothing heavy happens at import. `make_graph` opens the store when the
server asks for the graph.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langmem_layer import MemoryLayer, MemoryState, PostgresMemoryStore, memory_prompt


def build_agent_graph(layer: MemoryLayer) -> StateGraph:
    """A one-node chat agent with the memory nodes wired around it."""
    from langmem_layer.embeddings import openai_configured

    if openai_configured():
        from langchain_openai import ChatOpenAI

        model = ChatOpenAI(model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    else:
        from langmem_layer.offline import OfflineChatModel

        model = OfflineChatModel()
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
    """Graph factory for `langgraph.json` (LANGMEM_DATABASE_URL or the embedded database)."""
    url = os.environ.get("LANGMEM_DATABASE_URL")
    opener = (PostgresMemoryStore.from_conn_string(url) if url
              else PostgresMemoryStore.embedded(os.environ.get("LANGMEM_DATA_DIR", ".langmem")))
    with opener as store:
        store.setup()
        layer = MemoryLayer(store)
        yield build_agent_graph(layer).compile(store=store)
