"""langmem_layer: durable, typed long-term memory for LangGraph agents.

Add three nodes to a graph (``load_memory``, ``assemble_context``,
``extract_after_turn``), compile it with a ``PostgresMemoryStore``, and the agent
remembers each user across threads, agents and months.

This namespace holds what a LangGraph user's code needs: the stores, the façade and the
parts it hands to LangGraph, the settings and the types a call takes or returns, and
every error. Everything else is imported from its own module, each with an ``__all__``:
``langmem_layer.jobs`` (maintenance jobs), ``langmem_layer.extract`` (extractors and the
write gate), ``langmem_layer.synth`` (synthesis), ``langmem_layer.settings`` (gate and
ranking settings, calibration profiles), ``langmem_layer.store.options`` and
``langmem_layer.store.ops`` (store configuration and ops), ``langmem_layer.types``,
``langmem_layer.write.apply``, ``langmem_layer.write.extraction_queue``,
``langmem_layer.working``, ``langmem_layer.facade.*`` and ``langmem_layer.server.*``.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from langmem_layer.errors import (
    AccessDeniedError,
    ConcurrencyError,
    ConfigurationError,
    DatabaseNotFoundError,
    DatabaseUnavailableError,
    EmbeddingDimensionError,
    EmbeddingError,
    ExtractionError,
    InvalidContentError,
    InvalidFilterError,
    InvalidInputError,
    InvalidMemoryError,
    InvalidNamespaceError,
    LangmemError,
    MemoryNotFoundError,
    MissingUserError,
    NotProceduralError,
    OperationAppliedError,
    PoolTimeoutError,
    SchemaNotReadyError,
    SyncCallOnEventLoopError,
)
from langmem_layer.types import Kind, Layer, MemoryRecord, Policy, Recalled, Status

if _TYPE_CHECKING:
    from langmem_layer.environment import aopen_store, open_store
    from langmem_layer.facade import MemoryLayer
    from langmem_layer.facade.agent_graph import build_agent_graph
    from langmem_layer.facade.nodes import memory_prompt
    from langmem_layer.facade.prebuilt import MemoryAgentState, MemoryMiddleware
    from langmem_layer.facade.tools import create_memory_tools
    from langmem_layer.facade.wiring import MemoryState, wire
    from langmem_layer.knowledge import knowledge_store
    from langmem_layer.read.block import ContextBlock
    from langmem_layer.settings import MemorySettings
    from langmem_layer.store.aio import AsyncPostgresMemoryStore
    from langmem_layer.store.sync import PostgresMemoryStore
    from langmem_layer.working.sessions import apostgres_checkpointer, postgres_checkpointer

#: Where each name that is not an error or a type lives. They are imported on first
#: use (PEP 562): the graph runtime, the agent middleware and the retriever classes they
#: bring cost about a second of start-up, which a command-line call that needs none of
#: them (``langmem-layer search``) should not pay.
_LAZY = {
    "aopen_store": "langmem_layer.environment",
    "open_store": "langmem_layer.environment",
    "knowledge_store": "langmem_layer.knowledge",
    "MemoryLayer": "langmem_layer.facade",
    "build_agent_graph": "langmem_layer.facade.agent_graph",
    "MemoryState": "langmem_layer.facade.wiring",
    "memory_prompt": "langmem_layer.facade.nodes",
    "wire": "langmem_layer.facade.wiring",
    "MemoryAgentState": "langmem_layer.facade.prebuilt",
    "MemoryMiddleware": "langmem_layer.facade.prebuilt",
    "create_memory_tools": "langmem_layer.facade.tools",
    "ContextBlock": "langmem_layer.read.block",
    "MemorySettings": "langmem_layer.settings",
    "AsyncPostgresMemoryStore": "langmem_layer.store.aio",
    "PostgresMemoryStore": "langmem_layer.store.sync",
    "apostgres_checkpointer": "langmem_layer.working.sessions",
    "postgres_checkpointer": "langmem_layer.working.sessions",
}


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'langmem_layer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AccessDeniedError",
    "AsyncPostgresMemoryStore",
    "ConcurrencyError",
    "ConfigurationError",
    "ContextBlock",
    "DatabaseNotFoundError",
    "DatabaseUnavailableError",
    "EmbeddingDimensionError",
    "EmbeddingError",
    "ExtractionError",
    "InvalidContentError",
    "InvalidFilterError",
    "InvalidInputError",
    "InvalidMemoryError",
    "InvalidNamespaceError",
    "Kind",
    "LangmemError",
    "Layer",
    "MemoryAgentState",
    "MemoryLayer",
    "MemoryMiddleware",
    "MemoryNotFoundError",
    "MemoryRecord",
    "MemorySettings",
    "MemoryState",
    "MissingUserError",
    "NotProceduralError",
    "OperationAppliedError",
    "Policy",
    "PoolTimeoutError",
    "PostgresMemoryStore",
    "Recalled",
    "SchemaNotReadyError",
    "Status",
    "SyncCallOnEventLoopError",
    "aopen_store",
    "apostgres_checkpointer",
    "build_agent_graph",
    "create_memory_tools",
    "knowledge_store",
    "memory_prompt",
    "open_store",
    "postgres_checkpointer",
    "wire",
]

__version__ = "0.1.0"
