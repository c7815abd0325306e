"""Store operations of working memory: thread activity and the per-user message log.

Re-exported by ``langmem_layer.store.ops``, where callers import them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

__all__ = [
    "ClearMessagesOp",
    "CloseThreadOp",
    "IdleThreadsOp",
    "LogMessagesOp",
    "LoggedMessage",
    "PurgeMessagesOp",
    "RecentMessagesOp",
    "ThreadActivity",
    "TouchThreadOp",
    "TurnStartOp",
]


# -- working memory: thread activity and the per-user message log ------------------------


class TouchThreadOp(NamedTuple):
    """Record a thread's activity now; reopens it if the sweeper closed it (result: None)."""

    user_id: str
    thread_id: str
    profile: str
    agent_id: str | None
    now: datetime


class IdleThreadsOp(NamedTuple):
    """Open threads of all users last active before ``before`` (result: ``list[ThreadActivity]``).

    Reads identities only, to know whom the session sweeper serves.
    """

    before: datetime
    limit: int = 10_000


class CloseThreadOp(NamedTuple):
    """Close a thread still idle since before ``idle_before`` (result: bool, closed now)."""

    user_id: str
    thread_id: str
    idle_before: datetime
    now: datetime


class LogMessagesOp(NamedTuple):
    """Add messages to the user's message log, once per message id (result: int added).

    ``messages`` are dicts with ``message_id``, ``role`` and ``text``.
    """

    user_id: str
    thread_id: str
    profile: str
    messages: list[dict[str, Any]]
    at: datetime


class RecentMessagesOp(NamedTuple):
    """The user's latest logged messages in a profile since ``since``, outside one thread
    (result: ``list[LoggedMessage]``, oldest first).

    Messages of a turn that is the source of an ``avoid`` memory are left out.
    """

    user_id: str
    profile: str
    since: datetime
    limit: int
    exclude_thread_id: str = ""


class ClearMessagesOp(NamedTuple):
    """Delete a user's logged messages, of one thread or all (result: int deleted)."""

    user_id: str
    thread_id: str | None = None


class PurgeMessagesOp(NamedTuple):
    """Delete logged messages and closed threads older than ``before``, user by user
    (result: int messages deleted)."""

    before: datetime


@dataclass(frozen=True, slots=True)
class ThreadActivity:
    """A thread as the session sweeper sees it."""

    user_id: str
    thread_id: str
    profile: str
    agent_id: str | None
    last_active_at: datetime


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """One message of the per-user message log."""

    thread_id: str
    message_id: str
    role: str
    text: str
    at: datetime


class TurnStartOp(NamedTuple):
    """A turn's start on its thread in one statement: the thread's activity stamped
    (``stamp``) and the user's recent history read (``recent``; result:
    ``list[LoggedMessage]``, oldest first). Both parts are ``user_id``'s.
    """

    user_id: str
    stamp: TouchThreadOp
    recent: RecentMessagesOp
