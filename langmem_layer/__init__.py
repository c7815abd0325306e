"""langmem_layer: durable, typed long-term memory for LangGraph agents.

Add three nodes to a graph (``load_memory``, ``assemble_context``,
``extract_after_turn``), compile it with a :class:`PostgresMemoryStore`, and the agent
remembers each user across threads, agents and months.
"""

from langmem_layer.errors import (
    DatabaseUnavailableError,
    InvalidContentError,
    InvalidMemoryError,
    InvalidNamespaceError,
    LangmemError,
    MemoryNotFoundError,
    MissingUserError,
)
from langmem_layer.layer import MemoryLayer
from langmem_layer.nodes import MemoryState, memory_prompt, memory_system_message, wire
from langmem_layer.read.block import ContextBlock
from langmem_layer.settings import GateSettings, MemorySettings, RankingWeights
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.ops import LoggedMessage
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, LinkType, MemoryRecord, Policy, Recalled, Status
from langmem_layer.working.sessions import (
    SessionSweep,
    apostgres_checkpointer,
    postgres_checkpointer,
)
from langmem_layer.working.trim import TrimPlan, WorkingLoad, plan_trim
from langmem_layer.write.apply import IngestResult, ProcessResult
from langmem_layer.write.extractor import Extractor, MemoryOperation, OpType
from langmem_layer.write.gate import GateDecision, WriteGate
from langmem_layer.write.llm import LLMExtractor
from langmem_layer.write.rules import RuleExtractor

__all__ = [
    "AsyncPostgresMemoryStore",
    "ContextBlock",
    "DatabaseUnavailableError",
    "Extractor",
    "GateDecision",
    "GateSettings",
    "IngestResult",
    "InvalidContentError",
    "InvalidMemoryError",
    "InvalidNamespaceError",
    "Kind",
    "LLMExtractor",
    "LangmemError",
    "Layer",
    "LinkType",
    "LoggedMessage",
    "MemoryLayer",
    "MemoryNotFoundError",
    "MemoryOperation",
    "MemoryRecord",
    "MemorySettings",
    "MemoryState",
    "MissingUserError",
    "OpType",
    "Policy",
    "PostgresMemoryStore",
    "ProcessResult",
    "RankingWeights",
    "Recalled",
    "RuleExtractor",
    "SessionSweep",
    "Status",
    "TrimPlan",
    "WorkingLoad",
    "WriteGate",
    "apostgres_checkpointer",
    "memory_prompt",
    "memory_system_message",
    "plan_trim",
    "postgres_checkpointer",
    "wire",
]

__version__ = "0.1.0"
