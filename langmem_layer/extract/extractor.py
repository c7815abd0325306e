"""The extraction interface: operations an extractor proposes, and the protocol it follows.

An extractor reads a turn's new messages together with the user's existing relevant
memories and proposes ``MemoryOperation`` values. It is deliberately loose; the
write gate (``langmem_layer.extract.gate``) decides what is actually written.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Protocol, runtime_checkable

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, ConfigDict, Field

from langmem_layer.types import Kind, Layer, Policy, Recalled

__all__ = ["Extractor", "FallbackOperations", "MemoryOperation", "OpType", "fallback_label"]


class OpType(StrEnum):
    """What an operation does to the store."""

    ADD = "add"
    UPDATE = "update"
    REINFORCE = "reinforce"
    CONTRADICT = "contradict"
    CLOSE_OPEN_LOOP = "close_open_loop"
    FORGET = "forget"


class MemoryOperation(BaseModel):
    """One proposed change to a user's memory.

    ``add`` and ``update`` carry ``content``. Operations on an existing memory name it
    by ``target_id`` when the extractor knows the id (it was shown the existing
    memories), or by ``target_hint`` (words describing it, e.g. ``"my old job"``)
    which the write path resolves by search.
    """

    model_config = ConfigDict(extra="forbid")

    op: OpType
    content: str | None = None
    target_id: str | None = None
    target_hint: str | None = None
    kind: Kind = Kind.PROFILE_FACT
    layer: Layer | None = Field(
        default=None, description="None: derived from kind (identity kinds go global)."
    )
    policy: Policy = Policy.SPEAK
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    salience: float = Field(default=0.5, ge=0.0, le=1.0)
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    refs: list[str] = Field(default_factory=list)
    due_at: datetime | None = None
    ephemeral: bool = False
    reason: str = Field(default="", description="Which rule or rationale produced it.")
    source_message_id: str | None = None
    source_text: str | None = None


@runtime_checkable
class Extractor(Protocol):
    """Turns new messages (plus existing memories) into proposed operations."""

    def extract(
        self,
        messages: Sequence[BaseMessage],
        *,
        existing: Sequence[Recalled] = (),
        now: datetime,
    ) -> list[MemoryOperation]:
        """Propose operations for ``messages``; ``now`` is the turn's time."""
        ...

    async def aextract(
        self,
        messages: Sequence[BaseMessage],
        *,
        existing: Sequence[Recalled] = (),
        now: datetime,
    ) -> list[MemoryOperation]:
        """Async twin of ``extract``."""
        ...


class FallbackOperations(list[MemoryOperation]):
    """Operations a fallback extractor proposed because the primary one failed.

    A list like any extractor's result, plus which extractor produced it and why, so
    the write path can keep the turn for re-extraction (the ``reextract`` job).

    Attributes:
        extractor: E.g. ``"rules (fallback: ConnectionError: model unreachable)"``.
    """

    def __init__(self, operations: Sequence[MemoryOperation], extractor: str) -> None:
        super().__init__(operations)
        self.extractor = extractor


def fallback_label(operations: Sequence[MemoryOperation]) -> str | None:
    """The fallback description of an extractor's result; None for a normal result."""
    return operations.extractor if isinstance(operations, FallbackOperations) else None
