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
``langmem_layer.write.apply``, ``langmem_layer.write.queue``, ``langmem_layer.working``,
``langmem_layer.layer.*`` and ``langmem_layer.server.*``.
"""

from langmem_layer.environment import aopen_store, open_store
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
from langmem_layer.knowledge import knowledge_store
from langmem_layer.layer import MemoryLayer
from langmem_layer.layer.agent_graph import build_agent_graph
from langmem_layer.layer.nodes import MemoryState, memory_prompt, wire
from langmem_layer.layer.prebuilt import MemoryAgentState, MemoryMiddleware
from langmem_layer.layer.tools import create_memory_tools
from langmem_layer.read.block import ContextBlock
from langmem_layer.settings import MemorySettings
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, MemoryRecord, Policy, Recalled, Status
from langmem_layer.working.sessions import apostgres_checkpointer, postgres_checkpointer

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
