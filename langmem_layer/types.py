"""The memory model: kinds, layers, policies, the stored record and retrieval results.

A typed memory is a store item in the namespace ``("memories", user_id, scope)``,
where ``scope`` is a profile name (``"work"``, ``"personal"``, ``"project:x"``) or
``"identity"`` for memories global to the user. Its value is a ``MemoryRecord``
serialised to JSON; the store validates it on write, so every typed memory in the
database matches this schema.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

__all__ = [
    "IDENTITY_SCOPE",
    "MEMORY_ROOT",
    "HistoryEntry",
    "Kind",
    "Layer",
    "LinkType",
    "LoopStatus",
    "MemoryConfig",
    "MemoryRecord",
    "Policy",
    "Recalled",
    "Source",
    "Status",
    "content_hash",
    "memory_namespace",
    "normalize_ref",
    "to_utc",
    "utc_iso",
]

#: First label of every typed-memory namespace.
MEMORY_ROOT = "memories"
#: Scope (third namespace label) of memories that are global across a user's profiles.
IDENTITY_SCOPE = "identity"


class Layer(StrEnum):
    """Where a memory lives in the model. Working memory is the checkpointer's."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    IDENTITY = "identity"


class Kind(StrEnum):
    """Finer typing inside the layers."""

    PROFILE_FACT = "profile_fact"
    PREFERENCE = "preference"
    EPISODIC_EVENT = "episodic_event"
    OPEN_LOOP = "open_loop"
    SHARED_LORE = "shared_lore"
    PROTOCOL = "protocol"
    REFLECTION = "reflection"
    TEMPORAL_SUMMARY = "temporal_summary"


class Policy(StrEnum):
    """How a recalled memory may surface in the reply. Pinned is a flag, not a policy."""

    SPEAK = "speak"
    ADAPT = "adapt"
    AVOID = "avoid"
    CONTINUE = "continue"
    FACTCHECK = "factcheck"


class Status(StrEnum):
    """Lifecycle status. Only ``active`` memories are retrieved."""

    ACTIVE = "active"
    STALE = "stale"
    ARCHIVED = "archived"
    CONTRADICTED = "contradicted"


class LoopStatus(StrEnum):
    """Status of an open loop (plan, promise, question)."""

    OPEN = "open"
    TENTATIVELY_RESOLVED = "tentatively_resolved"
    DEFERRED = "deferred"
    CLOSED = "closed"


class LinkType(StrEnum):
    """Typed links between memories."""

    CONTRADICTS = "contradicts"
    SUPERSEDES = "supersedes"
    ELABORATES = "elaborates"
    CAUSED_BY = "caused_by"
    DERIVED_FROM = "derived_from"


def to_utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime; naive values are taken as UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def utc_iso(value: datetime) -> str:
    """Format a datetime in the one fixed-width UTC form stored in records.

    The fixed width makes stored timestamps compare correctly as text in SQL.
    """
    # isoformat, not strftime: the same text, at a fraction of the cost.
    return to_utc(value).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


_REF_SPACE = re.compile(r"\s+")


def normalize_ref(ref: str) -> str:
    """Normalise a reference (entity, passage, topic) for exact-match lookup."""
    return _REF_SPACE.sub(" ", ref.strip().lower())


def content_hash(text: str) -> str:
    """Stable hash of memory content after whitespace and case folding."""
    folded = _REF_SPACE.sub(" ", text.strip().lower())
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()[:32]


def memory_namespace(user_id: str, scope: str) -> tuple[str, str, str]:
    """The namespace holding ``user_id``'s memories for ``scope`` (a profile or identity)."""
    return (MEMORY_ROOT, user_id, scope)


class Source(BaseModel):
    """Where a memory came from: the authoring agent, thread and message."""

    model_config = ConfigDict(extra="forbid")

    agent_id: str | None = None
    thread_id: str | None = None
    message_id: str | None = None
    text: str | None = None


