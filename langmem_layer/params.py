"""Keyword parameters of :class:`~langmem_layer.MemoryLayer`'s operations.

One ``TypedDict`` per operation, unpacked (``**kw: Unpack[...]``) by both its sync and
its async method, so the twins declare their keyword parameters once and type
checkers still check every call. The defaults live in the layer's flow builders
(``MemoryLayer._remember`` and so on), once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypedDict

from langmem_layer.types import Kind, Layer, Policy
from langmem_layer.working.sessions import PruneStrategy

__all__ = [
    "ClearHistoryArgs",
    "ContextBlockArgs",
    "DecisionsArgs",
    "ForgetArgs",
    "ListArgs",
    "LoadThreadArgs",
    "NowArgs",
    "PendingArgs",
    "RecallArgs",
    "RecentHistoryArgs",
    "RecordTurnArgs",
    "RememberArgs",
    "SweepArgs",
    "TurnArgs",
]


class RememberArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.remember`."""

    profile: str | None
    kind: Kind
    layer: Layer | None
    policy: Policy
    pinned: bool
    confidence: float
    salience: float
    refs: Sequence[str]
    due_at: datetime | None
    thread_id: str | None
    now: datetime | None


class RecallArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.recall`."""

    profile: str | None
    limit: int | None
    refs: Sequence[str]
    now: datetime | None


class TurnArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.ingest` and :meth:`MemoryLayer.submit`."""

    profile: str | None
    thread_id: str | None
    agent_id: str | None
    now: datetime | None


class RecordTurnArgs(TurnArgs, total=False):
    """Keyword parameters of :meth:`MemoryLayer.record_turn`."""

    reinforce: Sequence[str]


class LoadThreadArgs(TurnArgs, total=False):
    """Keyword parameters of :meth:`MemoryLayer.load_thread`."""

    limit: int | None
    reinforce: bool


class ContextBlockArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.context_block`."""

    profile: str | None
    recently_spoken: Sequence[str]
    now: datetime | None


class ListArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.list`."""

    profile: str | None
    statuses: Sequence[str] | None
    limit: int


class NowArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.correct`."""

    now: datetime | None


class ForgetArgs(NowArgs, total=False):
    """Keyword parameters of :meth:`MemoryLayer.forget`."""

    hard: bool


class DecisionsArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.decisions`."""

    thread_id: str | None
    limit: int


class RecentHistoryArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.recent_history`."""

    thread_id: str | None
    profile: str | None
    hours: float | None
    limit: int | None
    now: datetime | None


class ClearHistoryArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.clear_history`."""

    thread_id: str | None


class SweepArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.sweep_sessions`."""

    now: datetime | None
    prune: PruneStrategy | None
    ttl_seconds: float | None
    extract: bool | None


class PendingArgs(TypedDict, total=False):
    """Keyword parameters of :meth:`MemoryLayer.process_pending`."""

    user_id: str | None
