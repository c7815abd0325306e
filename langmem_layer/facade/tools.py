"""Memory tools for an agent to manage its user's memory: remember, recall, correct, forget.

LangChain tools with pydantic argument schemas. The user and profile are the run's,
from ``config["configurable"]`` (``user_id``, ``profile``, ``thread_id``,
``agent_id``): no schema has a user field, and a ``user_id`` a model puts in its
arguments is dropped by the schema before the tool runs, so a model can never read or
write another user's memory.

Writes go through the write path as an extractor's proposals do
(``langmem_layer.write.apply.ingest`` with the tool's operation): the gate decides
(a repeated fact reinforces the memory it repeats), the decision is logged
(``memory.admin.decisions``), a correction supersedes its memory (which keeps its
history, contradicted, linked to the new one) and forgetting archives it.

Content is checked by the one rule every way in applies
(``langmem_layer.extract.gate.content_problem``), so a tool refuses exactly what
``remember`` and the REST API refuse, with the same message. A call the model can fix
(content the rule refuses, an unknown or retired id, a write the gate refuses) is a
tool error: the model reads ``"Error: ..."`` (``"Not stored: ..."`` for the gate) in a
``ToolMessage`` whose ``status`` is ``"error"``, and an MCP client gets ``isError``.

Each tool is one flow (``langmem_layer.flow``) run by the layer's runner in sync
(``invoke``) or async (``ainvoke``) code.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from langmem_layer import control
from langmem_layer.errors import InvalidContentError, MemoryNotFoundError
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.facade.nodes import run_identity
from langmem_layer.flow import Env, Flow
from langmem_layer.read import recall as read
from langmem_layer.types import Kind, MemoryConfig, Recalled, Status
from langmem_layer.write import apply as write
from langmem_layer.write.apply import IngestResult
from langmem_layer.write.new_memory import check_content

__all__ = [
    "CorrectInput",
    "ForgetInput",
    "RecallInput",
    "RememberInput",
    "ToolTarget",
    "create_memory_tools",
]

#: Confidence of what a tool writes: the model was told it, or asked to change it.
TOOL_CONFIDENCE = 0.9


class RememberInput(BaseModel):
    """Arguments of ``remember``."""

    content: str = Field(description="The fact, preference or event to remember, as one "
                                     "short self-contained sentence about the user.")
    kind: Kind = Field(default=Kind.PROFILE_FACT,
                       description="profile_fact (default), preference, episodic_event, "
                                   "open_loop (a plan or promise), protocol (a habit).")


class RecallInput(BaseModel):
    """Arguments of ``recall``."""

    query: str = Field(description="What to look up in the user's memory.")
    limit: int = Field(default=5, ge=1, le=50, description="At most this many memories.")


class CorrectInput(BaseModel):
    """Arguments of ``correct`` (and its alias ``update``)."""

    memory_id: str = Field(description="The id of the memory to correct, as recall shows it.")
    content: str = Field(description="What the memory should say instead.")


class ForgetInput(BaseModel):
    """Arguments of ``forget``."""

    memory_id: str = Field(description="The id of the memory to forget, as recall shows it.")


class ToolTarget(Protocol):
    """What the tools run on (a ``MemoryLayer``)."""

    @property
    def env(self) -> Env:
        """Settings, gate and token counter."""
        ...

    def now(self) -> datetime:
        """The current time."""
        ...

    def run(self, flow: Flow[Any]) -> Any:
        """Execute a flow synchronously."""
        ...

    async def arun(self, flow: Flow[Any]) -> Any:
        """Execute a flow asynchronously."""
        ...


def _line(r: Recalled) -> str:
    return f"[{r.key}] ({r.record.kind.value}) {r.record.content}"


def _apply(layer: ToolTarget, who: MemoryConfig, text: str, op: MemoryOperation,
           targets: Sequence[Recalled] = ()) -> Flow[IngestResult]:
    """The write path on one operation, as if an extractor had proposed it."""
    # A message of its own: the decision log and the memory's source name the tool call.
    message = HumanMessage(text, id=f"tool:{uuid.uuid4()}")
    return write.ingest(
        layer.env, who["user_id"], [message], profile=who.get("profile"),
        thread_id=who.get("thread_id"), agent_id=who.get("agent_id"), now=layer.now(),
        operations=[op.model_copy(update={"source_message_id": message.id})],
        targets=targets)


def _accepted(result: IngestResult) -> None:
    """Raise the gate's refusal as a tool error; nothing when it accepted."""
    if result.decisions and not result.decisions[0].accepted:
        raise ToolException(f"Not stored: {result.decisions[0].reason}.")


def _remember(layer: ToolTarget, who: MemoryConfig, args: RememberInput) -> Flow[str]:
    check_content(layer.env, args.content)  # before the gate: refused as remember() does
    op = MemoryOperation(op=OpType.ADD, content=args.content, kind=args.kind,
                         confidence=TOOL_CONFIDENCE, reason="remember tool")
    result = yield from _apply(layer, who, args.content, op)
    _accepted(result)
    if result.written:
        return f"Remembered [{result.written[0]}] {args.content}"
    known = ", ".join(result.changed) or "an existing memory"
    return f"Already known: reinforced [{known}]."


