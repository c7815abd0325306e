"""Memory for prebuilt agents: ``create_react_agent`` hooks and a ``create_agent`` middleware.

Both do what the three nodes do around an agent node (``langmem_layer.facade.wiring.wire``),
inside the prebuilt agent's own loop:

* before the first model call of a turn (the newest message is the user's): load and
  assemble the memory block, as ``load_memory`` and ``assemble_context`` do, keeping
  it in the state for the turn's later model calls (after tool results), so a tool
  loop neither reloads nor counts a memory as spoken twice;
* on every model call: put the block in the system message;
* when the turn is over (the model answered without tool calls): record it for
  extraction, as ``extract_after_turn`` does.

The hooks call the layer's nodes, so the identity comes from
``config["configurable"]`` (``user_id``, ``profile``, ``thread_id``, ``agent_id``) as
in a wired graph.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from langchain.agents import AgentState as ChatAgentState
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.config import get_config
from langgraph.prebuilt.chat_agent_executor import AgentState as ReactAgentState
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from langmem_layer.facade.fields import MemoryFields, Wirable

__all__ = [
    "MemoryAgentState",
    "MemoryMiddleware",
    "MemoryMiddlewareState",
    "ReactHooks",
    "react_hooks",
]


class MemoryAgentState(ReactAgentState, MemoryFields):
    """``create_react_agent``'s ``AgentState`` with the memory fields of
    ``MemoryState``."""


class MemoryMiddlewareState(ChatAgentState[Any], MemoryFields):
    """``langchain.agents.AgentState`` with the memory fields (``MemoryMiddleware``'s)."""


class ReactHooks(TypedDict):
    """Keyword arguments for ``create_react_agent`` (see ``react_hooks``)."""

    pre_model_hook: RunnableLambda
    post_model_hook: RunnableLambda
    state_schema: type[MemoryAgentState]
    version: Literal["v2"]


# -- what both ways share ---------------------------------------------------------------


def _messages(state: Mapping[str, Any]) -> list[BaseMessage]:
    return list(state.get("messages") or [])


def _turn_starts(state: Mapping[str, Any]) -> bool:
    messages = _messages(state)
    return bool(messages) and isinstance(messages[-1], HumanMessage)


def _turn_over(state: Mapping[str, Any]) -> bool:
    """Whether the agent ends after this model call: its answer calls no tool that has
    not answered yet (the rule ``create_react_agent`` routes by).

    A model may repeat a tool-call id that already has a result earlier in the thread;
    the agent then runs no tool and ends, and the turn must still reach extraction.
    """
    messages = _messages(state)
    if not messages or not isinstance(messages[-1], AIMessage):
        return False
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return all(call.get("id") in answered for call in messages[-1].tool_calls)


def _after_load(layer: Wirable, state: Mapping[str, Any], loaded: dict[str, Any],
                config: RunnableConfig) -> dict[str, Any]:
    """``assemble_context`` on the state as ``load_memory``'s update leaves it."""
    removed = {m.id for m in loaded.get("messages") or []}
    merged = {**state, **{k: v for k, v in loaded.items() if k != "messages"},
              "messages": [m for m in _messages(state) if m.id not in removed]}
    return {**loaded, **layer.assemble_context.invoke(merged, config)}


def _prepare(layer: Wirable, state: Mapping[str, Any], config: RunnableConfig
             ) -> dict[str, Any]:
    if not _turn_starts(state):
        return {}
    return _after_load(layer, state, layer.load_memory.invoke(state, config), config)


async def _aprepare(layer: Wirable, state: Mapping[str, Any], config: RunnableConfig
                    ) -> dict[str, Any]:
    if not _turn_starts(state):
        return {}
    loaded = await layer.load_memory.ainvoke(state, config)
    return _after_load(layer, state, loaded, config)


def _system_text(base: str, block: str) -> str:
    return "\n\n".join(part for part in (base.strip(), block) if part)


def _kept(state: Mapping[str, Any], update: Mapping[str, Any]) -> list[BaseMessage]:
    removed = {m.id for m in update.get("messages") or []}
    return [m for m in _messages(state) if m.id not in removed]


# -- create_react_agent ------------------------------------------------------------------


def react_hooks(layer: Wirable, prompt: str = "") -> ReactHooks:
    """Keyword arguments giving a ``create_react_agent`` agent long-term memory.

    ``pre_model_hook`` loads and assembles the block at the start of a turn and hands
    the model ``[SystemMessage(prompt + block), *messages]`` (no system message when
    both are empty); ``post_model_hook``
    records the finished turn for extraction; ``state_schema`` is
    ``MemoryAgentState``. Pass your instructions as ``prompt`` here rather than as
    ``create_react_agent``'s ``prompt=``, so the model gets one system message.

    Example:
        >>> agent = create_react_agent(model, tools, checkpointer=saver,
        ...                            **memory.react_hooks("Be brief."))
        >>> agent.invoke({"messages": [("user", "hi")]},
        ...              {"configurable": {"user_id": "alice", "thread_id": "t1"}})

    Args:
        layer: The memory (a ``MemoryLayer``).
        prompt: Instructions placed before the memory block.
    """

    def model_input(state: Mapping[str, Any], update: dict[str, Any]) -> dict[str, Any]:
        block = update.get("memory_context", state.get("memory_context")) or ""
        text = _system_text(prompt, block)
        system = [SystemMessage(text)] if text else []
        return {**update, "llm_input_messages": [*system, *_kept(state, update)]}

    def pre(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return model_input(state, _prepare(layer, state, config))

    async def apre(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return model_input(state, await _aprepare(layer, state, config))

    def post(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        if _turn_over(state):
            layer.extract_after_turn.invoke(state, config)
        return {}

    async def apost(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        if _turn_over(state):
            await layer.extract_after_turn.ainvoke(state, config)
        return {}

    return ReactHooks(
        pre_model_hook=RunnableLambda(pre, afunc=apre, name="load_memory"),
        post_model_hook=RunnableLambda(post, afunc=apost, name="extract_after_turn"),
        state_schema=MemoryAgentState,
        version="v2",
    )


# -- langchain.agents.create_agent -------------------------------------------------------


class MemoryMiddleware(AgentMiddleware[MemoryMiddlewareState, Any, Any]):
    """Long-term memory for ``langchain.agents.create_agent``.

    ``before_model`` loads and assembles the block at the start of a turn;
    ``wrap_model_call`` appends it to the agent's system message on every model call;
    ``after_agent`` records the finished turn for extraction. Its state schema,
    ``MemoryMiddlewareState``, is merged into the agent's by ``create_agent``.

    Example:
        >>> agent = create_agent(model, tools, system_prompt="Be brief.",
        ...                      middleware=[memory.middleware()], checkpointer=saver)

    Args:
        layer: The memory (a ``MemoryLayer``).
    """

    state_schema = MemoryMiddlewareState

    def __init__(self, layer: Wirable) -> None:
        super().__init__()
        self.layer = layer
        self.tools = []

    @property
    def name(self) -> str:
        """The middleware's node-name prefix."""
        return "memory"

    def before_model(self, state: MemoryMiddlewareState, runtime: Runtime[Any]
                     ) -> dict[str, Any] | None:
        """Load and assemble the memory block when a turn starts."""
        return _prepare(self.layer, state, get_config()) or None

    async def abefore_model(self, state: MemoryMiddlewareState, runtime: Runtime[Any]
                            ) -> dict[str, Any] | None:
        """Async twin of ``before_model``."""
        return await _aprepare(self.layer, state, get_config()) or None

    def wrap_model_call(self, request: ModelRequest[Any],
                        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
                        ) -> ModelResponse[Any]:
        """Call the model with the memory block in its system message."""
        return handler(_with_block(request))

    async def awrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async twin of ``wrap_model_call``."""
        return await handler(_with_block(request))

    def after_agent(self, state: MemoryMiddlewareState, runtime: Runtime[Any]
                    ) -> dict[str, Any] | None:
        """Record the finished turn for extraction.

        The agent has ended, whatever its last message is (an answer, or tool calls
        it did not run): the turn is recorded either way, so nothing said is lost.
        """
        if _messages(state):
            self.layer.extract_after_turn.invoke(state, get_config())
        return None

    async def aafter_agent(self, state: MemoryMiddlewareState, runtime: Runtime[Any]
                           ) -> dict[str, Any] | None:
        """Async twin of ``after_agent``."""
        if _messages(state):
            await self.layer.extract_after_turn.ainvoke(state, get_config())
        return None


def _with_block(request: ModelRequest[Any]) -> ModelRequest[Any]:
    block = str((request.state or {}).get("memory_context") or "")
    if not block:
        return request
    base = request.system_message.text if request.system_message is not None else ""
    return request.override(system_message=SystemMessage(_system_text(base, block)))
