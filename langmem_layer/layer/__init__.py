"""The façade: ``MemoryLayer`` (``core``) and what it hands to LangGraph."""

from langmem_layer.layer.core import MemoryLayer

__all__ = [
    "MemoryLayer",
]
