"""The three graph nodes, the state they need, and `wire` to put them around an agent.

Nodes are thin adapters: they read the run's identity from
``config["configurable"]`` and call the layer's methods (any ``NodeTarget``).
Each node is a ``RunnableLambda`` with a sync and an async body, so it works in
``invoke`` and ``ainvoke`` graphs alike; it calls its body directly (``node``), as
LangGraph traces each node's run itself.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, Unpack, cast

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables.config import RunnableConfig, ensure_config

from langmem_layer import flow as runner
from langmem_layer.facade.fields import ASSEMBLE, EXTRACT, LOAD, MemoryFields, Wirable
from langmem_layer.facade.params import LoadThreadArgs, RecordTurnArgs
from langmem_layer.knowledge import dump_documents, load_documents
from langmem_layer.message_log import short_term
from langmem_layer.read.block import OPEN_THREADS, RELEVANT
from langmem_layer.read.query import bounded
from langmem_layer.read.recall import context_block as block_with_history
from langmem_layer.store.ops import LoggedMessage
from langmem_layer.types import MemoryConfig, MemoryRecord, Recalled
from langmem_layer.working.trim import WorkingLoad

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableLambda

    from langmem_layer.facade.wiring import MemoryState

__all__ = [
    "MemoryFields",
    "NodeTarget",
    "Wirable",
    "build_nodes",
    "memory_prompt",
    "memory_system_message",
    "node",
    "run_identity",
]

T = TypeVar("T")


def __getattr__(name: str) -> Any:
    # MemoryState and wire moved to langmem_layer.facade.wiring (they need LangGraph's
    # graph package, which this module no longer imports); the old path still works.
    if name in {"MemoryState", "wire"}:
        from langmem_layer.facade import wiring

        return getattr(wiring, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class NodeTarget(Protocol):
    """What the nodes call (``MemoryLayer`` is one).

    Defined here, where it is used, so this module needs nothing above it.
    """

    @property
    def env(self) -> runner.Env:
        """Settings, gate and token counter."""
        ...

    def now(self) -> datetime:
        """The current time."""
        ...

    @property
    def threads(self) -> ThreadCalls:
        """The layer's thread calls (``memory.threads``)."""
        ...

    @property
    def agents(self) -> KnowledgeCalls:
        """The layer's knowledge calls (``memory.agents``)."""
        ...


class ThreadCalls(Protocol):
    """What the nodes call on ``memory.threads``."""

    def load_thread(self, user_id: str, messages: Sequence[BaseMessage],
                    query: str | None = None, **kw: Unpack[LoadThreadArgs]) -> WorkingLoad:
        """Trim, hand dropped turns over, recall (see ``Threads.load_thread``)."""
        ...

    async def aload_thread(self, user_id: str, messages: Sequence[BaseMessage],
                           query: str | None = None, **kw: Unpack[LoadThreadArgs]
                           ) -> WorkingLoad:
        """Async twin of ``load_thread``."""
        ...

    def record_turn(self, user_id: str, messages: Sequence[BaseMessage],
                    **kw: Unpack[RecordTurnArgs]) -> int | None:
        """Queue, log and reinforce a finished turn (see ``Threads.record_turn``)."""
        ...

    async def arecord_turn(self, user_id: str, messages: Sequence[BaseMessage],
                           **kw: Unpack[RecordTurnArgs]) -> int | None:
        """Async twin of ``record_turn``."""
        ...


class KnowledgeCalls(Protocol):
    """What the nodes call on ``memory.agents``."""

    def beside_knowledge(self, query: str | None, work: Callable[[], T]
                         ) -> tuple[T, list[Document]]:
        """Run ``work`` while the knowledge source is queried."""
        ...

    async def abeside_knowledge(self, query: str | None, work: Awaitable[T]
                                ) -> tuple[T, list[Document]]:
        """Async twin of ``beside_knowledge``."""
        ...


def run_identity(config: RunnableConfig | None) -> MemoryConfig:
    """The run's user, profile, agent and thread from ``config["configurable"]``."""
    conf = (config or {}).get("configurable") or {}
    user_id = runner.require_user(conf.get("user_id"))
    identity: MemoryConfig = {"user_id": user_id}
    for field in ("profile", "agent_id", "thread_id"):
        if conf.get(field):
            identity[field] = str(conf[field])
    return identity


