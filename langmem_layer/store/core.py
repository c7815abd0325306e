"""The store's logic, free of I/O, composed: configuration and the op handlers.

Handlers are generators stepped by a :class:`~langmem_layer.store.plan.Plan`; the sync
and async stores only perform the I/O steps of :mod:`langmem_layer.store.driver`.
The parts live in their own modules:

- :mod:`~langmem_layer.store.config`: the index configuration;
- :mod:`~langmem_layer.store.tenancy`: namespace validation, namespace → user;
- :mod:`~langmem_layer.store.registry`: the op → handler table, built once per class;
- :mod:`~langmem_layer.store.item_handlers`: LangGraph's ``BaseStore`` ops;
- :mod:`~langmem_layer.store.memory_handlers`: recall, links, export and import;
- :mod:`~langmem_layer.store.queue_handlers`, :mod:`~langmem_layer.store.working_handlers`;
- :mod:`~langmem_layer.store.maintenance`: migrations, sweeps, indexes of large users;
- :mod:`~langmem_layer.store.driver`: the one execution of a plan, for both stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Literal, cast

from langgraph.store.base import Op, PutOp, ensure_embeddings

from langmem_layer import embeddings
from langmem_layer.store.config import (
    MemoryIndexConfig,
    check_index_config,
    check_ttl_config,
    field_path,
    model_name,
)
from langmem_layer.store.embedding import RETRY_BASE_DELAY, default_max_input_tokens
from langmem_layer.store.key_handlers import KeyHandlers
from langmem_layer.store.lifecycle_handlers import LifecycleHandlers
from langmem_layer.store.maintenance import ANN_MIN_USER_VECTORS, Maintenance
from langmem_layer.store.memory_handlers import MemoryHandlers
from langmem_layer.store.plan import Plan, Step
from langmem_layer.store.queue_handlers import QueueHandlers
from langmem_layer.store.user_handlers import UserHandlers
from langmem_layer.store.working_handlers import WorkingHandlers
from langmem_layer.types import MEMORY_ROOT

__all__ = ["ANN_MIN_USER_VECTORS", "MemoryIndexConfig", "Plan", "StoreCore"]


class StoreCore(UserHandlers, QueueHandlers, WorkingHandlers, LifecycleHandlers, MemoryHandlers,
                Maintenance, KeyHandlers):
    """Configuration and operation handlers shared by the sync and async stores.

    Args:
        conn: The connection or pool the executing subclass uses.
        index: Embedding configuration, ``"default"`` for the default model
            (:func:`langmem_layer.embeddings.default_index`), or ``None`` for no vectors.
        ttl: LangGraph ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``).
        tenant_roots: First namespace labels whose second label is the user id.
            Items elsewhere belong to the shared tenant ``""``.
        clock: Returns "now"; tests move time by passing their own.
        embedding_batch_size: Texts per embedding call (R3.5: 100).
        embedding_retry_delay: Seconds to wait before retrying a failed embedding
            call; doubled before the last attempt (R3.5: 3 attempts in all).
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
    ) -> None:
        if index == "default":
            index = embeddings.default_index()  # looked up per call: tests and tools swap it
        check_index_config(index)
        check_ttl_config(ttl)
        self.conn = conn
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

    def now(self) -> datetime:
        """The store's current time."""
        return self._clock()

    def plan(self, ops: Iterable[Op | Any]) -> Plan:
        """Turn a batch of ops into a :class:`Plan`. Consecutive puts share one handler."""
        steps: list[Step] = []
        run: list[tuple[int, PutOp]] = []

        def flush() -> None:
            if run:
                idx = [i for i, _ in run]
                steps.append(Step(idx, self._put([op for _, op in run]), multi=True))
                run.clear()

        size = 0
        for i, op in enumerate(ops):
            size += 1
            self._validate(op)
            if isinstance(op, PutOp):
                run.append((i, op))
                continue
            flush()
            steps.append(Step([i], self._handler(op)))
        flush()
        return Plan(steps, size, self.dims, self.model_id, now=self.now(),
                    max_input_tokens=self.max_input_tokens)
