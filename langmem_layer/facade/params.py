"""Keyword parameters of ``MemoryLayer``'s operations.

One ``TypedDict`` per operation, unpacked (``**kw: Unpack[...]``) by both its sync and
its async method, so the twins declare their keyword parameters once and type
checkers still check every call. The defaults live in the layer's flow builders
(``MemoryLayer._remember`` and so on), once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NotRequired, TypedDict

from langchain_core.messages import BaseMessage

from langmem_layer.types import Kind, Layer, Policy
from langmem_layer.working.sessions import PruneStrategy

__all__ = [
    "BrowseArgs",
    "ClearHistoryArgs",
    "ContextBlockArgs",
    "DecisionsArgs",
    "ForgetArgs",
    "LangmemImportArgs",
    "ListArgs",
    "LoadThreadArgs",
    "NowArgs",
    "OutcomeArgs",
    "PendingArgs",
    "RecallArgs",
    "RecentHistoryArgs",
    "RecordTurnArgs",
    "RememberArgs",
    "SurfaceArgs",
    "SweepArgs",
    "TurnArgs",
]


class RememberArgs(TypedDict, total=False):
    """Keyword parameters of ``MemoryLayer.remember``.

    Attributes:
        profile: Where a non-identity memory goes (default ``settings.default_profile``).
        kind: Default ``Kind.EPISODIC_EVENT``: raw text is kept as what was said (it does
            not decay); pass ``Kind.PROFILE_FACT`` or ``Kind.PREFERENCE`` for a fact.
        layer: Default: the kind's layer.
        policy: Default ``Policy.SPEAK``.
        pinned: Always recalled first (default False).
        confidence: Default 0.8.
        salience: Default 0.5.
        refs: Identifiers the memory mentions (default none); one string is one
            reference (``refs="acme"`` is ``["acme"]``).
        due_at: When a task or reminder is due.
        subject: Whom the memory is about, or who said it (a name; default none): a
            question naming a subject favours its memories (``subject_focus``).
        thread_id: The thread the memory belongs to (recorded, linked, and given a
            context vector).
        now: Default: the layer's clock.
    """

    profile: str | None
    kind: Kind
    layer: Layer | None
    policy: Policy
    pinned: bool
    confidence: float
    salience: float
    refs: Sequence[str]
    due_at: datetime | None
    subject: str | None
    thread_id: str | None
    now: datetime | None


class RecallArgs(TypedDict, total=False):
    """Keyword parameters of ``MemoryLayer.recall``.

    Attributes:
        profile: The profile searched besides identity (default ``default_profile``).
        limit: At least 1; ``None``: ``settings.recall_limit``.
        refs: References to look up exactly, besides those the query names (one
            string is one reference).
        matching: A search: only the memories that match ``query`` (a word, a
            reference or a period it names, or a similarity of at least
            ``settings.search_similarity_floor``), so a query about nothing the user
            said returns nothing. Default False: the retrieval the memory block is
            filled from, which also returns weaker similarities, pinned memories, due
            open loops and standing preferences whatever the query.
        now: Default: the layer's clock.
    """

    profile: str | None
    limit: int | None
    refs: Sequence[str]
    matching: bool
    now: datetime | None


class TurnArgs(TypedDict, total=False):
    """Keyword parameters of ``MemoryLayer.ingest`` and ``memory.admin.submit``.

    Attributes:
        profile: The run's profile (default ``default_profile``).
        thread_id: The turn's thread.
        agent_id: The agent that took part (recorded as the memories' source).
        now: The turn's time; default: the layer's clock.
    """

    profile: str | None
    thread_id: str | None
    agent_id: str | None
    now: datetime | None


class RecordTurnArgs(TurnArgs, total=False):
    """Keyword parameters of ``memory.threads.record_turn``: ``TurnArgs``, plus:

    Attributes:
        reinforce: Keys of the memories recalled for the turn (default none).
    """

    reinforce: Sequence[str]


class LoadThreadArgs(TurnArgs, total=False):
    """Keyword parameters of ``memory.threads.load_thread``: ``TurnArgs``, plus:

    Attributes:
        limit: Memories recalled for the block; default ``settings.block_memory_limit``
            (the block's token target decides how many it shows).
        reinforce: Reinforce the recalled memories now (default True).
    """

    limit: int | None
    reinforce: bool


class ContextBlockArgs(TypedDict, total=False):
    """Keyword parameters of ``MemoryLayer.context_block``.

    Attributes:
        profile: As for ``RecallArgs``.
        thread_id: The active thread: its messages are not repeated as recent history.
        messages: The active thread's messages (its short-term window).
        recently_spoken: Keys surfaced as ``speak`` in the last two turns (demoted to
            ``USE SILENTLY``).
        now: Default: the layer's clock.
    """

    profile: str | None
    thread_id: str | None
    messages: Sequence[BaseMessage]
    recently_spoken: Sequence[str]
    now: datetime | None


class ListArgs(TypedDict, total=False):
    """Keyword parameters of ``MemoryLayer.list``.

    Attributes:
        profile: As for ``RecallArgs``.
        statuses: Default ``("active",)``; ``None``: every status; one string is one
            status (``statuses="archived"``).
        limit: At least 1; default 100.
    """

    profile: str | None
    statuses: Sequence[str] | None
    limit: int


class NowArgs(TypedDict, total=False):
    """Keyword parameters of ``MemoryLayer.correct``.

    Attributes:
        now: Default: the layer's clock.
    """

    now: datetime | None


class ForgetArgs(NowArgs, total=False):
    """Keyword parameters of ``MemoryLayer.forget``: ``NowArgs``, plus:

    Attributes:
        hard: Delete instead of archiving (default False).
    """

    hard: bool


class OutcomeArgs(TypedDict):
    """Keyword parameters of ``memory.trust.record_outcome``.

    Attributes:
        success: Required: whether following the habit worked this time.
        now: Default: the layer's clock.
    """

    success: bool
    now: NotRequired[datetime | None]


class DecisionsArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.admin.decisions``.

    Attributes:
        thread_id: One thread's decisions only.
        limit: Default 20.
    """

    thread_id: str | None
    limit: int


class RecentHistoryArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.threads.recent_history``.

    Attributes:
        thread_id: The thread left out (the current one).
        profile: As for ``RecallArgs``.
        hours: Default ``settings.recent_history_hours``.
        limit: Default ``settings.recent_history_limit``.
        now: Default: the layer's clock.
    """

    thread_id: str | None
    profile: str | None
    hours: float | None
    limit: int | None
    now: datetime | None


class ClearHistoryArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.threads.clear_history``.

    Attributes:
        thread_id: That thread's messages only (default: all).
    """

    thread_id: str | None


class SweepArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.threads.sweep_sessions``.

    Attributes:
        now: The time to sweep at (tests move it); default: the layer's clock.
        prune: Override ``settings.session_prune``.
        ttl_seconds: Override ``settings.session_ttl_seconds``.
        extract: Extract the turns queued now: ``None`` follows the layer's
            ``extraction`` mode (inline: now; background: wake the worker); ``True``:
            now; ``False`` leaves them to a worker process.
    """

    now: datetime | None
    prune: PruneStrategy | None
    ttl_seconds: float | None
    extract: bool | None


class PendingArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.admin.process_pending``.

    Attributes:
        user_id: One user's entries only (default: all users').
    """

    user_id: str | None


class LangmemImportArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.agents.import_langmem``.

    Attributes:
        namespace: LangMem's namespace prefix (default ``("memories", user_id)``, its
            tools' default); it must name the user second.
        profile: Where the memories go (default ``settings.default_profile``).
        kind: Their kind (default ``Kind.PROFILE_FACT``; LangMem does not type them).
        now: Default: the layer's clock.
    """

    namespace: Sequence[str] | None
    profile: str | None
    kind: Kind
    now: datetime | None


class BrowseArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.admin.browse``.

    Attributes:
        query: Only the memories that match this text, best first: a word in common,
            or a similarity that reaches the relevance floor recall uses
            (``similarity_floor``, ``episodic_similarity_floor``). Default: every
            memory, newest change first.
        profile: Only this scope (a profile, or ``"identity"``); default: every scope.
        layers: Only these layers (one string is one layer); default: every layer.
        kinds: Only these kinds; default: every kind.
        statuses: Only these statuses; default: every status.
        limit: Page size, at least 1; default 50.
        offset: Memories to skip, at least 0; default 0.
    """

    query: str | None
    profile: str | None
    layers: Sequence[Layer | str] | Layer | str | None
    kinds: Sequence[Kind | str] | Kind | str | None
    statuses: Sequence[str] | str | None
    limit: int
    offset: int


class SurfaceArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.admin.set_surface`` (at least one of the first two).

    Attributes:
        pinned: Pin (always recalled first) or unpin; default: unchanged.
        policy: How the memory may surface in replies; default: unchanged.
        now: Default: the layer's clock (the time in the memory's history).
    """

    pinned: bool | None
    policy: Policy | str | None
    now: datetime | None


class FeedbackArgs(TypedDict, total=False):
    """Keyword parameters of ``memory.trust.feedback`` (one of the first two).

    Attributes:
        memory_id: The memory the feedback is about: it counts for or against the agent
            that wrote it, for the memory's kind.
        agent_id: The agent the feedback is about, when no memory is named.
        kind: With ``agent_id``: the kind of write it is about (default: all kinds).
        now: Default: the layer's clock.
    """

    memory_id: str | None
    agent_id: str | None
    kind: str | None
    now: datetime | None
