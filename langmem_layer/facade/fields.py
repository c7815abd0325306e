"""What the memory nodes and the graph side share, free of LangGraph's graph package:
the nodes' names, the state fields they read and write, and what ``wire`` and the
prebuilt agents' hooks take (a layer's three nodes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from typing_extensions import TypedDict  # pydantic (LangServe schemas) needs it on 3.11

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableLambda

__all__ = ["ASSEMBLE", "EXTRACT", "LOAD", "MemoryFields", "Wirable"]

LOAD, ASSEMBLE, EXTRACT = "load_memory", "assemble_context", "extract_after_turn"


# typing_extensions' TypedDict, as LangGraph's and LangChain's AgentState use, so a state
# class may extend both (``langmem_layer.facade.prebuilt.MemoryAgentState``).
class MemoryFields(TypedDict, total=False):
    """The fields the memory nodes read and write besides ``messages``.

    Attributes:
        memory_context: The memory block for this turn (see ``langmem_layer.read.block``).
        recalled: What ``load_memory`` retrieved, then where ``assemble_context`` placed it.
        memory_spoken: Keys placed in "RELEVANT FOR THIS TURN" or "OPEN THREADS" in each of
            the last turns (speak memories and due loops go quiet on the third).
        recent_history: The user's recent messages from other threads, read by
            ``load_memory`` for ``assemble_context`` (optional: a schema without it
            simply gets no recent-history section).
        knowledge: Documents the layer's knowledge source returned for the turn, read by
            ``load_memory`` beside the memories (``MemoryLayer(knowledge=...)``).
        memory_shown_at: When this thread's last block was assembled (ISO time): the
            messages from other threads older than that were already offered to the
            thread, so later turns do not repeat them.
    """

    memory_context: str
    recalled: list[dict[str, Any]]
    memory_spoken: list[list[str]]
    recent_history: list[dict[str, Any]]
    knowledge: list[dict[str, Any]]
    memory_shown_at: str


class Wirable(Protocol):
    """The three nodes (a MemoryLayer's): what ``wire`` puts into a graph and what the
    prebuilt agents' hooks (``langmem_layer.facade.prebuilt``) call."""

    @property
    def load_memory(self) -> RunnableLambda:
        """The ``load_memory`` node."""
        ...

    @property
    def assemble_context(self) -> RunnableLambda:
        """The ``assemble_context`` node."""
        ...

    @property
    def extract_after_turn(self) -> RunnableLambda:
        """The ``extract_after_turn`` node."""
        ...
