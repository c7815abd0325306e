"""The op → handler dispatch table, built once per class.

A handler method is marked with :func:`handles`; :class:`Registry` collects the marked
methods of a class and its bases into a class-level table when the class is defined,
so dispatching an op is one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from langmem_layer.store.plan import Handler

__all__ = ["Registry", "handles"]

_F = TypeVar("_F", bound=Callable[..., Handler])
_MARK = "__langmem_handles__"


def handles(*op_types: type) -> Callable[[_F], _F]:
    """Mark a method as the handler of ``op_types``."""

    def mark(method: _F) -> _F:
        setattr(method, _MARK, (*getattr(method, _MARK, ()), *op_types))
        return method

    return mark


class Registry:
    """Base of every handler mixin; its subclasses get their dispatch table at definition."""

    _handlers: ClassVar[dict[type, Callable[..., Handler]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[type, Callable[..., Handler]] = {}
        # Bases first (reversed MRO), so a subclass's own handler wins.
        for klass in reversed(cls.__mro__):
            for attr in vars(klass).values():
                for op_type in getattr(attr, _MARK, ()):
                    table[op_type] = attr
        cls._handlers = table

    def _handler(self, op: Any) -> Handler:
        """The handler generator for ``op``."""
        handler = self._handlers.get(type(op))
        if handler is None:
            raise TypeError(f"Unsupported operation: {type(op).__name__}")
        return handler(self, op)
