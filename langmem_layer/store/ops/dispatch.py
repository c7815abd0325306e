"""The op → handler table, built from the op classes themselves.

An op type declares its handler and its traits where it is defined::

    def _count(ctx: Context, op: TrustCountOp) -> Handler:
        yield Query(*count(op.user_id, ...))

    @operation(_count)
    class TrustCountOp(NamedTuple):
        ...

A handler is a generator function of a ``Context`` (the public state of the store
core it runs in) and the op: it yields the steps of ``langmem_layer.store.plan``
(``Query``, an embedding request, ...) and returns the op's result; it never does I/O
itself. ``OPERATIONS`` maps each registered op type to its ``Operation``; the store
core looks an op up there (``operation_of``) for its handler, for whom its statements
act (``maintenance``, ``owner``) and how its batch may run (``free``,
``async_commit``).

LangGraph's own ops (``GetOp``, ``PutOp``, ``SearchOp``, ``ListNamespacesOp``) are
classes of another package: their handlers are methods of the store core
(``langmem_layer.store.base_store``), marked with ``handles`` and collected by
``Registry`` into a class-level table when the class is defined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from langmem_layer.errors import InvalidInputError
from langmem_layer.store.plan import Handler

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langmem_layer.sql import Sql
    from langmem_layer.store.ops.items import Write

__all__ = ["OPERATIONS", "Context", "Operation", "Registry", "handles", "operation", "operation_of",
           "own_parts"]

_T = TypeVar("_T", bound=type)
_F = TypeVar("_F", bound=Callable[..., Handler])
_MARK = "__langmem_handles__"


class Context(Protocol):
    """What the store core gives a handler: its configuration, its clock, and the public
    parts of its state (``StoreCore`` is checked against this protocol)."""

    #: The embedding model (None: a store without vectors).
    embeddings: Embeddings | None
    #: The model's id, under which vectors and indexes are stored.
    model_id: str | None
    #: The vectors' dimensions.
    dims: int | None
    #: The store's index configuration (``MemoryIndexConfig``).
    index_config: Any
    #: Whether the store acts as the row-level-security role (``rls``).
    rls: bool

    @property
    def vector_type(self) -> str:
        """The vectors' column type: ``vector`` or ``halfvec``."""
        ...

    def now(self) -> datetime:
        """The store's current time."""
        ...

    def tenant(self, namespace: tuple[str, ...], *, prefix: bool = False) -> str:
        """The user a namespace belongs to (``""``: the shared tenant)."""
        ...

    def handler_at(self, op: Any, now: datetime | None) -> Handler:
        """``op``'s handler (a nested op); a put inside it writes as of ``now``."""
        ...

    def write_items(self, writes: list[Write], now: datetime, *, last: bool = False
                    ) -> Handler:
        """Upsert or delete items and replace their vectors."""
        ...

    def ann_dims(self, user: str, *, ef_search: int = ...) -> Handler:
        """Look the user's own ANN index up: its dims (None: search exactly)."""
        ...

    def ann_lookup(self, user: str, ef_search: int) -> Sql:
        """The statement ``ann_dims`` sends."""
        ...

    def remembered_index(self, user_id: str) -> tuple[bool, int | None]:
        """Whether this store looked the user's index up before, and its dims then."""
        ...

    def index_seen(self, user: str, dims: int | None) -> None:
        """Remember what a lookup of the user's index found."""
        ...

    def forget_index(self, user_id: str) -> None:
        """Forget what this store remembers of the user's own ANN index."""
        ...


@dataclass(frozen=True, slots=True)
class Operation:
    """A registered op type's handler and traits.

    Attributes:
        handler: ``handler(ctx, op)``, the generator that carries the op out.
        free: The op may share round trips with the consecutive ones of its batch
            (``Plan.next_round <langmem_layer.store.plan.Plan.next_round>``): a read of
            a turn, or a one-statement write of a turn's bookkeeping that touches no
            table those reads read (items, links, embeddings).
        async_commit: A batch of nothing but such ops may commit without waiting for
            its WAL to reach the disk (``synchronous_commit`` off for that transaction
            alone): a crash can lose the last fraction of a second of them, so only
            reads and the thread's activity stamp are.
        maintenance: The op spans users: its statements run under the maintenance
            bypass of row-level security, except the per-user statements it binds
            itself (``Query(..., bind=Binding(user))``).
        owner: Its statements run as the session's own role, not the app role: they
            create or drop a user's own indexes, which only the tables' owner may do.
            Still bound to their user.
    """

    handler: Callable[[Any, Any], Handler]
    free: bool = False
    async_commit: bool = False
    maintenance: bool = False
    owner: bool = False


#: Every registered op type, with its handler and traits.
OPERATIONS: dict[type, Operation] = {}


def operation(handler: Callable[[Any, Any], Handler], *, free: bool = False,
              async_commit: bool = False, maintenance: bool = False,
              owner: bool = False) -> Callable[[_T], _T]:
    """Register the decorated op type with its ``handler`` and traits (see ``Operation``).

    Raises:
        TypeError: The type is registered already.
    """

    def register(op_type: _T) -> _T:
        if op_type in OPERATIONS:
            raise TypeError(f"{op_type.__name__} is registered already")
        OPERATIONS[op_type] = Operation(handler, free=free, async_commit=async_commit,
                                        maintenance=maintenance, owner=owner)
        return op_type

    return register


def operation_of(op: Any) -> Operation | None:
    """The registration of ``op``'s type (None: not registered here)."""
    return OPERATIONS.get(type(op))


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


# -- handler methods: LangGraph's own ops, whose classes cannot be registered ------------


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
        core as its context, else a handler method's."""
        registered = operation_of(op)
        if registered is not None:
            return registered.handler(self, op)
        handler = self._handlers.get(type(op))
        if handler is None:
            raise TypeError(f"Unsupported operation: {type(op).__name__}")
        return handler(self, op)