class HistoryEntry(BaseModel):
    """One change in a memory's life, kept in ``MemoryRecord.history``.

    Attributes:
        at: When it happened.
        event: What changed: ``"status"``, ``"loop_status"``, ``"flag"`` (a metadata
            flag such as ``needs_revalidation`` set or cleared) or ``"content"`` (a
            correction: ``old`` and ``new`` are the texts).
        old: The value before (a status, or ``None`` for a flag being set).
        new: The value after.
        reason: Why, in words ("no reference for 3 days", "reactivated: matched again").
    """

    model_config = ConfigDict(extra="forbid")

    at: datetime
    event: str
    old: str | None = None
    new: str | None = None
    reason: str = ""

    @field_validator("at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return to_utc(value)

    @field_serializer("at")
    def _ser_at(self, value: datetime) -> str:
        return utc_iso(value)


class MemoryRecord(BaseModel):
    """The stored schema of one typed memory.

    Timestamps are serialised as fixed-width UTC strings (see ``utc_iso``).
    Unknown keys are rejected so a typo never silently becomes metadata; free-form
    data belongs in ``metadata``.
    """

    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    content: str = Field(min_length=1)
    kind: Kind
    layer: Layer
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    salience: float = Field(default=0.5, ge=0.0, le=1.0)
    policy: Policy = Policy.SPEAK
    status: Status = Status.ACTIVE
    pinned: bool = False
    refs: list[str] = Field(default_factory=list)
    due_at: datetime | None = None
    loop_status: LoopStatus | None = None
    occurred_at: datetime
    last_accessed_at: datetime
    access_count: int = Field(default=0, ge=0)
    reinforcement_count: int = Field(default=0, ge=0)
    expires_at: datetime | None = None
    source: Source = Field(default_factory=Source)
    content_hash: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    success_count: int = Field(
        default=0, ge=0, description="Procedural habits: times following it worked.")
    failure_count: int = Field(
        default=0, ge=0, description="Procedural habits: times following it failed.")
    history: list[HistoryEntry] = Field(
        default_factory=list, description="Lifecycle changes, oldest first.")

    @field_validator("content")
    @classmethod
    def _strip_content(cls, value: str) -> str:
        stripped = value.strip()
        if not stripped:
            raise ValueError("content must not be blank")
        return stripped

    @field_validator("refs")
    @classmethod
    def _normalize_refs(cls, value: list[str]) -> list[str]:
        seen: dict[str, None] = {}
        for ref in value:
            norm = normalize_ref(ref)
            if norm:
                seen.setdefault(norm, None)
        return list(seen)

    @field_validator("due_at", "occurred_at", "last_accessed_at", "expires_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else to_utc(value)

    @field_serializer("due_at", "occurred_at", "last_accessed_at", "expires_at")
    def _ser_dt(self, value: datetime | None) -> str | None:
        return None if value is None else utc_iso(value)

    def model_post_init(self, __context: Any) -> None:
        if not self.content_hash:
            self.content_hash = content_hash(self.content)

    def to_value(self) -> dict[str, Any]:
        """The JSON-compatible dict stored as the item's value."""
        return self.model_dump(mode="json")


@dataclass(frozen=True, slots=True)
class Recalled:
    """One memory returned by retrieval, with how it was found and scored.

    Attributes:
        key: The memory id (the store item's key).
        namespace: The item's namespace, ``("memories", user_id, scope)``.
        record: The memory itself.
        score: Final ranking score (higher is better).
        similarity: Cosine similarity to the query, when it was found by vector search.
        sources: Ranks by strategy, e.g. ``{"vector": 0, "keyword": 3}`` (0-based).
        section: Where the context block placed it, once assembled.
        decayed: Its decay score fell below ``decay_flag_below``: it is
            deprioritised, not hidden, and a lifecycle job may review it.
        relevance: Its fused retrieval score over the best candidate's, in [0, 1]
            (``None`` for a pinned memory, which bypasses ranking).
    """

    key: str
    namespace: tuple[str, ...]
    record: MemoryRecord
    score: float = 0.0
    similarity: float | None = None
    sources: dict[str, int] = field(default_factory=dict)
    section: str | None = None
    decayed: bool = False
    relevance: float | None = None

    @property
    def content(self) -> str:
        """The memory's text (``record.content``)."""
        return self.record.content

    @property
    def kind(self) -> Kind:
        """What it is (``record.kind``)."""
        return self.record.kind

    @property
    def status(self) -> Status:
        """Whether it is current (``record.status``)."""
        return self.record.status

    @property
    def profile(self) -> str:
        """The profile it belongs to, or ``"identity"`` (the user's global memories)."""
        return self.namespace[2]

    @property
    def scope(self) -> str:
        """The profile name, or ``"identity"`` (the same as ``profile``)."""
        return self.namespace[2]


class MemoryConfig(TypedDict, total=False):
    """Per-run identity read from ``config["configurable"]``.

    Only ``user_id`` is required; the rest default (profile ``"work"``).
    """

    user_id: str
    profile: str
    agent_id: str
    thread_id: str
