"""The store's logic, free of I/O, composed: configuration and the op handlers.

Handlers are generators stepped by a ``Plan``; the sync
and async stores only perform the I/O steps of ``langmem_layer.store.driver``.
The parts live in their own modules:

- ``options``: the index configuration;
- ``tenancy``: namespace validation, namespace → user;
- ``ops``: the memory ops, one module per family with their SQL and handlers, each op
  registered with its handler and traits (``ops/dispatch.py``);
- ``base_store``: LangGraph's ``BaseStore`` ops, methods of the core;
- ``maintenance``: migrations and the maintenance jobs;
- ``driver``: the one execution of a plan, for both stores.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Literal, cast

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, SearchOp, ensure_embeddings

from langmem_layer.sql.rls import APP_ROLE
from langmem_layer.store.base_store import listing_user
from langmem_layer.store.embedding import default_embedder as embeddings
from langmem_layer.store.embedding.work import RETRY_BASE_DELAY, default_max_input_tokens
from langmem_layer.store.maintenance import ANN_MIN_USER_VECTORS, Maintenance
from langmem_layer.store.ops import GetManyOp
from langmem_layer.store.ops.dispatch import OPERATIONS, Context
from langmem_layer.store.options import (
    MemoryIndexConfig,
    check_index_config,
    check_ttl_config,
    field_path,
    model_name,
    rls_enabled,
    rls_where_possible,
)
from langmem_layer.store.plan import MAINTENANCE, Binding, Plan, Step
from langmem_layer.types import MEMORY_ROOT

__all__ = ["ANN_MIN_USER_VECTORS", "ASYNC_HOOKS", "FREE_OPS", "SYNC_HOOKS",
           "MemoryIndexConfig", "Plan", "StoreCore", "commits_async", "is_free",
           "runs_as_owner", "spans_users"]

#: Which of the hooks ``StoreCore.on_close`` registers a store runs at close
#: (``_closing_hooks``): the sync store the plain ones, the async store the coroutines.
SYNC_HOOKS, ASYNC_HOOKS = 0, 1

#: LangGraph's own ops that may share round trips with the consecutive ones of their
#: batch, like the memory ops registered ``free`` (``Operation.free``): LangGraph's
#: classes cannot carry the trait, and their handlers (``ItemHandlers``) stay methods
#: of the core. ``GetManyOp`` is the async store's batch of ``aget`` calls.
FREE_OPS: frozenset[type] = frozenset({GetOp, SearchOp, ListNamespacesOp, GetManyOp})


def spans_users(kind: type) -> bool:
    """Whether ops of this type span users (``Operation.maintenance``): their statements
    run under the maintenance bypass of row-level security, except the per-user ones
    they bind themselves."""
    registered = OPERATIONS.get(kind)
    return registered is not None and registered.maintenance


def runs_as_owner(kind: type) -> bool:
    """Whether ops of this type run as the tables' owner (``Operation.owner``)."""
    registered = OPERATIONS.get(kind)
    return registered is not None and registered.owner


def is_free(kind: type | None) -> bool:
    """Whether ops of this type may share round trips (``Operation.free``,
    ``FREE_OPS``)."""
    registered = OPERATIONS.get(kind) if kind is not None else None
    return registered.free if registered else kind in FREE_OPS


def commits_async(kind: type | None) -> bool:
    """Whether a batch of nothing but such ops may commit without waiting for its WAL
    (``Operation.async_commit``)."""
    registered = OPERATIONS.get(kind) if kind is not None else None
    return registered is not None and registered.async_commit


