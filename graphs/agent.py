"""The memory-enabled chat agent, for LangGraph Studio / `langgraph dev`.

Thin wiring: nothing heavy happens at import. `make_graph` opens the store when the
server asks for the graph.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from langgraph.graph.state import CompiledStateGraph

from langmem_layer import MemoryLayer
from langmem_layer.agent import build_agent_graph
from langmem_layer.config import open_store, settings_from_env

__all__ = ["build_agent_graph", "make_graph"]


@contextmanager
def make_graph() -> Iterator[CompiledStateGraph]:
    """Graph factory for `langgraph.json`; database and settings from ``langmem_layer.config``."""
    with open_store() as store:
        store.setup()
        layer = MemoryLayer(store, settings=settings_from_env())
        yield build_agent_graph(layer).compile(store=store)
