"""`MemoryLayer`: the façade a LangGraph user holds — three nodes and a direct API.

Every method exists in sync and async form (``recall`` / ``arecall``). Each operation
is written once, as a flow (``langmem_layer.flow``); its keyword parameters are
declared once, as a ``TypedDict`` both twins unpack. The twins differ only in the
``Runner`` method that executes the flow.
"""

from __future__ import annotations

import asyncio
import builtins
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Unpack

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from langmem_layer import checks, control
from langmem_layer.environment import default_extractor
from langmem_layer.errors import ConfigurationError, InvalidInputError
from langmem_layer.extract.extractor import Extractor
from langmem_layer.extract.gate import WriteGate
from langmem_layer.facade import nodes
from langmem_layer.facade.admin import Admin
from langmem_layer.facade.agent_methods import AgentMethods
from langmem_layer.facade.agents import Agents
from langmem_layer.facade.knowledge_methods import KnowledgeMethods
from langmem_layer.facade.params import (
    ContextBlockArgs,
    ForgetArgs,
    ListArgs,
    NowArgs,
    RecallArgs,
    RememberArgs,
    TurnArgs,
)
from langmem_layer.facade.threads import Threads
from langmem_layer.facade.trust_part import Trust
from langmem_layer.flow import Env, Flow, Runner
from langmem_layer.knowledge import knowledge_retriever
from langmem_layer.read import recall as read
from langmem_layer.read.block import ContextBlock
from langmem_layer.settings import MemorySettings
from langmem_layer.settings.calibration import apply_profile
from langmem_layer.store.ops import QueueEntry, UserDeletion
from langmem_layer.tokens import get_token_counter
from langmem_layer.types import Kind, Layer, Policy, Recalled
from langmem_layer.worker import Worker
from langmem_layer.write import apply as write
from langmem_layer.write import extraction_queue, new_memory
from langmem_layer.write.apply import IngestResult
from langmem_layer.write.extraction_queue import Leases, ProcessResult

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.runnables import RunnableLambda
    from langgraph.graph import StateGraph

__all__ = ["MemoryLayer"]

T = TypeVar("T")

#: The methods that moved off the façade, and the part each went to (with its ``a`` twin).
_MOVED: dict[str, str] = {
    f"{prefix}{name}": part
    for part, names in {
        "threads": ("load_thread", "record_turn", "recent_history", "clear_history",
                    "sweep_sessions"),
        "admin": ("browse", "set_surface", "history", "decisions", "submit",
                  "process_pending"),
        "trust": ("feedback", "agent_trust", "record_outcome"),
        "agents": ("import_langmem", "as_retriever", "retrieve_knowledge"),
    }.items()
    for name in names for prefix in ("", "a")
}