class StoreCore(Maintenance):
    """Configuration and operation handlers shared by the sync and async stores.

    Args:
        conn: The connection or pool the executing subclass uses.
        index: Embedding configuration, ``"default"`` for the default model
            (``langmem_layer.store.embedding.default_embedder.default_index``), or ``None`` for
            no vectors.
        ttl: LangGraph ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``).
        tenant_roots: First namespace labels whose second label is the user id.
            Items elsewhere belong to the shared tenant ``""``.
        clock: Returns "now"; tests move time by passing their own.
        embedding_batch_size: Texts per embedding call (default 100).
        embedding_retry_delay: Seconds to wait before retrying a failed embedding
            call; doubled before the last attempt (3 attempts in all).
        rls: Act as the row-level-security role ``rls_role`` in every transaction
            (``SET LOCAL ROLE``), so the database itself keeps each statement to the
            user bound to it. ``None``: the ``LANGMEM_RLS`` environment variable, else
            on wherever the database allows it (the role exists and the connection
            may act as it), decided by the server per transaction.
            ``True`` requires the role. The user is bound to every transaction either
            way.
        rls_role: The role ``rls=True`` switches to (``langmem_app``, which ``setup()``
            creates); ``None`` when the connection already logs in as such a role.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        conn: Any,
        *,
        index: MemoryIndexConfig | Literal["default"] | None = "default",
        ttl: dict[str, Any] | None = None,
        tenant_roots: Iterable[str] = (MEMORY_ROOT,),
        clock: Callable[[], datetime] | None = None,
        embedding_batch_size: int = 100,
        embedding_retry_delay: float = RETRY_BASE_DELAY,
        rls: bool | None = None,
        rls_role: str | None = APP_ROLE,
    ) -> None:
        if index == "default":
            index = embeddings.default_index()  # looked up per call: tests and tools swap it
        check_index_config(index)
        check_ttl_config(ttl)
        self.conn = conn
        self.rls = rls_enabled(rls)
        self.rls_role = rls_role if self.rls else None
        self.rls_where_possible = self.rls and rls_where_possible(rls)
        self.embedding_batch_size = embedding_batch_size
        self.embedding_retry_delay = embedding_retry_delay
        self.tenant_roots = frozenset(tenant_roots)
        self.ttl_config = cast(Any, ttl)
        self._clock = clock or (lambda: datetime.now(UTC))
        self.index_config = index
        self.embeddings = None
        self.dims = None
        self.model_id = None
        self.max_input_tokens: int | None = None
        self._fields = []
        if index:
            self.embeddings = ensure_embeddings(index["embed"])
            self.dims = index.get("dims")
            raw = index["embed"]
            self.model_id = index.get("model_id") or (
                raw if isinstance(raw, str) else model_name(raw)
            )
            self._fields = [field_path(f) for f in index.get("fields") or ["$"]]
            self.max_input_tokens = (
                index["max_input_tokens"] if "max_input_tokens" in index
                else default_max_input_tokens(self.model_id)
            )
        self._close_hooks: list[tuple[weakref.WeakMethod[Any], weakref.WeakMethod[Any]]] = []
        self._index_dims = {}

    def on_close(self, hook: Callable[[], None],
                 ahook: Callable[[], Awaitable[None]]) -> None:
        """Call ``hook`` (sync store) or await ``ahook`` (async store) when the store's
        ``from_conn_string`` block ends, before its connection closes.

        The layer's worker registers one, to release the turns its pass still holds
        leased. Both are bound methods, held weakly: registering does not keep their
        object alive.
        """
        self._close_hooks.append((weakref.WeakMethod(hook), weakref.WeakMethod(ahook)))

    def _closing_hooks(self, which: int) -> list[Callable[[], Any]]:
        """The live hooks to run at close (``SYNC_HOOKS`` or ``ASYNC_HOOKS``), each once."""
        hooks, self._close_hooks = self._close_hooks, []
        return [h for pair in hooks if (h := pair[which]()) is not None]

    def now(self) -> datetime:
        """The store's current time."""
        return self._clock()

    def binding(self, op: Any) -> Binding:
        """Whom an op's statements act for under row-level security (sql/rls.py).

        The user its namespace or ``user_id`` names; the maintenance bypass for the
        ops that span users (``spans_users``, a claim or re-extraction without
        a user, a namespace listing across tenants).
        """
        if isinstance(op, (PutOp, GetOp, GetManyOp)):
            return Binding(self.tenant(op.namespace))
        if isinstance(op, SearchOp):
            return Binding(self.tenant(op.namespace_prefix, prefix=True))
        if isinstance(op, ListNamespacesOp):
            user = listing_user(op, self.tenant_roots)
            return MAINTENANCE if user is None else Binding(user)
        if spans_users(type(op)):
            return MAINTENANCE
        user = getattr(op, "user_id", None)
        if user is None:
            return MAINTENANCE
        return Binding(user, owner=runs_as_owner(type(op)))

    def plan(self, ops: Iterable[Op | Any], *, validated: bool = False) -> Plan:
        """Turn a batch of ops into a ``Plan``. Consecutive puts of one user share
        one handler. ``validated``: the caller checked every op already (the async
        store checks each call's ops as it arrives, so a bad one fails only its call)."""
        steps: list[Step] = []
        run: list[tuple[int, PutOp]] = []
        run_bind = MAINTENANCE

        def flush() -> None:
            if run:
                idx = [i for i, _ in run]
                steps.append(Step(idx, self._put([op for _, op in run]), multi=True,
                                  bind=run_bind))
                run.clear()

        size = 0
        for i, op in enumerate(ops):
            size += 1
            if not validated:
                self._validate(op)
            bind = self.binding(op)
            if isinstance(op, PutOp):
                if run and bind != run_bind:  # each user's puts under their own binding
                    flush()
                run.append((i, op))
                run_bind = bind
                continue
            flush()
            kind = type(op)
            steps.append(Step([i], self._handler(op), bind=bind, free=is_free(kind),
                              kind=kind))
        flush()
        return Plan(steps, size, self.dims, self.model_id, now=self.now(),
                    max_input_tokens=self.max_input_tokens,
                    commit_async=all(commits_async(step.kind) for step in steps))


def _is_a_context(core: StoreCore) -> Context:
    """The store core is the context its ops' handlers run in (checked by mypy)."""
    return core
