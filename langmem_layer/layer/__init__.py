"""layer: re-exports."""

from langmem_layer.layer.core import MemoryLayer

__all__ = [
    "MemoryLayer",
]
