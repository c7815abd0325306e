"""Request and response models of the memory REST API (pydantic; they make the OpenAPI
document)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from langmem_layer.jobs.status import JobStatus
from langmem_layer.store.ops import IngestLogEntry
from langmem_layer.types import (
    HistoryEntry,
    Kind,
    Layer,
    LoopStatus,
    Policy,
    Recalled,
    Source,
    Status,
)

__all__ = [
    "Admission",
    "CorrectRequest",
    "Decision",
    "DeleteResult",
    "ExportDocument",
    "ImportResult",
    "JobState",
    "Me",
    "Memory",
    "MemoryPage",
    "NewMemory",
    "Problem",
    "Provenance",
    "SurfaceRequest",
]

class Problem(BaseModel):
    """An RFC 9457 problem document: every error response."""

    type: str = Field(description="A URI naming the problem type; about:blank for plain "
                      "HTTP errors, urn:langmem-layer:error:<Name> for the library's.")
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = Field(
        None, description="Request-validation errors: where and what.")


class Me(BaseModel):
    """Who the request acts as."""

    user_id: str
    admin: bool


class Memory(BaseModel):
    """One memory as the API shows it (its history: ``GET .../history``)."""

    id: str
    profile: str = Field(description="The scope: a profile, or 'identity' (global).")
    content: str
    kind: Kind
    layer: Layer
    status: Status
    policy: Policy
    pinned: bool
    confidence: float
    salience: float
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    refs: list[str] = Field(default_factory=list)
    due_at: datetime | None = None
    loop_status: LoopStatus | None = None
    occurred_at: datetime
    last_accessed_at: datetime
    expires_at: datetime | None = None
    access_count: int
    reinforcement_count: int
    source: Source
    similarity: float | None = Field(None, description="Score against the query `q`.")

    @classmethod
    def of(cls, found: Recalled) -> Memory:
        """The API view of a recalled memory."""
        r = found.record
        return cls(
            id=found.key, profile=found.namespace[2] if len(found.namespace) > 2 else "",
            content=r.content, kind=r.kind, layer=r.layer, status=r.status, policy=r.policy,
            pinned=r.pinned, confidence=r.confidence, salience=r.salience, subject=r.subject,
            predicate=r.predicate, object=r.object, refs=list(r.refs), due_at=r.due_at,
            loop_status=r.loop_status, occurred_at=r.occurred_at,
            last_accessed_at=r.last_accessed_at, expires_at=r.expires_at,
            access_count=r.access_count, reinforcement_count=r.reinforcement_count,
            source=r.source, similarity=found.similarity)


class MemoryPage(BaseModel):
    """One page of memories."""

    items: list[Memory]
    limit: int
    offset: int
    next_offset: int | None = Field(description="The offset of the next page; null: none.")


#: What the content field says of the rule; the library applies it (one rule for every
#: way in: ``langmem_layer.extract.gate.content_problem``), so it is not repeated here.
_CONTENT = ("The memory's text: at least MemorySettings.gate.min_content_chars (default 3) "
            "and at most max_content_chars (default 4000) characters once stripped, no NUL; "
            "other text is refused with 422.")


class NewMemory(BaseModel):
    """A memory written directly (no extraction, no gate)."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description=_CONTENT)
    kind: Kind = Kind.EPISODIC_EVENT
    layer: Layer | None = Field(None, description="Default: the kind's layer.")
    policy: Policy = Policy.SPEAK
    pinned: bool = False
    profile: str | None = Field(None, min_length=1, max_length=200)
    confidence: float = Field(0.8, ge=0.0, le=1.0)
    salience: float = Field(0.5, ge=0.0, le=1.0)
    due_at: datetime | None = None


class CorrectRequest(BaseModel):
    """The corrected text; it is re-embedded at once and the old text kept in history."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description=_CONTENT)


class SurfaceRequest(BaseModel):
    """Pin / unpin and the surface policy; at least one of them."""

    model_config = ConfigDict(extra="forbid")

    pinned: bool | None = None
    policy: Policy | None = None


class DeleteResult(BaseModel):
    """What a delete did."""

    id: str
    hard: bool = Field(description="true: erased with its vectors, links and cache rows; "
                       "false: archived (kept for audit, never recalled).")


class ExportDocument(BaseModel):
    """Everything stored for a user, as ``langmem-layer export`` writes it."""

    model_config = ConfigDict(extra="allow")

    format: str = Field(description="langmem_layer.export/1")
    user_id: str | None = None
    items: list[dict[str, Any]] = Field(default_factory=list)
    links: list[dict[str, Any]] = Field(default_factory=list)


class ImportResult(BaseModel):
    """How many items an import wrote."""

    imported: int


class Decision(BaseModel):
    """The write gate's decisions on one ingested turn: why things were (not) remembered."""

    id: int
    at: datetime
    thread_id: str | None
    agent_id: str | None
    decisions: list[dict[str, Any]]

    @classmethod
    def of(cls, entry: IngestLogEntry) -> Decision:
        """The API view of a decision-log entry."""
        return cls(id=entry.id, at=entry.at, thread_id=entry.thread_id,
                   agent_id=entry.agent_id, decisions=list(entry.decisions))


class JobState(BaseModel):
    """A maintenance job's latest recorded run and when it is next due."""

    job: str
    schedule: str | None
    period: str | None
    shard: str | None
    started_at: datetime | None
    finished_at: datetime | None
    users: int
    counts: dict[str, int]
    error: str | None
    next_due: datetime | None
    due_now: bool

    @classmethod
    def of(cls, st: JobStatus) -> JobState:
        """The API view of a job's status."""
        return cls(job=st.job, schedule=st.schedule, period=st.period, shard=st.shard,
                   started_at=st.started_at, finished_at=st.finished_at, users=st.users,
                   counts=dict(st.counts), error=st.error, next_due=st.next_due,
                   due_now=st.due_now)


class Admission(BaseModel):
    """One write-gate decision about a memory: what was proposed, and why it was let in
    (or not)."""

    log_id: int = Field(description="The decision-log entry it belongs to.")
    at: datetime
    thread_id: str | None
    op: str | None = Field(description="The operation applied: add, update, reinforce ...")
    proposed: str | None = Field(description="The operation the extractor proposed.")
    content: str | None
    accepted: bool
    reason: str
    confidence: float | None = None


class Provenance(BaseModel):
    """Why a memory exists: where it came from, the decisions that admitted or changed
    it, and its history."""

    memory: Memory
    source: Source
    decisions: list[Admission] = Field(description="Decisions naming this memory (its "
                                       "id, its text, or a text it had), newest first.")
    history: list[HistoryEntry]
