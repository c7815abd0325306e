"""langmem_layer: durable, typed long-term memory for LangGraph agents.

Add three nodes to a graph (``load_memory``, ``assemble_context``,
``extract_after_turn``), compile it with a :class:`PostgresMemoryStore`, and the agent
remembers each user across threads, agents and months.
"""

from langmem_layer.calibration import CalibrationProfile, apply_profile, profile_for
from langmem_layer.compat_langmem import LangmemImport
from langmem_layer.errors import (
    AccessDeniedError,
    ConcurrencyError,
    ConfigurationError,
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
    PoolTimeoutError,
    SchemaNotReadyError,
    SyncCallOnEventLoopError,
)
from langmem_layer.extract.base import Extractor, MemoryOperation, OpType
from langmem_layer.extract.gate import GateDecision, WriteGate
from langmem_layer.extract.llm import LLMExtractor
from langmem_layer.extract.rules import Rule, RuleExtractor
from langmem_layer.jobs import JOBS, Job, JobContext, JobOption, JobResult, JobRun, JobStatus, Shard
from langmem_layer.knowledge import MemoryRetriever, knowledge_store
from langmem_layer.layer import MemoryLayer
from langmem_layer.layer.agent_graph import AgentConfig, build_agent_graph
from langmem_layer.layer.nodes import MemoryState, memory_prompt, memory_system_message, wire
from langmem_layer.layer.prebuilt import (
    MemoryAgentState,
    MemoryMiddleware,
    MemoryMiddlewareState,
    ReactHooks,
)
from langmem_layer.layer.tools import create_memory_tools
from langmem_layer.read.block import ContextBlock
from langmem_layer.server.keys import Principal
from langmem_layer.server.mcp import create_mcp_server
from langmem_layer.settings import GateSettings, MemorySettings, RankingWeights
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.core import MemoryIndexConfig
from langmem_layer.store.ops import FallbackTurn, IngestLogEntry, LoggedMessage, UserDeletion
from langmem_layer.store.ops.trust import LearnedTrust
from langmem_layer.store.options import AnnIndexConfig, PoolConfig
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.synth import (
    Evidence,
    ModelSynthesizer,
    OfflineSynthesizer,
    SynthesisOutcome,
    SynthesisTask,
    Synthesizer,
)
from langmem_layer.types import (
    HistoryEntry,
    Kind,
    Layer,
    LinkType,
    LoopStatus,
    MemoryConfig,
    MemoryRecord,
    Policy,
    Recalled,
    Source,
    Status,
)
from langmem_layer.working.sessions import (
    PruneStrategy,
    SessionSweep,
    apostgres_checkpointer,
    postgres_checkpointer,
)
from langmem_layer.working.trim import TrimPlan, WorkingLoad, plan_trim
from langmem_layer.write.apply import IngestResult, ProcessResult

__all__ = [
    "JOBS",
    "AccessDeniedError",
    "AgentConfig",
    "AnnIndexConfig",
    "AsyncPostgresMemoryStore",
    "CalibrationProfile",
    "ConcurrencyError",
    "ConfigurationError",
    "ContextBlock",
    "DatabaseUnavailableError",
    "EmbeddingDimensionError",
    "EmbeddingError",
    "Evidence",
    "ExtractionError",
    "Extractor",
    "FallbackTurn",
    "GateDecision",
    "GateSettings",
    "HistoryEntry",
    "IngestLogEntry",
    "IngestResult",
    "InvalidContentError",
    "InvalidFilterError",
    "InvalidInputError",
    "InvalidMemoryError",
    "InvalidNamespaceError",
    "Job",
    "JobContext",
    "JobOption",
    "JobResult",
    "JobRun",
    "JobStatus",
    "Kind",
    "LLMExtractor",
    "LangmemError",
    "LangmemImport",
    "Layer",
    "LearnedTrust",
    "LinkType",
    "LoggedMessage",
    "LoopStatus",
    "MemoryAgentState",
    "MemoryConfig",
    "MemoryIndexConfig",
    "MemoryLayer",
    "MemoryMiddleware",
    "MemoryMiddlewareState",
    "MemoryNotFoundError",
    "MemoryOperation",
    "MemoryRecord",
    "MemoryRetriever",
    "MemorySettings",
    "MemoryState",
    "MissingUserError",
    "ModelSynthesizer",
    "NotProceduralError",
    "OfflineSynthesizer",
    "OpType",
    "Policy",
    "PoolConfig",
    "PoolTimeoutError",
    "PostgresMemoryStore",
    "Principal",
    "ProcessResult",
    "PruneStrategy",
    "RankingWeights",
    "ReactHooks",
    "Recalled",
    "Rule",
    "RuleExtractor",
    "SchemaNotReadyError",
    "SessionSweep",
    "Shard",
    "Source",
    "Status",
    "SyncCallOnEventLoopError",
    "SynthesisOutcome",
    "SynthesisTask",
    "Synthesizer",
    "TrimPlan",
    "UserDeletion",
    "WorkingLoad",
    "WriteGate",
    "apostgres_checkpointer",
    "apply_profile",
    "build_agent_graph",
    "create_mcp_server",
    "create_memory_tools",
    "knowledge_store",
    "memory_prompt",
    "memory_system_message",
    "plan_trim",
    "postgres_checkpointer",
    "profile_for",
    "wire",
]

__version__ = "0.1.0"
