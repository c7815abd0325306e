"""The op → handler dispatch of the store core.

An op type registered with ``langmem_layer.store.ops.dispatch.operation`` carries its
handler, a function of the core and the op. The families not moved there yet keep
handler methods on mixins, marked with ``handles``; ``Registry`` collects the marked
methods of a class and its bases into a class-level table when the class is defined,
so dispatching an op is one dictionary lookup either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from langmem_layer.store.ops.dispatch import operation_of, own_parts
from langmem_layer.store.plan import Handler

__all__ = ["Registry", "handles", "own_parts"]

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
        """The handler generator for ``op``: its registered operation's, run with this
        core as its context, else a mixin's handler method."""
        registered = operation_of(op)
        if registered is not None:
            return registered.handler(self, op)
        handler = self._handlers.get(type(op))
        if handler is None:
            raise TypeError(f"Unsupported operation: {type(op).__name__}")
        return handler(self, op)