def _recall(layer: ToolTarget, who: MemoryConfig, args: RecallInput) -> Flow[str]:
    found = yield from read.recall(layer.env, who["user_id"], args.query,
                                   profile=who.get("profile"), limit=args.limit,
                                   now=layer.now(), refs=(), matching=True)
    if not found:
        return "No memories found."
    return "\n".join(_line(r) for r in found)


def _target(who: MemoryConfig, memory_id: str) -> Flow[Recalled]:
    """The run's user's active memory ``memory_id``; raises MemoryNotFoundError."""
    found = yield from control.get(who["user_id"], memory_id)
    if found.record.status != Status.ACTIVE:
        raise _Refused(f"Memory {memory_id} is {found.record.status.value}, not active.")
    return found


def _correct(layer: ToolTarget, who: MemoryConfig, args: CorrectInput) -> Flow[str]:
    old = yield from _target(who, args.memory_id)
    check_content(layer.env, args.content)
    op = MemoryOperation(op=OpType.UPDATE, content=args.content, target_id=old.key,
                         kind=old.record.kind, layer=old.record.layer,
                         policy=old.record.policy,
                         confidence=TOOL_CONFIDENCE, reason="correct tool")
    result = yield from _apply(layer, who, args.content, op, targets=[old])
    _accepted(result)
    new = result.written[0] if result.written else old.key
    return f"Corrected: [{old.key}] is superseded by [{new}] {args.content}"


def _forget(layer: ToolTarget, who: MemoryConfig, args: ForgetInput) -> Flow[str]:
    old = yield from _target(who, args.memory_id)
    op = MemoryOperation(op=OpType.FORGET, target_id=old.key, confidence=TOOL_CONFIDENCE,
                         reason="forget tool")
    result = yield from _apply(layer, who, f"forget: {old.record.content}", op)
    _accepted(result)
    return f"Forgotten: [{old.key}] {old.record.content}"


class _Refused(Exception):
    """A tool call the model can fix (a tool error shown to it, not raised to the caller)."""


def _tool(layer: ToolTarget, name: str, description: str, schema: type[BaseModel],
          flow: Callable[[ToolTarget, MemoryConfig, Any], Flow[str]]) -> BaseTool:
    """One tool over one flow: the sync and async bodies only choose the runner."""

    def start(config: RunnableConfig, kwargs: dict[str, Any]) -> Flow[str]:
        # Raised, not shown to the model: a run without a user is the caller's mistake.
        return _guarded(flow(layer, run_identity(config), schema(**kwargs)))

    def sync(config: RunnableConfig, **kwargs: Any) -> str:
        result: str = layer.run(start(config, kwargs))
        return result

    async def async_(config: RunnableConfig, **kwargs: Any) -> str:
        result: str = await layer.arun(start(config, kwargs))
        return result

    # handle_tool_error: a ToolException becomes the tool's answer, marked as an error
    # (ToolMessage.status "error"; isError over MCP), instead of ending the run.
    return StructuredTool.from_function(func=sync, coroutine=async_, name=name,
                                        description=description, args_schema=schema,
                                        handle_tool_error=True)


def _guarded(flow: Flow[str]) -> Flow[str]:
    """The flow, with a bad id or content raised as a tool error the model can read."""
    try:
        return (yield from flow)
    except (_Refused, MemoryNotFoundError, InvalidContentError) as e:
        raise ToolException(f"Error: {e}") from e


def create_memory_tools(layer: ToolTarget) -> list[BaseTool]:
    """The memory tools bound to ``layer``: ``remember``, ``recall``, ``correct``,
    ``update`` (an alias of ``correct``) and ``forget``.

    Each reads its user and profile from the run's config; none takes a user id.

    Example:
        >>> agent = create_react_agent(model, memory.tools(), checkpointer=saver)
        >>> agent.invoke({"messages": [("user", "I'm vegetarian")]},
        ...              {"configurable": {"user_id": "alice", "thread_id": "t1"}})

    Args:
        layer: The memory (a ``MemoryLayer``).
    """
    correct = ("Correct a memory that is wrong or outdated: it is replaced by the new "
               "text (the old one is kept in its history). Use the id recall shows.")
    return [
        _tool(layer, "remember", "Store a fact, preference, event or plan about the user "
              "in long-term memory, for future conversations.", RememberInput, _remember),
        _tool(layer, "recall", "Search the user's long-term memory; returns matching "
              "memories as [id] (kind) text.", RecallInput, _recall),
        _tool(layer, "correct", correct, CorrectInput, _correct),
        _tool(layer, "update", correct, CorrectInput, _correct),
        _tool(layer, "forget", "Forget a memory the user wants forgotten (it is archived "
              "and no longer recalled). Use the id recall shows.", ForgetInput, _forget),
    ]
