"""The graph side of memory: the state schema and ``wire``.

``MemoryState`` (the graph state the memory nodes read and write, with LangGraph's
``add_messages`` reducer) and ``wire`` (the memory nodes put around an agent node of a
``StateGraph``) need LangGraph's graph package, whose import (the Pregel runtime,
LangSmith's tracing types) costs most of a second; the nodes themselves
(``langmem_layer.facade.nodes``) do not, so a ``MemoryLayer`` that is only asked to
remember and recall, as the command line does, never imports it.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from langmem_layer.errors import ConfigurationError
from langmem_layer.facade.fields import ASSEMBLE, EXTRACT, LOAD, MemoryFields, Wirable

__all__ = ["MemoryState", "wire"]


class MemoryState(MemoryFields, total=False):
    """Graph state with the fields the memory nodes read and write.

    Attributes:
        messages: The conversation (LangGraph's ``add_messages`` reducer).

    The memory fields (``memory_context``, ``recalled``, ``memory_spoken``,
    ``recent_history``, ``knowledge``, ``memory_shown_at``) are ``MemoryFields``'.
    """

    messages: Annotated[list[AnyMessage], add_messages]


def wire(layer: Wirable, builder: StateGraph, agent: str = "agent") -> StateGraph:
    """Put the memory nodes around an existing agent node of ``builder``.

    START → load_memory → assemble_context → agent → extract_after_turn → END. The
    agent's own edges (tools, loops) are kept; only its entry from START and its exits
    to END are re-routed.
    """
    if not isinstance(builder, StateGraph):
        raise ConfigurationError(
            f"wire() takes the StateGraph builder, before compile(), got "
            f"{type(builder).__name__}. For a prebuilt agent pass the memory to it instead: "
            "create_react_agent(model, tools, **memory.react_hooks()) or "
            "create_agent(model, tools, middleware=[memory.middleware()])."
        )
    if agent not in builder.nodes:
        raise ConfigurationError(
            f"wire(): no node named {agent!r}; add your agent node first "
            f"(nodes: {sorted(builder.nodes)})."
        )
    missing = {"memory_context", "recalled", "memory_spoken"} - set(builder.channels)
    if missing:
        raise ConfigurationError(
            f"wire(): the graph state lacks {sorted(missing)}; use langmem_layer.MemoryState "
            "or a TypedDict that extends it as the StateGraph schema."
        )
    builder.add_node(LOAD, layer.load_memory)
    builder.add_node(ASSEMBLE, layer.assemble_context)
    builder.add_node(EXTRACT, layer.extract_after_turn)
    starts = {end for start, end in builder.edges if start == START}
    builder.edges = {(s, e) for s, e in builder.edges if s != START}
    builder.add_edge(START, LOAD)
    builder.add_edge(LOAD, ASSEMBLE)
    for target in starts or {agent}:
        builder.add_edge(ASSEMBLE, target)
    finishers = {s for s, e in builder.edges if e == END}
    builder.edges = {(s, e) for s, e in builder.edges if e != END}
    for source in finishers:
        builder.add_edge(source, EXTRACT)
    if not finishers and agent not in builder.branches:
        builder.add_edge(agent, EXTRACT)
    for branches in builder.branches.values():
        for name, spec in list(branches.items()):
            branches[name] = _reroute_end(spec)
    builder.add_edge(EXTRACT, END)
    return builder


def _reroute_end(spec: Any) -> Any:
    """Send a conditional edge's END to extract_after_turn instead."""
    if spec.ends is not None:
        ends = {k: (EXTRACT if v == END else v) for k, v in spec.ends.items()}
        return spec._replace(ends=ends)

    def redirect(result: Any) -> Any:
        if isinstance(result, list):
            return [redirect(r) for r in result]
        return EXTRACT if result == END else result

    return spec._replace(path=spec.path | RunnableLambda(redirect))
