"""What a part of the layer is: a group of ``MemoryLayer``'s less everyday methods, held
as an attribute (``memory.threads``, ``memory.admin``, ``memory.trust``,
``memory.agents``) so the façade itself stays one screen of method pairs.

A part works through the layer's public state only (``runner``, ``worker``, ``env``,
``settings``, ``now``): no private attribute crosses from the layer into a part.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langmem_layer.flow import Env
    from langmem_layer.layer.base import LayerBase
    from langmem_layer.settings import MemorySettings

__all__ = ["Part"]


class Part:
    """A group of the layer's methods, on the layer it belongs to.

    Args:
        layer: The memory layer (a ``MemoryLayer``).
    """

    def __init__(self, layer: LayerBase) -> None:
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
