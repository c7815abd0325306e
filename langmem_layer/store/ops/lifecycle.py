"""Store operations of a memory's life: the lifecycle, erasing a user, and
the turns the LLM extractor could not handle.

Re-exported by ``langmem_layer.store.ops``, where callers import them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

__all__ = [
    "DeleteUserOp",
    "FallbackTurn",
    "FallbackTurnsOp",
    "LifecycleOp",
    "MemoryHistoryOp",
    "PurgeExpiredMemoriesOp",
    "RecordFallbackOp",
    "RecordOutcomeOp",
    "ResolveFallbackOp",
    "UserDeletion",
]


# -- the lifecycle; handled by store.lifecycle_handlers --------------------


class LifecycleOp(NamedTuple):
    """Run the lifecycle over one user's memories: decay, then every transition of
    ``langmem_layer.sql.lifecycle.transitions`` (result: ``dict[str, int]``, the
    number of memories per outcome).

    Attributes:
        user_id: The tenant.
        now: The time the lifecycle runs at.
        half_life_days: The user's half-life of summaries and reflections.
        flag_below: Decay below this counts as ``flagged``.
        thresholds: Keyword arguments of ``transitions``.
        dry_run: Count what would change, change nothing.
    """

    user_id: str
    now: datetime
    half_life_days: float
    flag_below: float
    thresholds: dict[str, Any]
    dry_run: bool = False


class PurgeExpiredMemoriesOp(NamedTuple):
    """Delete one user's memories whose expiry has passed, with their embeddings, links
    and cached embeddings, atomically (result: ``dict[str, int]``)."""

    user_id: str
    now: datetime
    dry_run: bool = False


class MemoryHistoryOp(NamedTuple):
    """One memory's lifecycle history, oldest first (result: ``list[HistoryEntry]``, or
    None when the user has no such memory)."""

    user_id: str
    key: str


class RecordOutcomeOp(NamedTuple):
    """Count one outcome of following a procedural habit (result: ``(successes,
    failures)`` after counting, or None when the user has no such procedural memory)."""

    user_id: str
    key: str
    success: bool
    now: datetime | None = None



# -- erasing a user, and turns the LLM extractor could not handle -------------------------


class DeleteUserOp(NamedTuple):
    """Delete every row the user has, in every per-user table, in one transaction
    (result: ``UserDeletion``). ``keep_keys`` keeps the user's API keys: a reset
    of their memory that leaves their access as it was."""

    user_id: str
    keep_keys: bool = False


@dataclass(frozen=True, slots=True)
class UserDeletion:
    """What ``DeleteUserOp`` deleted: rows per table (tables with none included)."""

    user_id: str
    counts: dict[str, int]
    dropped_indexes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Rows deleted in all tables."""
        return sum(self.counts.values())


class RecordFallbackOp(NamedTuple):
    """Keep a turn the rule extractor took over from the model, for ``reextract``
    (result: None). Recording the same turn again counts an attempt."""

    user_id: str
    turn_key: str
    profile: str
    messages: list[dict[str, Any]]
    turn_at: datetime
    extractor: str
    thread_id: str | None = None
    agent_id: str | None = None
    now: datetime | None = None


class FallbackTurnsOp(NamedTuple):
    """Turns waiting for re-extraction, of one user or all, oldest first
    (result: ``list[FallbackTurn]``)."""

    user_id: str | None = None
    limit: int = 100


class ResolveFallbackOp(NamedTuple):
    """Forget a fallback record once its turn was re-extracted (result: bool).

    Only when ``attempts`` still matches: a re-run that fell back again counted one
    more attempt, and its record stays.
    """

    user_id: str
    turn_key: str
    attempts: int


@dataclass(frozen=True, slots=True)
class FallbackTurn:
    """A turn extracted by the fallback rules instead of the model."""

    user_id: str
    turn_key: str
    profile: str
    thread_id: str | None
    agent_id: str | None
    messages: list[dict[str, Any]]
    turn_at: datetime
    extractor: str
    attempts: int
    recorded_at: datetime
