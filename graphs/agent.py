"""The memory-enabled chat agent, for LangGraph Studio / `langgraph dev`.

Thin wiring: nothing heavy happens at import. `make_graph` uses the store and memory
layer the server opened once for its lifetime (``"store"`` in ``langgraph.json``, see
``langmem_layer.server.served``); the server gives the graph that same store.
"""

from __future__ import annotations

from langgraph.graph.state import CompiledStateGraph

from langmem_layer.facade.agent_graph import build_agent_graph
from langmem_layer.server import served as serving

__all__ = ["build_agent_graph", "make_graph"]


def make_graph() -> CompiledStateGraph:
    """Graph factory for ``langgraph.json``, on the server's memory layer."""
    return build_agent_graph(serving.current().layer).compile()
