"""What a part of the layer is: a group of ``MemoryLayer``'s less everyday methods, held
as an attribute (``memory.threads``, ``memory.admin``, ``memory.trust``,
``memory.agents``) so the façade itself stays one screen of method pairs.

A part works through the layer's public state only (``runner``, ``worker``, ``env``,
``settings``, ``now``): no private attribute crosses from the layer into a part.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from langchain_core.retrievers import BaseRetriever

    from langmem_layer.flow import Env, Runner
    from langmem_layer.settings import MemorySettings
    from langmem_layer.worker import Worker

__all__ = ["LayerState", "Part"]


class LayerState(Protocol):
    """The layer's public state a part works through (a ``MemoryLayer`` has it)."""

    env: Env
    settings: MemorySettings
    runner: Runner
    worker: Worker
    extraction: Literal["background", "inline"]
    knowledge: BaseRetriever | None

    def now(self) -> datetime:
        """The layer's current time."""
        ...


class Part:
    """A group of the layer's methods, on the layer it belongs to.

    Args:
        layer: The memory layer (a ``MemoryLayer``).
    """

    def __init__(self, layer: LayerState) -> None:
        self.layer = layer

    @property
    def env(self) -> Env:
        """The layer's settings, gate, token counter and configured trust."""
        return self.layer.env

    @property
    def settings(self) -> MemorySettings:
        """The layer's settings."""
        return self.layer.settings

    def now(self) -> datetime:
        """The layer's current time."""
        return self.layer.now()
