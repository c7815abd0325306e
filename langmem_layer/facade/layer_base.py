"""What every group of ``MemoryLayer``'s methods works with.

The façade is one class assembled from groups of methods, one module each, by what a
caller is doing (``working_methods``, ``agent_methods``, ``control_methods``,
``knowledge_methods``, ``trust_methods``, and ``memory_layer`` for remembering and
recalling). Each group derives from ``LayerBase``: the state ``MemoryLayer.__init__``
sets up and the few methods the groups share, declared once here rather than guessed at
by each group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, TypeVar

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from langmem_layer.flow import AsyncHandlers, Env, Flow, Handlers, Runner
from langmem_layer.read import recall as read
from langmem_layer.settings import MemorySettings

if TYPE_CHECKING:
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableLambda

    from langmem_layer.facade.nodes import KnowledgeCalls
    from langmem_layer.worker import Worker

__all__ = ["LayerBase"]

T = TypeVar("T")


class LayerBase:
    """The state and shared methods of every group of the façade's methods.

    Attributes:
        store: The store every flow runs on.
        settings: Thresholds, weights and budgets (after the calibration profile).
        env: What flows read besides the store (settings, gate, token counter, trust).
        extraction: ``"background"`` or ``"inline"``.
        knowledge: The knowledge source's retriever, or None.
        load_memory, assemble_context, extract_after_turn: The three nodes.
        runner: Executes flows on the store (``run`` / ``arun``).
        worker: The background extraction (a thread, or tasks in async code).
    """

    store: BaseStore
    settings: MemorySettings
    env: Env
    extraction: Literal["background", "inline"]
    knowledge: BaseRetriever | None
    runner: Runner
    worker: Worker
    agents: KnowledgeCalls
    _clock: Callable[[], datetime]

    @property
    def load_memory(self) -> RunnableLambda:
        raise NotImplementedError

    @property
    def assemble_context(self) -> RunnableLambda:
        raise NotImplementedError

    @property
    def extract_after_turn(self) -> RunnableLambda:
        raise NotImplementedError

    def now(self) -> datetime:
        """The layer's current time."""
        return self._clock()

    def run(self, flow: Flow[T], *, extra: Handlers | None = None) -> T:
        """Execute a flow synchronously (see ``langmem_layer.flow.Runner.run``).

        Args:
            flow: The flow.
            extra: Handlers of request types besides the store, extractor and worker
                requests (the session sweeper's checkpointer calls, for instance).
        """
        return self.runner.run(flow, extra=extra)

    async def arun(self, flow: Flow[T], *, extra: AsyncHandlers | None = None) -> T:
        """Async twin of ``run``."""
        return await self.runner.arun(flow, extra=extra)

    def _block_inputs(self, user_id: str, query: str | None, *, profile: str | None = None,
                      thread_id: str | None = None, messages: Sequence[BaseMessage] = (),
                      now: datetime | None = None) -> Flow[read.BlockInputs]:
        return read.block_inputs_flow(self.env, user_id, query, profile=profile,
                                      thread_id=thread_id, messages=messages,
                                      now=now or self.now())

