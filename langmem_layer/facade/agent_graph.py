"""The memory-enabled chat agent: one model node with the memory nodes wired around it.

Served by ``langgraph dev`` (``graphs/agent.py``) and by the HTTP app's LangServe
routes (``langmem_layer.server.http.agent_route``); both build it here, so they serve the same
agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from langmem_layer.facade.fields import Wirable
from langmem_layer.facade.nodes import memory_prompt, node
from langmem_layer.facade.wiring import MemoryState, wire

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["AGENT_INSTRUCTIONS", "AgentConfig", "build_agent_graph"]

AGENT_INSTRUCTIONS = "You are a helpful assistant with long-term memory."


class AgentConfig(BaseModel):
    """The agent's ``configurable`` keys (``MemoryConfig``).

    Declared on the graph so clients (LangServe's playground and ``RemoteRunnable``,
    LangGraph Studio) see them; served over HTTP, ``user_id`` is set by the server from
    the authenticated caller.
    """

    user_id: str | None = Field(default=None, description="The user whose memory is used.")
    thread_id: str | None = Field(default=None, description="The conversation thread.")
    profile: str | None = Field(default=None, description="Memory profile (default work).")
    agent_id: str | None = Field(default=None, description="The agent, for per-agent trust.")


def build_agent_graph(layer: Wirable, *, model: BaseChatModel | None = None,
                      instructions: str = AGENT_INSTRUCTIONS) -> StateGraph:
    """A one-node chat agent with ``layer``'s memory nodes wired around it.

    The graph's config schema is ``AgentConfig``, so a
    client (LangServe's playground, ``RemoteRunnable``) sees ``user_id``,
    ``thread_id``, ``profile`` and ``agent_id`` as the run's ``configurable`` keys.

    Args:
        layer: The memory layer (any ``Wirable``) whose nodes
            load, assemble and extract memory.
        model: The chat model; default ``langmem_layer.environment.agent_chat_model``
            (OpenAI when configured, else the offline model).
        instructions: The system instructions the memory block is appended to.

    Returns:
        The uncompiled builder; compile it with the layer's store.
    """
    if model is None:
        from langmem_layer.environment import agent_chat_model

        model = agent_chat_model()
    chat = model
    prompt = memory_prompt(instructions)

    def agent(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [chat.invoke(prompt(state), config)]}

    async def aagent(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await chat.ainvoke(prompt(state), config)]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MemoryState, context_schema=AgentConfig)
    builder.add_node("agent", node(agent, aagent, name="agent"))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return wire(layer, builder, "agent")