def _last_human(messages: Sequence[BaseMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage):
            return i
    return None


def _query(state: MemoryState) -> str | None:
    messages = state.get("messages") or []
    i = _last_human(messages)
    # A pasted document is searched with its beginning and end (read.query.bounded).
    return bounded(messages[i].text) if i is not None else None


def _dump(recalled: Sequence[Recalled], placements: dict[str, str] | None = None, *,
          values: Sequence[Any] | None = None) -> list[dict[str, Any]]:
    # ``values``: the records' values as the state holds them, in order (assemble_context's
    # input, which load_memory dumped): a dict is kept, as serialising each record again
    # costs more than the block.
    given = values if values is not None else [None] * len(recalled)
    return [
        {
            "key": r.key,
            "namespace": list(r.namespace),
            "value": value if isinstance(value, dict) else r.record.to_value(),
            "score": r.score,
            "similarity": r.similarity,
            "sources": dict(r.sources),
            "section": (placements or {}).get(r.key),
            "relevance": r.relevance,
        }
        for r, value in zip(recalled, given, strict=True)
    ]


def _load(state: list[dict[str, Any]]) -> list[Recalled]:
    return [
        Recalled(d["key"], tuple(d["namespace"]), MemoryRecord.model_validate(d["value"]),
                 d.get("score", 0.0), d.get("similarity"), dict(d.get("sources") or {}),
                 relevance=d.get("relevance"))
        for d in state
    ]


def _recalled_keys(state: MemoryState) -> list[str]:
    """The memories the turn used: those the block placed (all recalled, when no block
    was assembled). A memory recalled but left out of the block was not used."""
    recalled = state.get("recalled") or []
    if any(d.get("section") for d in recalled):
        return [d["key"] for d in recalled if d.get("section")]
    return [d["key"] for d in recalled]


def _recently_spoken(state: MemoryState) -> set[str]:
    # Spoken in each of the last two turns: the third time it goes silent.
    history = state.get("memory_spoken") or []
    if len(history) < 2:
        return set()
    return set(history[-1]) & set(history[-2])


def _dump_history(recent: Sequence[LoggedMessage]) -> list[dict[str, Any]]:
    return [{"thread_id": m.thread_id, "message_id": m.message_id, "role": m.role,
             "text": m.text, "at": m.at.isoformat()} for m in recent]


def _load_history(state: MemoryState) -> list[LoggedMessage]:
    return [LoggedMessage(d["thread_id"], d["message_id"], d["role"], d["text"],
                          datetime.fromisoformat(d["at"]))
            for d in state.get("recent_history") or []]


def _unshown(state: MemoryState) -> list[LoggedMessage]:
    """The other threads' messages this thread was not offered yet.

    Every turn reads the last hours of the other threads; those older than this
    thread's previous block were offered to it then, so only newer ones are new.
    """
    recent = _load_history(state)
    shown_at = state.get("memory_shown_at")
    if not shown_at:
        return recent
    since = datetime.fromisoformat(shown_at)
    return [m for m in recent if m.at > since]


def _loaded(loaded: WorkingLoad, documents: Sequence[Document]) -> dict[str, Any]:
    # The removals leave the state only once the node returns, after the dropped
    # turns were queued for extraction.
    update: dict[str, Any] = {"recalled": _dump(loaded.recalled),
                              "recent_history": _dump_history(loaded.recent),
                              "knowledge": dump_documents(documents)}
    if loaded.trim.removals:
        update["messages"] = loaded.trim.removals
    return update


def build_nodes(layer: NodeTarget) -> tuple[RunnableLambda, RunnableLambda, RunnableLambda]:
    """Create the three nodes bound to ``layer``.

    ``load_memory`` trims the thread to the history budget, handing the turns
    that leave to extraction, and recalls; ``assemble_context`` renders the memory
    block; ``extract_after_turn`` queues the turn, logs its messages and reinforces
    the memories recalled for it, in one transaction: the turn's reads wait on
    no write of their own.
    """

    # The knowledge source is queried while memory is read (memory assembly runs in
    # parallel with retrieval): a thread in sync graphs, gather in async ones.
    def load_memory(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        who, query = run_identity(config), _query(state)
        return _loaded(*layer.agents.beside_knowledge(query, lambda: layer.threads.load_thread(
            who["user_id"], state.get("messages") or [], query,
            profile=who.get("profile"), thread_id=who.get("thread_id"),
            agent_id=who.get("agent_id"), now=layer.now(), reinforce=False)))

    async def aload_memory(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        who, query = run_identity(config), _query(state)
        return _loaded(*await layer.agents.abeside_knowledge(query, layer.threads.aload_thread(
            who["user_id"], state.get("messages") or [], query,
            profile=who.get("profile"), thread_id=who.get("thread_id"),
            agent_id=who.get("agent_id"), now=layer.now(), reinforce=False)))

    def assemble_context(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        run_identity(config)
        loaded = state.get("recalled") or []
        recalled = _load(loaded)
        # The short-term tier is the checkpointed thread itself: no round trip here.
        window = short_term(state.get("messages") or [], layer.env.settings.short_term_messages)
        now = layer.now()
        block = block_with_history(layer.env, recalled, recent=_unshown(state),
                                   short_term=window,
                                   recently_spoken=sorted(_recently_spoken(state)),
                                   now=now, documents=load_documents(state.get("knowledge")))
        # Due open loops surface in OPEN THREADS unasked: they too go quiet on a third turn.
        spoken = [k for k, section in block.placements.items()
                  if section in (RELEVANT, OPEN_THREADS)]
        history = [*(state.get("memory_spoken") or []), spoken][-2:]
        return {
            "memory_context": block.text,
            "recalled": _dump(recalled, block.placements,
                              values=[d["value"] for d in loaded]),
            "memory_spoken": history,
            "memory_shown_at": now.isoformat(),
        }

    async def aassemble_context(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        # Pure computation; the async body only exists so async graphs never block.
        return assemble_context(state, config)

    def _turn(state: MemoryState) -> list[BaseMessage]:
        messages = state.get("messages") or []
        i = _last_human(messages)
        return list(messages[i:]) if i is not None else []

    def extract_after_turn(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        who, turn = run_identity(config), _turn(state)
        if turn:
            layer.threads.record_turn(who["user_id"], turn, profile=who.get("profile"),
                              thread_id=who.get("thread_id"), agent_id=who.get("agent_id"),
                              now=layer.now(), reinforce=_recalled_keys(state))
        return {}

    async def aextract_after_turn(state: MemoryState, config: RunnableConfig) -> dict[str, Any]:
        who, turn = run_identity(config), _turn(state)
        if turn:
            await layer.threads.arecord_turn(who["user_id"], turn, profile=who.get("profile"),
                                     thread_id=who.get("thread_id"),
                                     agent_id=who.get("agent_id"), now=layer.now(),
                                     reinforce=_recalled_keys(state))
        return {}

    return (
        node(load_memory, aload_memory, name=LOAD),
        node(assemble_context, aassemble_context, name=ASSEMBLE),
        node(extract_after_turn, aextract_after_turn, name=EXTRACT),
    )


def node(func: Callable[..., Any], afunc: Callable[..., Awaitable[Any]], *, name: str
         ) -> RunnableLambda:
    """A node with a sync and an async body, both taking ``(state, config)``.

    A ``RunnableLambda`` whose ``invoke``/``ainvoke`` call the body directly.
    LangGraph already runs each node as a traced run of its own, with the run's config
    set for what the body calls (a chat model's run nests under it); RunnableLambda's
    own layer on top (a callback manager and a child run per call, config copies, a
    signature check of its function) was a large share of a turn's CPU under load.
    """
    return _node_class()(func, afunc=afunc, name=name)


@functools.cache
def _node_class() -> type[RunnableLambda]:
    # Defined on first use: LangChain's runnables module brings LangSmith's tracing
    # types with it, most of a second of start-up for a layer that never builds a node.
    from langchain_core.runnables import RunnableLambda

    class _Node(RunnableLambda):
        # RunnableLambda keeps the bodies as ``func`` and ``afunc``.
        def invoke(self, input: Any, config: RunnableConfig | None = None,
                   **kwargs: Any) -> Any:
            return cast(Any, self.func)(input,
                                        config if config is not None else ensure_config())

        async def ainvoke(self, input: Any, config: RunnableConfig | None = None,
                          **kwargs: Any) -> Any:
            return await cast(Any, self.afunc)(
                input, config if config is not None else ensure_config())

    return _Node


def memory_system_message(state: MemoryState, base: str = "") -> SystemMessage:
    """A system message carrying the memory block (after ``base`` instructions)."""
    block = state.get("memory_context") or ""
    text = "\n\n".join(part for part in (base.strip(), block) if part)
    return SystemMessage(text or "You are a helpful assistant.")


def memory_prompt(base: str = "") -> Any:
    """A ``prompt`` callable rendering ``state["memory_context"]`` before the messages.

    It only renders the block: something must load it first. For
    ``create_react_agent`` use ``MemoryLayer.react_hooks()`` (it loads, renders and
    extracts); for ``langchain.agents.create_agent``, ``MemoryLayer.middleware()``.

    Example:
        >>> agent = create_react_agent(model, tools, **memory.react_hooks("Be brief."))
    """

    def prompt(state: MemoryState) -> list[BaseMessage]:
        return [memory_system_message(state, base), *(state.get("messages") or [])]

    return prompt
