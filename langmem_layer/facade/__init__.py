"""The façade: ``MemoryLayer`` (``memory_layer``) and what it hands to LangGraph."""

from langmem_layer.facade.memory_layer import MemoryLayer

__all__ = [
    "MemoryLayer",
]
