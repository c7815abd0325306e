"""The flow runner: requests a flow yields, what flows share, and ``Runner``.

Each flow is a generator that yields requests — ``StoreCall`` (a batch of store
ops), ``ExtractCall`` (run the extractor), ``Concurrently`` (run other flows
side by side) or a ``Call`` that a registered handler executes — and returns its
result. A ``Runner`` drives a flow with
``store.batch`` and ``extractor.extract`` in sync code, or with ``abatch`` /
``aextract`` in async code: every operation is written once, as a flow, and runs
both ways.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from langchain_core.messages import BaseMessage

from langmem_layer.errors import MissingUserError
from langmem_layer.extract.extractor import Extractor
from langmem_layer.extract.gate import WriteGate
from langmem_layer.sanitize import excerpt
from langmem_layer.settings import MemorySettings
from langmem_layer.tokens import TokenCounter
from langmem_layer.types import (
    IDENTITY_SCOPE,
    Recalled,
)

__all__ = [
    "AsyncHandlers",
    "Call",
    "Concurrently",
    "Env",
    "ExtractCall",
    "Flow",
    "Handlers",
    "Request",
    "Runner",
    "StoreCall",
    "require_user",
    "scopes_for",
]

T = TypeVar("T")


class StoreCall(NamedTuple):
    """Request: run these ops in one store batch (one transaction)."""

    ops: list[Any]


class ExtractCall(NamedTuple):
    """Request: run the extractor."""

    messages: Sequence[BaseMessage]
    existing: Sequence[Recalled]
    now: datetime


class Concurrently(NamedTuple):
    """Request: run ``flows`` side by side; the reply is their results, in order.

    Sync code runs them one after another; async code runs up to ``at_once`` of them
    at a time on the loop, so their store calls share the async store's coalesced
    batches (one round trip carries several flows' statements) and their extractor
    calls overlap. Every flow runs to its end; if any failed, the first failure (in
    ``flows``' order) is raised at the ``yield`` once all have ended, or, with
    ``return_exceptions`` (as ``asyncio.gather``'s), each failure is in the reply in
    place of its flow's result.
    """

    flows: Sequence[Flow[Any]]
    at_once: int = 4
    return_exceptions: bool = False


class Call:
    """Base of the requests a handler executes (see ``Runner.handle``).

    The store and the extractor are the runner's own; anything else a flow needs done
    outside it (a checkpointer call, waking the extraction worker) is a ``Call``
    subclass with a sync and an async handler.
    """


Request: TypeAlias = StoreCall | ExtractCall | Concurrently | Call

#: A flow returning ``T``: yields requests, receives their replies (or has their
#: errors raised at the ``yield``).
Flow: TypeAlias = Generator[Request, Any, T]

#: Sync handlers of ``Call`` types, and their async twins.
Handlers: TypeAlias = Mapping[type[Call], Callable[[Any], Any]]
AsyncHandlers: TypeAlias = Mapping[type[Call], Callable[[Any], Awaitable[Any]]]


@dataclass
class Env:
    """What flows need besides I/O: settings, the gate, the token counter, agent trust."""

    settings: MemorySettings
    gate: WriteGate
    counter: TokenCounter
    trust: Mapping[str, float] = field(default_factory=dict)

    def trust_of(self, agent_id: str | None, learned: Any = None, kind: str | None = None
                 ) -> float:
        """An agent's trust: confirmed / total of its checkable writes when
        ``learned`` (a ``LearnedTrust``) has a history
        for it (per ``kind`` when known), else the configured trust, else 0.5."""
        default = self.trust.get(agent_id or "", 0.5)
        return default if learned is None else float(learned.of(agent_id, kind, default))


#: The longest user id, in characters: every per-user index leads with it (PostgreSQL
#: compresses a long one, but a whole text as an id fails there with a less clear error).
MAX_USER_ID = 2_000


def require_user(user_id: str | None) -> str:
    """Validate a user id; the error says how to pass one.

    Raises:
        MissingUserError: No user id, one that is not a string, blank, or with a dot
            (namespaces join labels with dots).
    """
    if user_id is None or user_id == "":
        raise MissingUserError(
            "No user_id: pass it per run as "
            "graph.invoke(inputs, config={'configurable': {'user_id': 'alice'}}) "
            "or as the first argument of the MemoryLayer method."
        )
    if not isinstance(user_id, str):
        raise MissingUserError(
            f"user_id must be a string, got {type(user_id).__name__} ({excerpt(user_id)}): "
            f"pass str(user_id) if it is a number."
        )
    if not user_id.strip():
        raise MissingUserError(
            f"user_id must not be blank, got {excerpt(user_id)}: pass the user's id, e.g. "
            "'alice'."
        )
    if "." in user_id or "\x00" in user_id:
        raise MissingUserError(f"user_id {excerpt(user_id)} must not contain '.' or NUL.")
    if len(user_id) > MAX_USER_ID:
        raise MissingUserError(
            f"user_id {excerpt(user_id)} is longer than {MAX_USER_ID} characters: pass the "
            "user's id (an id, an email, a subject), not a text.")
    return user_id


def scopes_for(env: Env, profile: str | None) -> tuple[str, str]:
    """A run sees its profile and the user's global identity memories."""
    return (profile or env.settings.default_profile, IDENTITY_SCOPE)




class _Done(Generic[T]):
    """A finished flow's result (its ``StopIteration`` value)."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


class _Ended(NamedTuple):
    """How a flow run side by side ended: its result, or the error it raised."""

    result: Any
    error: Exception | None = None


def _ended(ends: Sequence[_Ended], request: Concurrently) -> list[Any]:
    """The reply to ``request`` once its flows ran side by side: their results, or
    the first one's error (see ``Concurrently``)."""
    if request.return_exceptions:
        return [end.result if end.error is None else end.error for end in ends]
    for end in ends:
        if end.error is not None:
            raise end.error
    return [end.result for end in ends]


def _resume(flow: Flow[T], reply: Any = None, error: Exception | None = None
            ) -> Request | _Done[T]:
    # The one place a flow is stepped: the reply (or the request's error, raised at its
    # ``yield``) goes in, the next request or the result comes out.
    try:
        return flow.throw(error) if error is not None else flow.send(reply)
    except StopIteration as stop:
        return _Done(stop.value)


class Runner:
    """Executes flows against a store and an extractor, in sync or async code.

    Args:
        store: Executes ``StoreCall`` ops with ``batch`` / ``abatch``.
        extractor: Executes ``ExtractCall`` with ``extract`` / ``aextract``.

    A failed request is raised inside the flow at its ``yield``; a flow that does not
    handle it fails with it.
    """

    def __init__(self, store: Any, extractor: Extractor) -> None:
        self.store = store
        self.extractor = extractor
        self._handlers: dict[type[Call], Callable[[Any], Any]] = {}
        self._ahandlers: dict[type[Call], Callable[[Any], Awaitable[Any]]] = {}

    def handle(self, kind: type[Call], sync: Callable[[Any], Any],
               async_: Callable[[Any], Awaitable[Any]]) -> None:
        """Execute requests of type ``kind`` with ``sync`` in ``run``, ``async_`` in
        ``arun``."""
        self._handlers[kind] = sync
        self._ahandlers[kind] = async_

    def run(self, flow: Flow[T], *, extra: Handlers | None = None) -> T:
        """Execute a flow synchronously; returns its result.

        Args:
            flow: The flow.
            extra: Handlers for this run only, of request types the runner does not
                handle (the session sweeper's checkpointer calls, for instance).
        """
        step = _resume(flow)
        while not isinstance(step, _Done):
            try:
                reply = self._call(step, extra)
            except Exception as e:
                step = _resume(flow, error=e)
            else:
                step = _resume(flow, reply)
        return step.value

    async def arun(self, flow: Flow[T], *, extra: AsyncHandlers | None = None) -> T:
        """Async twin of ``run`` (``extra`` handlers are coroutine functions)."""
        step = _resume(flow)
        while not isinstance(step, _Done):
            try:
                reply = await self._acall(step, extra)
            except Exception as e:
                step = _resume(flow, error=e)
            else:
                step = _resume(flow, reply)
        return step.value

    def _call(self, request: Request, extra: Handlers | None) -> Any:
        if isinstance(request, StoreCall):
            return self.store.batch(request.ops)
        if isinstance(request, ExtractCall):
            return self.extractor.extract(request.messages, existing=request.existing,
                                          now=request.now)
        if isinstance(request, Concurrently):
            return _ended([self._outcome(f, extra) for f in request.flows], request)
        return self._handler(request, extra, self._handlers)(request)

    async def _acall(self, request: Request, extra: AsyncHandlers | None) -> Any:
        if isinstance(request, StoreCall):
            return await self.store.abatch(request.ops)
        if isinstance(request, ExtractCall):
            return await self.extractor.aextract(request.messages, existing=request.existing,
                                                 now=request.now)
        if isinstance(request, Concurrently):
            slots = asyncio.Semaphore(max(1, request.at_once))

            async def one(flow: Flow[Any]) -> _Ended:
                async with slots:
                    try:
                        return _Ended(await self.arun(flow, extra=extra))
                    except Exception as e:
                        return _Ended(None, e)

            return _ended(await asyncio.gather(*(one(f) for f in request.flows)), request)
        return await self._handler(request, extra, self._ahandlers)(request)

    def _outcome(self, flow: Flow[T], extra: Handlers | None) -> _Ended:
        """How ``run`` of ``flow`` ended."""
        try:
            return _Ended(self.run(flow, extra=extra))
        except Exception as e:
            return _Ended(None, e)

    @staticmethod
    def _handler(request: Call, extra: Mapping[type[Call], Any] | None,
                 registered: Mapping[type[Call], Any]) -> Any:
        kind = type(request)
        if extra and kind in extra:
            return extra[kind]
        try:
            return registered[kind]
        except KeyError:
            raise TypeError(f"No handler for flow request {request!r}") from None
