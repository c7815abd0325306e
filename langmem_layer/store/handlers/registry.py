"""The op → handler dispatch table, built once per class.

A handler method is marked with ``handles``; ``Registry`` collects the marked
methods of a class and its bases into a class-level table when the class is defined,
so dispatching an op is one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeVar

from langmem_layer.errors import InvalidInputError
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


def own_parts(op: Any, parts: Iterable[Any], what: str = "a part") -> None:
    """Refuse ``op`` when one of the ops it carries (``parts``, ``None`` skipped) acts
    for another user than its own ``user_id``: its statements bind only that user.

    Raises:
        InvalidInputError: Naming the op and ``what`` it holds.
    """
    if any(p is not None and p.user_id != op.user_id for p in parts):
        raise InvalidInputError(
            f"{type(op).__name__} for user {op.user_id!r} holds {what} of another user: "
            "give each part the op's user_id.")


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
