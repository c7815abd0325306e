"""`MemoryLayer`: the façade a LangGraph user holds — three nodes and a direct API.

Every method exists in sync and async form (``recall`` / ``arecall``). Both run the
same flow from :mod:`langmem_layer.runner`; they differ only in how they execute its
store and extractor requests.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langgraph.graph import StateGraph
from langgraph.store.base import BaseStore

from langmem_layer import control
from langmem_layer.config import default_extractor
from langmem_layer.read import recall as read
from langmem_layer.read.block import ContextBlock
from langmem_layer.runner import Env, ExtractCall, Flow, StoreCall
from langmem_layer.settings import MemorySettings
from langmem_layer.store.ops import IngestLogEntry, LoggedMessage
from langmem_layer.tokens import get_token_counter
from langmem_layer.types import Kind, Layer, Policy, Recalled
from langmem_layer.working import history, sessions
from langmem_layer.working import trim as working
from langmem_layer.working.sessions import PruneStrategy, SessionSweep
from langmem_layer.working.trim import WorkingLoad
from langmem_layer.write import apply as write
from langmem_layer.write import memory as write_memory
from langmem_layer.write.apply import IngestResult, ProcessResult
from langmem_layer.write.extractor import Extractor
from langmem_layer.write.gate import WriteGate

__all__ = ["MemoryLayer"]

logger = logging.getLogger("langmem_layer")


class MemoryLayer:
    """Long-term memory for a LangGraph agent.

    Args:
        store: A :class:`~langmem_layer.PostgresMemoryStore` (or its async twin; any
            store that executes the ops of :mod:`langmem_layer.store.ops`).
        settings: Thresholds, weights and budgets; defaults follow the specification.
        embeddings: Unused when the store already embeds (it does); kept for symmetry
            with LangMem so a caller may pass the model explicitly.
        extractor: Proposes memory operations. Default: an LLM extractor on
            ``chat_model`` (or OpenAI when ``OPENAI_API_KEY`` is set), else the rules.
        chat_model: Chat model for the default LLM extractor.
        extraction: ``"background"`` (default): ``extract_after_turn`` queues the turn
            durably and returns; a worker thread (or task, in async graphs) extracts it.
            ``"inline"``: the turn is queued and extracted before the node returns.
        clock: Returns "now" for nodes (methods also take ``now=``).
        trust: Per-agent trust in [0, 1] used in ranking.

    The three nodes are attributes usable in ``StateGraph.add_node`` for sync and async
    graphs: ``load_memory``, ``assemble_context`` and ``extract_after_turn``.
    """

    def __init__(
        self,
        store: BaseStore,
        *,
        settings: MemorySettings | None = None,
        embeddings: Any = None,
        extractor: Extractor | None = None,
        chat_model: BaseChatModel | None = None,
        extraction: Literal["background", "inline"] = "background",
        clock: Callable[[], datetime] | None = None,
        trust: Mapping[str, float] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings or MemorySettings()
        self.embeddings = embeddings
        self.extractor = extractor or default_extractor(chat_model)
        self.extraction = extraction
        self._clock = clock or (lambda: datetime.now(UTC))
        self.env = Env(
            settings=self.settings,
            gate=WriteGate(self.settings.gate),
            counter=get_token_counter(self.settings.encoding),
            trust=dict(trust or {}),
        )
        #: The most recent ingest results (newest last), for inspection and the demo.
        self.ingest_log: deque[IngestResult] = deque(maxlen=100)
        #: Seconds the worker thread sleeps between queue polls when not woken.
        self.worker_poll_seconds = 5.0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lock = threading.Lock()
        self._busy = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._turns: dict[str | None, int] = {}
        from langmem_layer.nodes import build_nodes

        self.load_memory, self.assemble_context, self.extract_after_turn = build_nodes(self)

    # -- executing flows ---------------------------------------------------------------

    def now(self) -> datetime:
        """The layer's current time."""
        return self._clock()

    def run(self, flow: Flow, *, extra: Mapping[type, Callable[[Any], Any]] | None = None
            ) -> Any:
        """Execute a flow synchronously. A failed request is raised inside the flow.

        ``extra`` executes request types other than store and extractor calls (the
        session sweeper's checkpointer calls, for instance).
        """
        request = next(flow)
        while True:
            reply: Any
            try:
                if isinstance(request, StoreCall):
                    reply = self.store.batch(request.ops)
                elif isinstance(request, ExtractCall):
                    reply = self.extractor.extract(request.messages, existing=request.existing,
                                                   now=request.now)
                else:
                    reply = (extra or {})[type(request)](request)
            except Exception as e:
                step = lambda e=e: flow.throw(e)  # noqa: E731
            else:
                step = lambda reply=reply: flow.send(reply)  # noqa: E731
            try:
                request = step()
            except StopIteration as stop:
                return stop.value

    async def arun(self, flow: Flow, *,
                   extra: Mapping[type, Callable[[Any], Awaitable[Any]]] | None = None) -> Any:
        """Execute a flow on the event loop. A failed request is raised inside the flow."""
        request = next(flow)
        while True:
            reply: Any
            try:
                if isinstance(request, StoreCall):
                    reply = await self.store.abatch(request.ops)
                elif isinstance(request, ExtractCall):
                    reply = await self.extractor.aextract(
                        request.messages, existing=request.existing, now=request.now)
                else:
                    reply = await (extra or {})[type(request)](request)
            except Exception as e:
                step = lambda e=e: flow.throw(e)  # noqa: E731
            else:
                step = lambda reply=reply: flow.send(reply)  # noqa: E731
            try:
                request = step()
            except StopIteration as stop:
                return stop.value

    # -- direct API --------------------------------------------------------------------

    def remember(self, user_id: str, content: str, *, profile: str | None = None,
                 kind: Kind = Kind.EPISODIC_EVENT, layer: Layer | None = None,
                 policy: Policy = Policy.SPEAK, pinned: bool = False, confidence: float = 0.8,
                 salience: float = 0.5, refs: Sequence[str] = (), due_at: datetime | None = None,
                 thread_id: str | None = None, now: datetime | None = None) -> Recalled:
        """Write one memory directly, bypassing extraction and the gate.

        Identity-layer memories are stored global to the user; others in ``profile``.
        With ``thread_id`` the memory is part of that thread: it records it and is linked
        to the thread's previous memory, as the write path does.
        """
        return self.run(write_memory.remember(
            self.env, user_id, content, profile=profile, now=now or self.now(), kind=kind,
            layer=layer, policy=policy, pinned=pinned, confidence=confidence,
            salience=salience, refs=refs, due_at=due_at, thread_id=thread_id))

    async def aremember(self, user_id: str, content: str, *, profile: str | None = None,
                        kind: Kind = Kind.EPISODIC_EVENT, layer: Layer | None = None,
                        policy: Policy = Policy.SPEAK, pinned: bool = False,
                        confidence: float = 0.8, salience: float = 0.5,
                        refs: Sequence[str] = (), due_at: datetime | None = None,
                        thread_id: str | None = None,
                        now: datetime | None = None) -> Recalled:
        """Async twin of :meth:`remember`."""
        return await self.arun(write_memory.remember(
            self.env, user_id, content, profile=profile, now=now or self.now(), kind=kind,
            layer=layer, policy=policy, pinned=pinned, confidence=confidence,
            salience=salience, refs=refs, due_at=due_at, thread_id=thread_id))

    def recall(self, user_id: str, query: str | None, *, profile: str | None = None,
               limit: int | None = None, refs: Sequence[str] = (),
               now: datetime | None = None) -> list[Recalled]:
        """Retrieve the user's most relevant active memories (pinned first)."""
        return self.run(read.recall(
            self.env, user_id, query, profile=profile, limit=limit or self.settings.recall_limit,
            now=now or self.now(), refs=refs))

    async def arecall(self, user_id: str, query: str | None, *, profile: str | None = None,
                      limit: int | None = None, refs: Sequence[str] = (),
                      now: datetime | None = None) -> list[Recalled]:
        """Async twin of :meth:`recall`."""
        return await self.arun(read.recall(
            self.env, user_id, query, profile=profile, limit=limit or self.settings.recall_limit,
            now=now or self.now(), refs=refs))

    def ingest(self, user_id: str, messages: Sequence[BaseMessage], *,
               profile: str | None = None, thread_id: str | None = None,
               agent_id: str | None = None, now: datetime | None = None) -> IngestResult:
        """Extract, gate and apply memories from ``messages`` now; returns the decisions."""
        result = self.run(write.ingest(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now()))
        self.ingest_log.append(result)
        return result  # type: ignore[no-any-return]

    async def aingest(self, user_id: str, messages: Sequence[BaseMessage], *,
                      profile: str | None = None, thread_id: str | None = None,
                      agent_id: str | None = None, now: datetime | None = None) -> IngestResult:
        """Async twin of :meth:`ingest`."""
        result = await self.arun(write.ingest(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now()))
        self.ingest_log.append(result)
        return result  # type: ignore[no-any-return]

    def context_block(self, user_id: str, query: str | None, *, profile: str | None = None,
                      recently_spoken: Sequence[str] = (),
                      now: datetime | None = None) -> ContextBlock:
        """Recall for ``query`` and render the memory block the agent would receive."""
        return self.run(read.context_block_flow(  # type: ignore[no-any-return]
            self.env, user_id, query, profile=profile, recently_spoken=recently_spoken,
            now=now or self.now()))

    async def acontext_block(self, user_id: str, query: str | None, *,
                             profile: str | None = None, recently_spoken: Sequence[str] = (),
                             now: datetime | None = None) -> ContextBlock:
        """Async twin of :meth:`context_block`."""
        return await self.arun(read.context_block_flow(  # type: ignore[no-any-return]
            self.env, user_id, query, profile=profile, recently_spoken=recently_spoken,
            now=now or self.now()))

    def get(self, user_id: str, memory_id: str) -> Recalled:
        """One memory by id (any status). Raises MemoryNotFoundError."""
        return self.run(control.get(user_id, memory_id))  # type: ignore[no-any-return]

    async def aget(self, user_id: str, memory_id: str) -> Recalled:
        """Async twin of :meth:`get`."""
        return await self.arun(control.get(user_id, memory_id))  # type: ignore[no-any-return]

    def list(self, user_id: str, *, profile: str | None = None,
             statuses: Sequence[str] | None = ("active",),
             limit: int = 100) -> builtins.list[Recalled]:
        """The user's memories in ``profile`` and identity, newest first."""
        return self.run(control.list_memories(  # type: ignore[no-any-return]
            self.env, user_id, profile=profile, statuses=statuses, limit=limit))

    async def alist(self, user_id: str, *, profile: str | None = None,
                    statuses: Sequence[str] | None = ("active",),
                    limit: int = 100) -> builtins.list[Recalled]:
        """Async twin of :meth:`list`."""
        return await self.arun(control.list_memories(  # type: ignore[no-any-return]
            self.env, user_id, profile=profile, statuses=statuses, limit=limit))

    def correct(self, user_id: str, memory_id: str, content: str, *,
                now: datetime | None = None) -> Recalled:
        """Replace a memory's content; it is re-embedded in the same transaction."""
        return self.run(control.correct(  # type: ignore[no-any-return]
            self.env, user_id, memory_id, content, now=now or self.now()))

    async def acorrect(self, user_id: str, memory_id: str, content: str, *,
                       now: datetime | None = None) -> Recalled:
        """Async twin of :meth:`correct`."""
        return await self.arun(control.correct(  # type: ignore[no-any-return]
            self.env, user_id, memory_id, content, now=now or self.now()))

    def forget(self, user_id: str, memory_id: str, *, hard: bool = False,
               now: datetime | None = None) -> bool:
        """Archive a memory; with ``hard=True`` delete it with its vectors and links."""
        return self.run(control.forget(  # type: ignore[no-any-return]
            user_id, memory_id, hard=hard, now=now or self.now()))

    async def aforget(self, user_id: str, memory_id: str, *, hard: bool = False,
                      now: datetime | None = None) -> bool:
        """Async twin of :meth:`forget`."""
        return await self.arun(control.forget(  # type: ignore[no-any-return]
            user_id, memory_id, hard=hard, now=now or self.now()))

    def export(self, user_id: str) -> dict[str, Any]:
        """Everything stored for the user, as JSON-ready data that :meth:`import_` accepts."""
        return self.run(control.export(user_id))  # type: ignore[no-any-return]

    async def aexport(self, user_id: str) -> dict[str, Any]:
        """Async twin of :meth:`export`."""
        return await self.arun(control.export(user_id))  # type: ignore[no-any-return]

    def import_(self, user_id: str, data: Mapping[str, Any]) -> int:
        """Load an export (re-embedding it); returns how many items were written."""
        return self.run(control.import_(user_id, data))  # type: ignore[no-any-return]

    async def aimport_(self, user_id: str, data: Mapping[str, Any]) -> int:
        """Async twin of :meth:`import_`."""
        return await self.arun(control.import_(user_id, data))  # type: ignore[no-any-return]

    def wire(self, builder: StateGraph, agent: str = "agent") -> StateGraph:
        """Put the three nodes around ``agent`` (see :func:`langmem_layer.nodes.wire`)."""
        from langmem_layer.nodes import wire

        return wire(self, builder, agent)

    # -- the extraction queue -----------------------------------------------------------

    def _process_flow(self, user_id: str | None = None) -> Flow:
        st = self.settings
        return write.process_queue(
            self.env, now=self.now(), limit=st.extraction_batch_size,
            lease_seconds=st.extraction_lease_seconds,
            retry_base_seconds=st.extraction_retry_base_seconds, user_id=user_id)

    def _after_enqueue(self, entry: int | None, user_id: str, thread_id: str | None
                       ) -> int | None:
        # Inline: extract now. Background: wake the worker every N turns of a thread.
        if self.extraction == "inline":
            self.process_pending(user_id=user_id)
        elif self._turn_due(thread_id):
            self._wake_worker()
        return entry

    async def _aafter_enqueue(self, entry: int | None, user_id: str, thread_id: str | None
                              ) -> int | None:
        # As _after_enqueue; the background pass is a task on the running loop.
        if self.extraction == "inline":
            await self.aprocess_pending(user_id=user_id)
        elif self._turn_due(thread_id):
            task = asyncio.get_running_loop().create_task(self._aworker_pass())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return entry

    def process_pending(self, *, user_id: str | None = None) -> ProcessResult:
        """Extract every queue entry ready now (all users, or one); returns what happened."""
        total = ProcessResult()
        while True:
            result: ProcessResult = self.run(self._process_flow(user_id))
            self._record(total, result)
            if not result.done and not result.failed:
                return total

    async def aprocess_pending(self, *, user_id: str | None = None) -> ProcessResult:
        """Async twin of :meth:`process_pending`."""
        total = ProcessResult()
        while True:
            result: ProcessResult = await self.arun(self._process_flow(user_id))
            self._record(total, result)
            if not result.done and not result.failed:
                return total

    def _record(self, total: ProcessResult, result: ProcessResult) -> None:
        total.done += result.done
        total.failed += result.failed
        total.results += result.results
        self.ingest_log.extend(result.results)

    def _turn_due(self, thread_id: str | None) -> bool:
        # Every N turns per thread; the queue keeps the rest until then (or a drain).
        n = self.settings.extract_every_n_turns
        with self._lock:
            self._turns[thread_id] = self._turns.get(thread_id, 0) + 1
            return self._turns[thread_id] % n == 0

    def submit(self, user_id: str, messages: Sequence[BaseMessage], *,
               profile: str | None = None, thread_id: str | None = None,
               agent_id: str | None = None, now: datetime | None = None) -> int | None:
        """Queue a turn durably and let the worker thread extract it; returns the entry id.

        Returns at once. The turn stays in the queue until it is extracted, across
        failures and restarts; with ``extraction="inline"`` it is extracted before
        this returns.
        """
        entry = self.run(write.enqueue_turn(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now()))
        return self._after_enqueue(entry, user_id, thread_id)

    async def asubmit(self, user_id: str, messages: Sequence[BaseMessage], *,
                      profile: str | None = None, thread_id: str | None = None,
                      agent_id: str | None = None, now: datetime | None = None) -> int | None:
        """Async twin of :meth:`submit`: extraction runs as a task on the running loop."""
        entry = await self.arun(write.enqueue_turn(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now()))
        return await self._aafter_enqueue(entry, user_id, thread_id)

    async def _aworker_pass(self) -> None:
        try:
            await self.aprocess_pending()
        except Exception:  # the entries stay queued; the next pass retries them
            logger.exception("Background extraction pass failed")

    def _wake_worker(self) -> None:
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._stop.clear()
                self._worker = threading.Thread(
                    target=self._work, name="langmem-extract", daemon=True)
                self._worker.start()
        self._wake.set()

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self.worker_poll_seconds)
            self._wake.clear()
            with self._busy:
                try:
                    self.process_pending()
                except Exception:  # the entries stay queued; the next pass retries them
                    logger.exception("Background extraction pass failed")

    def drain(self, timeout: float | None = None) -> ProcessResult:
        """Extract everything queued so far that is ready, then return.

        Entries that failed stay queued for their retry time and are reported in
        ``failed``; they are not waited for.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._busy.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError("drain(): the background worker did not finish in time")
        try:
            result = self.process_pending()
        finally:
            self._busy.release()
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("drain() took longer than its timeout")
        return result

    async def adrain(self, timeout: float | None = None) -> ProcessResult:
        """Async twin of :meth:`drain`; also awaits this loop's extraction tasks."""
        if self._tasks:
            await asyncio.wait_for(asyncio.gather(*list(self._tasks)), timeout)
        return await self.aprocess_pending()

    def decisions(self, user_id: str, *, thread_id: str | None = None,
                  limit: int = 20) -> builtins.list[IngestLogEntry]:
        """Why things were or were not remembered: the latest ingests' gate decisions."""
        return self.run(  # type: ignore[no-any-return]
            control.decisions(user_id, thread_id=thread_id, limit=limit))

    async def adecisions(self, user_id: str, *, thread_id: str | None = None,
                         limit: int = 20) -> builtins.list[IngestLogEntry]:
        """Async twin of :meth:`decisions`."""
        return await self.arun(  # type: ignore[no-any-return]
            control.decisions(user_id, thread_id=thread_id, limit=limit))

    async def aclose(self) -> None:
        """Finish background work; call before closing the store."""
        await self.adrain()
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Finish queued extraction and stop the worker thread."""
        self._stop.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.join()
            self._worker = None
        self.drain()

    # -- working memory ----------------------------------------------------------------

    def load_thread(self, user_id: str, messages: Sequence[BaseMessage],
                    query: str | None = None, *, profile: str | None = None,
                    thread_id: str | None = None, agent_id: str | None = None,
                    limit: int | None = None, now: datetime | None = None,
                    reinforce: bool = True) -> WorkingLoad:
        """What ``load_memory`` does, in one round trip (R8.1).

        Plans the trim of ``messages`` to ``settings.history_max_tokens`` (keeping
        ``history_min_turns``), queues each dropped turn for extraction, stamps the
        thread's activity, recalls for ``query`` and reads the user's recent messages
        from other threads. Remove ``result.trim.removals`` from the thread only after
        this returns: a turn is always queued before it leaves. With
        ``reinforce=False`` the recalled memories are not reinforced here: pass their
        keys to :meth:`record_turn` (the nodes do).
        """
        return self.run(working.load_thread(  # type: ignore[no-any-return]
            self.env, user_id, messages, query, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now(), limit=limit or self.settings.recall_limit,
            reinforce=reinforce))

    async def aload_thread(self, user_id: str, messages: Sequence[BaseMessage],
                           query: str | None = None, *, profile: str | None = None,
                           thread_id: str | None = None, agent_id: str | None = None,
                           limit: int | None = None, now: datetime | None = None,
                           reinforce: bool = True) -> WorkingLoad:
        """Async twin of :meth:`load_thread`."""
        return await self.arun(working.load_thread(  # type: ignore[no-any-return]
            self.env, user_id, messages, query, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now(), limit=limit or self.settings.recall_limit,
            reinforce=reinforce))

    def record_turn(self, user_id: str, messages: Sequence[BaseMessage], *,
                    profile: str | None = None, thread_id: str | None = None,
                    agent_id: str | None = None, now: datetime | None = None,
                    reinforce: Sequence[str] = ()) -> int | None:
        """:meth:`submit`, plus the turn's messages into the user's message log, plus
        the reinforcement (R4.4) of the memories keyed in ``reinforce``.

        All in one transaction; what ``extract_after_turn`` does. Returns the queue
        entry id (None when the turn was queued before).
        """
        entry = self.run(working.record_turn(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now(), reinforce=reinforce))
        return self._after_enqueue(entry, user_id, thread_id)

    async def arecord_turn(self, user_id: str, messages: Sequence[BaseMessage], *,
                           profile: str | None = None, thread_id: str | None = None,
                           agent_id: str | None = None, now: datetime | None = None,
                           reinforce: Sequence[str] = ()) -> int | None:
        """Async twin of :meth:`record_turn`."""
        entry = await self.arun(working.record_turn(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now(), reinforce=reinforce))
        return await self._aafter_enqueue(entry, user_id, thread_id)

    def recent_history(self, user_id: str, *, thread_id: str | None = None,
                       profile: str | None = None, hours: float | None = None,
                       limit: int | None = None,
                       now: datetime | None = None) -> builtins.list[LoggedMessage]:
        """The user's logged messages of the last ``hours`` outside ``thread_id``, oldest first.

        Defaults: ``settings.recent_history_hours`` and ``recent_history_limit``; the
        profile's messages only; turns that are the source of an ``avoid`` memory are
        left out.
        """
        return self.run(history.recent_history(  # type: ignore[no-any-return]
            self.env, user_id, profile=profile, thread_id=thread_id, now=now or self.now(),
            hours=hours, limit=limit))

    async def arecent_history(self, user_id: str, *, thread_id: str | None = None,
                              profile: str | None = None, hours: float | None = None,
                              limit: int | None = None,
                              now: datetime | None = None) -> builtins.list[LoggedMessage]:
        """Async twin of :meth:`recent_history`."""
        return await self.arun(history.recent_history(  # type: ignore[no-any-return]
            self.env, user_id, profile=profile, thread_id=thread_id, now=now or self.now(),
            hours=hours, limit=limit))

    def sweep_sessions(self, checkpointer: Any, *, now: datetime | None = None,
                       prune: PruneStrategy | None = None, ttl_seconds: float | None = None,
                       extract: bool | None = None) -> SessionSweep:
        """Close threads idle past the session TTL and purge the message log (R8.2).

        A job: call it from a scheduler, or run ``langmem-layer sweep-sessions``.

        Args:
            checkpointer: The graph's checkpointer (sync), e.g. ``PostgresSaver``.
            now: The time to sweep at (tests move it).
            prune: Override ``settings.session_prune``.
            ttl_seconds: Override ``settings.session_ttl_seconds``.
            extract: Extract the turns queued now: ``None`` follows the layer's
                ``extraction`` mode (inline: now; background: wake the worker);
                ``False`` leaves them to a worker process.
        """
        result: SessionSweep = sessions.run_sweep(self, checkpointer, sessions.sweep(
            self.env, now=now or self.now(), ttl_seconds=ttl_seconds, prune=prune))
        if result.enqueued and extract is not False:
            if extract or self.extraction == "inline":
                self.process_pending()
            else:
                self._wake_worker()
        return result

    async def asweep_sessions(self, checkpointer: Any, *, now: datetime | None = None,
                              prune: PruneStrategy | None = None,
                              ttl_seconds: float | None = None,
                              extract: bool | None = None) -> SessionSweep:
        """Async twin of :meth:`sweep_sessions`, with an async checkpointer."""
        result: SessionSweep = await sessions.arun_sweep(self, checkpointer, sessions.sweep(
            self.env, now=now or self.now(), ttl_seconds=ttl_seconds, prune=prune))
        if result.enqueued and extract is not False:
            if extract or self.extraction == "inline":
                await self.aprocess_pending()
            else:
                task = asyncio.get_running_loop().create_task(self._aworker_pass())
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        return result

    def clear_history(self, user_id: str, *, thread_id: str | None = None) -> int:
        """Delete the user's message log (one thread's, or all); returns the count."""
        return self.run(history.clear(user_id, thread_id=thread_id))  # type: ignore[no-any-return]

    async def aclear_history(self, user_id: str, *, thread_id: str | None = None) -> int:
        """Async twin of :meth:`clear_history`."""
        return await self.arun(  # type: ignore[no-any-return]
            history.clear(user_id, thread_id=thread_id))