class MemoryLayer(AgentMethods, KnowledgeMethods):
    """Long-term memory for a LangGraph agent.

    Args:
        store: A ``PostgresMemoryStore`` (or its async twin; any
            store that executes the ops of ``langmem_layer.store.ops``).
        settings: Thresholds, weights and budgets; fields left unset take the calibration
            profile of the store's embedding model (``langmem_layer.calibration``),
            else the uncalibrated defaults.
        extractor: Proposes memory operations. Default: an LLM extractor on
            ``chat_model`` (or OpenAI when ``OPENAI_API_KEY`` is set), else the rules.
        chat_model: Chat model for the default LLM extractor.
        extraction: ``"background"`` (default): ``extract_after_turn`` queues the turn
            durably and returns; a worker thread (or task, in async graphs) extracts it.
            ``"inline"``: the turn is queued and extracted before the node returns.
        clock: Returns "now" for nodes (methods also take ``now=``).
        trust: Per-agent trust in [0, 1] used in ranking.
        knowledge: A knowledge source queried beside memory on each turn: any LangChain
            ``BaseRetriever`` or ``VectorStore`` (a store is asked for
            ``settings.knowledge_k`` documents), e.g. ``knowledge_store``
            on the same database. Its documents get their own block section; a failing
            source is logged and the turn goes on without them.

    Raises:
        ConfigurationError: ``extraction`` is neither ``"background"`` nor ``"inline"``.

    The three nodes are attributes usable in ``StateGraph.add_node`` for sync and async
    graphs: ``load_memory``, ``assemble_context`` and ``extract_after_turn``.

    The methods (each with an ``a``-prefixed async twin):

    - in a graph: ``wire``, the three nodes, ``react_hooks``, ``middleware``, ``tools``;
    - remembering and recalling: ``remember``, ``recall``, ``context_block``, ``ingest``;
    - a user's memory: ``get``, ``list``, ``correct``, ``forget``, ``export``,
      ``import_``, ``delete_user``;
    - background extraction: ``drain``, ``close``.

    The rest is on four parts: ``memory.threads`` (``load_thread``, ``record_turn``,
    ``recent_history``, ``clear_history``, ``sweep_sessions``), ``memory.admin``
    (``browse``, ``set_surface``, ``history``, ``decisions``, ``submit``,
    ``process_pending``), ``memory.trust`` (``feedback``, ``agent_trust``,
    ``record_outcome``) and ``memory.agents`` (``import_langmem``, ``as_retriever``,
    ``retrieve_knowledge``); ``run`` and ``now`` run flows of your own. The names
    these had on the layer itself still work for one release, with a
    ``DeprecationWarning`` naming the new one.
    """

    threads: Threads
    admin: Admin
    trust: Trust
    agents: Agents

    def __init__(
        self,
        store: BaseStore,
        *,
        settings: MemorySettings | None = None,
        extractor: Extractor | None = None,
        chat_model: BaseChatModel | None = None,
        extraction: Literal["background", "inline"] = "background",
        clock: Callable[[], datetime] | None = None,
        trust: Mapping[str, float] | None = None,
        knowledge: Any = None,
    ) -> None:
        if extraction not in ("background", "inline"):
            raise ConfigurationError(
                f"extraction must be 'background' or 'inline', got {extraction!r}.")
        self.store = store
        # Retrieval values that fit the store's embedder fill what the caller left unset.
        self.settings = apply_profile(settings, getattr(store, "model_id", None))
        self.extractor = extractor or default_extractor(chat_model)
        self.extraction = extraction
        self.knowledge = knowledge_retriever(knowledge, k=self.settings.knowledge_k)
        self._clock = clock or (lambda: datetime.now(UTC))
        self.env = Env(
            settings=self.settings,
            gate=WriteGate(self.settings.gate),
            counter=get_token_counter(self.settings.encoding),
            trust=dict(trust or {}),
        )
        #: The most recent ingest results (newest last), for inspection and the demo.
        self.ingest_log: deque[IngestResult] = deque(maxlen=100)
        self.runner = Runner(store, self.extractor)
        self.worker = Worker(self.runner, self.settings, self._process_batch,
                             self.ingest_log.extend, self._ingest_leased)
        self.worker.now = self.now
        self._nodes: tuple[Any, Any, Any] | None = None
        self.threads = Threads(self)
        self.admin = Admin(self)
        self.trust = Trust(self)
        self.agents = Agents(self)

    @property
    def worker_poll_seconds(self) -> float:
        """Seconds the worker thread sleeps between queue polls when not woken."""
        return self.worker.poll_seconds

    @worker_poll_seconds.setter
    def worker_poll_seconds(self, seconds: float) -> None:
        self.worker.poll_seconds = seconds

    # -- direct API --------------------------------------------------------------------

    def remember(self, user_id: str, content: str, **kw: Unpack[RememberArgs]) -> Recalled:
        """Write one memory directly, bypassing extraction and the gate.

        Identity-layer memories are stored global to the user; others in ``profile``.
        With ``thread_id`` the memory is part of that thread: it records it and is linked
        to the thread's previous memory, as the write path does, and is embedded a second
        time with the memories before it (``context_turns``), which recall's context
        strategy searches.

        Args:
            user_id: The user.
            content: The memory's text.
            **kw: See ``RememberArgs``.

        Raises:
            InvalidContentError: ``content`` breaks the content rule every way in applies
                (``content_problem``): empty, shorter than
                ``settings.gate.min_content_chars`` or longer than ``max_content_chars``
                once stripped, or holding a NUL character.
        """
        return self.runner.run(self._remember(user_id, content, **kw))

    async def aremember(self, user_id: str, content: str, **kw: Unpack[RememberArgs]
                        ) -> Recalled:
        """Async twin of ``remember``."""
        return await self.runner.arun(self._remember(user_id, content, **kw))

    def recall(self, user_id: str, query: str | None, **kw: Unpack[RecallArgs]
               ) -> list[Recalled]:
        """Retrieve the user's most relevant active memories (pinned first): what the
        memory block is filled from.

        ``matching=True`` makes it a search (what the memory tools, the CLI's ``search``
        and the REST API's ``q`` do): only what shares a word, a reference or a period
        with the query, or reaches ``settings.search_similarity_floor``, so a query
        about nothing the user said returns nothing.

        Args:
            user_id: The user.
            query: What to recall for; ``None`` ranks without a query.
            **kw: See ``RecallArgs``.
        """
        return self.runner.run(self._recall(user_id, query, **kw))

    async def arecall(self, user_id: str, query: str | None, **kw: Unpack[RecallArgs]
                      ) -> list[Recalled]:
        """Async twin of ``recall``."""
        return await self.runner.arun(self._recall(user_id, query, **kw))

    def ingest(self, user_id: str, messages: Sequence[BaseMessage], **kw: Unpack[TurnArgs]
               ) -> IngestResult:
        """Extract, gate and apply memories from ``messages`` now; returns the decisions.

        Args:
            user_id: The user.
            messages: The turn.
            **kw: See ``TurnArgs``.
        """
        return self.runner.run(self._ingest(user_id, messages, **kw))

    async def aingest(self, user_id: str, messages: Sequence[BaseMessage],
                      **kw: Unpack[TurnArgs]) -> IngestResult:
        """Async twin of ``ingest``."""
        return await self.runner.arun(self._ingest(user_id, messages, **kw))

    def context_block(self, user_id: str, query: str | None,
                      **kw: Unpack[ContextBlockArgs]) -> ContextBlock:
        """The memory block ``assemble_context`` would render for ``query``: exactly it.

        The recall and the user's recent messages from other threads (outside
        ``thread_id``), rendered by the one block builder the node uses, the thread's
        short-term window taken from ``messages``, and the documents of the knowledge
        source (``knowledge=``), queried at the same time. Like ``load_memory``, it does
        not reinforce what it shows.

        Args:
            user_id: The user.
            query: What to recall for.
            **kw: See ``ContextBlockArgs``.
        """
        return self._block_beside_knowledge(user_id, query, kw)

    async def acontext_block(self, user_id: str, query: str | None,
                             **kw: Unpack[ContextBlockArgs]) -> ContextBlock:
        """Async twin of ``context_block``."""
        return await self._ablock_beside_knowledge(user_id, query, kw)

    def get(self, user_id: str, memory_id: str) -> Recalled:
        """One memory by id (any status).

        Raises:
            MemoryNotFoundError: No such memory for the user.
        """
        return self.runner.run(control.get(user_id, memory_id))

    async def aget(self, user_id: str, memory_id: str) -> Recalled:
        """Async twin of ``get``."""
        return await self.runner.arun(control.get(user_id, memory_id))

    def list(self, user_id: str, **kw: Unpack[ListArgs]) -> builtins.list[Recalled]:
        """The user's memories in ``profile`` and identity, newest first.

        Args:
            user_id: The user.
            **kw: See ``ListArgs``.
        """
        return self.runner.run(self._list(user_id, **kw))

    async def alist(self, user_id: str, **kw: Unpack[ListArgs]) -> builtins.list[Recalled]:
        """Async twin of ``list``."""
        return await self.runner.arun(self._list(user_id, **kw))

    def correct(self, user_id: str, memory_id: str, content: str, **kw: Unpack[NowArgs]
                ) -> Recalled:
        """Replace a memory's content; it is re-embedded in the same transaction.

        Args:
            user_id: The user.
            memory_id: The memory.
            content: Its new text.
            **kw: See ``NowArgs``.

        Raises:
            MemoryNotFoundError: No such memory for the user.
            InvalidContentError: ``content`` breaks the content rule (as for
                ``remember``).
        """
        return self.runner.run(self._correct(user_id, memory_id, content, **kw))

    async def acorrect(self, user_id: str, memory_id: str, content: str,
                       **kw: Unpack[NowArgs]) -> Recalled:
        """Async twin of ``correct``."""
        return await self.runner.arun(self._correct(user_id, memory_id, content, **kw))

    def forget(self, user_id: str, memory_id: str, **kw: Unpack[ForgetArgs]) -> bool:
        """Archive a memory; with ``hard=True`` delete it with its vectors and links.

        Args:
            user_id: The user.
            memory_id: The memory.
            **kw: See ``ForgetArgs``.
        """
        return self.runner.run(self._forget(user_id, memory_id, **kw))

    async def aforget(self, user_id: str, memory_id: str, **kw: Unpack[ForgetArgs]) -> bool:
        """Async twin of ``forget``."""
        return await self.runner.arun(self._forget(user_id, memory_id, **kw))

    def export(self, user_id: str) -> dict[str, Any]:
        """Everything stored for the user, as JSON-ready data that ``import_`` accepts."""
        return self.runner.run(control.export(user_id))

    async def aexport(self, user_id: str) -> dict[str, Any]:
        """Async twin of ``export``."""
        return await self.runner.arun(control.export(user_id))

    def import_(self, user_id: str, data: Mapping[str, Any]) -> int:
        """Load an export (re-embedding it); returns how many items were written."""
        return self.runner.run(control.import_(
            user_id, data, max_content_chars=self.settings.gate.max_content_chars))

    async def aimport_(self, user_id: str, data: Mapping[str, Any]) -> int:
        """Async twin of ``import_``."""
        return await self.runner.arun(control.import_(
            user_id, data, max_content_chars=self.settings.gate.max_content_chars))

    def delete_user(self, user_id: str, *, keep_keys: bool = False) -> UserDeletion:
        """Erase everything stored for the user, in one transaction.

        Every per-user table loses the user's rows: memories with their vectors and
        links, the extraction queue, the decision log, the embedding cache, term
        statistics, threads, the message log, applied-operation records, turns waiting
        for re-extraction, and the user's own vector indexes. Other users are untouched.
        Graph checkpoints are LangGraph's: delete the user's threads there too.

        Args:
            user_id: The user.
            keep_keys: Keep the user's API keys (reset their memory, not their access).

        Returns:
            Rows deleted per table.
        """
        return self.runner.run(control.delete_user(user_id, keep_keys=keep_keys))

    async def adelete_user(self, user_id: str, *, keep_keys: bool = False) -> UserDeletion:
        """Async twin of ``delete_user``."""
        return await self.runner.arun(control.delete_user(user_id, keep_keys=keep_keys))

    # The nodes are built on first use: they are LangChain runnables, whose module brings
    # LangSmith's tracing types (most of a second of start-up), which a layer that only
    # remembers and recalls, as the command line's, never needs.
    def _built_nodes(self) -> tuple[Any, Any, Any]:
        if self._nodes is None:
            self._nodes = nodes.build_nodes(self)
        return self._nodes

    @property
    def load_memory(self) -> RunnableLambda:
        """The node that reads the turn's memory (see ``langmem_layer.facade.nodes``)."""
        return self._built_nodes()[0]

    @property
    def assemble_context(self) -> RunnableLambda:
        """The node that renders the memory block into ``memory_context``."""
        return self._built_nodes()[1]

    @property
    def extract_after_turn(self) -> RunnableLambda:
        """The node that queues (or, inline, extracts) the turn."""
        return self._built_nodes()[2]

    def wire(self, builder: StateGraph, agent: str = "agent") -> StateGraph:
        """Put the three nodes around ``agent`` (see ``langmem_layer.facade.wiring.wire``)."""
        from langmem_layer.facade.wiring import wire

        return wire(self, builder, agent)

    def drain(self, timeout: float | None = None) -> ProcessResult:
        """Extract everything queued so far that is ready, then return.

        Entries that failed stay queued for their retry time and are reported in
        ``failed``; they are not waited for.

        Raises:
            TimeoutError: It took longer than ``timeout`` seconds.
        """
        return self.worker.drain(timeout)

    async def adrain(self, timeout: float | None = None) -> ProcessResult:
        """Async twin of ``drain``; also awaits this loop's extraction tasks."""
        return await self.worker.adrain(timeout)

    def close(self) -> None:
        """Finish queued extraction and stop the worker thread.

        Call it before the store closes. After the store closed it only stops the
        worker: what was not extracted stays queued for the next worker.
        """
        self.worker.stop()
        if not self.worker.store_closed():
            self.drain()

    async def aclose(self) -> None:
        """Async twin of ``close``: also awaits this loop's extraction tasks; call it
        before closing the store."""
        await self.adrain()
        await asyncio.to_thread(self.close)

    # -- the flows behind the methods: defaults applied here, once ---------------------

    def _remember(self, user_id: str, content: str, *, profile: str | None = None,
                  kind: Kind = Kind.EPISODIC_EVENT, layer: Layer | None = None,
                  policy: Policy = Policy.SPEAK, pinned: bool = False,
                  confidence: float = 0.8, salience: float = 0.5, refs: Sequence[str] = (),
                  due_at: datetime | None = None, subject: str | None = None,
                  thread_id: str | None = None, now: datetime | None = None
                  ) -> Flow[Recalled]:
        # Text, then the content rule every way in applies (write.new_memory.check_content).
        checks.check_is_text(content)
        new_memory.check_content(self.env, content)
        kind = checks.check_choice(kind, Kind, "kind")
        layer = None if layer is None else checks.check_choice(layer, Layer, "layer")
        policy = checks.check_choice(policy, Policy, "policy")
        confidence = checks.check_score(confidence, "confidence")
        salience = checks.check_score(salience, "salience")
        refs = checks.check_strings(refs, "refs")
        checks.check_time(due_at, "due_at")
        checks.check_time(now, "now")
        if subject is not None:
            checks.check_is_text(subject, "subject")
        return new_memory.remember(
            self.env, user_id, content, profile=profile, now=now or self.now(), kind=kind,
            layer=layer, policy=policy, pinned=pinned, confidence=confidence,
            salience=salience, refs=refs, due_at=due_at, subject=subject,
            thread_id=thread_id)

    def _recall(self, user_id: str, query: str | None, *, profile: str | None = None,
                limit: int | None = None, refs: Sequence[str] = (), matching: bool = False,
                now: datetime | None = None) -> Flow[builtins.list[Recalled]]:
        if query is not None and not isinstance(query, str):
            checks.check_content_text(query, "query")  # raises: a query is text
        # A NUL in a query is dropped, not refused: a query is conversation text, and
        # the read path removes it (langmem_layer.sanitize) as the write path does.
        limit = checks.check_limit(limit)
        refs = checks.check_strings(refs, "refs")
        checks.check_time(now, "now")
        if not isinstance(matching, bool):
            raise InvalidInputError(f"matching must be True or False, got {matching!r}.")
        return read.recall(
            self.env, user_id, query, profile=profile, limit=limit or self.settings.recall_limit,
            now=now or self.now(), refs=refs, matching=matching)

    def _ingest(self, user_id: str, messages: Sequence[BaseMessage], *,
                profile: str | None = None, thread_id: str | None = None,
                agent_id: str | None = None, now: datetime | None = None
                ) -> Flow[IngestResult]:
        checks.check_messages(messages)
        checks.check_time(now, "now")
        result = yield from write.ingest(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now())
        self.ingest_log.append(result)
        return result

    def _list(self, user_id: str, *, profile: str | None = None,
              statuses: Sequence[str] | None = ("active",), limit: int = 100
              ) -> Flow[builtins.list[Recalled]]:
        statuses = checks.check_statuses(statuses)
        limit = checks.check_limit(limit) or 100
        return control.list_memories(self.env, user_id, profile=profile, statuses=statuses,
                                     limit=limit)

    def _correct(self, user_id: str, memory_id: str, content: str, *,
                 now: datetime | None = None) -> Flow[Recalled]:
        # The content rule applies after the memory is found: an unknown id is 404 first.
        checks.check_is_text(content)
        return control.correct(self.env, user_id, memory_id, content, now=now or self.now())

    def _forget(self, user_id: str, memory_id: str, *, hard: bool = False,
                now: datetime | None = None) -> Flow[bool]:
        return control.forget(user_id, memory_id, hard=hard, now=now or self.now())

    def _ingest_leased(self, entries: Sequence[QueueEntry], leased_at: datetime,
                       leases: Leases | None = None) -> Flow[ProcessResult]:
        st = self.settings
        return extraction_queue.ingest_leased(
            self.env, entries, now=self.now(), leased_at=leased_at,
            lease_seconds=st.extraction_lease_seconds,
            retry_base_seconds=st.extraction_retry_base_seconds, leases=leases)

    def _process_batch(self, user_id: str | None, leases: Leases | None = None,
                       users: Sequence[str] = ()) -> Flow[ProcessResult]:
        st = self.settings
        return extraction_queue.process_queue(
            self.env, now=self.now(), limit=st.extraction_batch_size,
            lease_seconds=st.extraction_lease_seconds,
            retry_base_seconds=st.extraction_retry_base_seconds, user_id=user_id,
            users=users, leases=leases)


class _Moved:
    """A method that moved to a part: still reachable by its old name for one release,
    with a ``DeprecationWarning`` naming the new one."""

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __get__(self, layer: Any, owner: type) -> Any:
        if layer is None:
            return self
        warnings.warn(f"MemoryLayer.{self.name} is deprecated: use "
                      f"memory.{self.part}.{self.name}", DeprecationWarning, stacklevel=2)
        return getattr(getattr(layer, self.part), self.name)


# Set on the class after it is defined, so type checkers see only the new names.
for _name, _part in _MOVED.items():
    setattr(MemoryLayer, _name, _Moved(_part, _name))
