"""Working memory in one place: thread activity (for the session sweeper) and the
per-user message log; the ops, their SQL and their handlers.

Builders return ``(sql, params)`` and do no I/O. Every statement binds ``user_id``
except ``idle_threads`` and ``users_with_expired_messages``, which read only
identities (user and thread ids) to know whom a job serves, like the queue's
``claimable_users``. The write path's ``RecordTurnOp`` (``store/ops/queue.py``)
logs a turn's messages with ``log_messages`` too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.sql import Sql, citus
from langmem_layer.store.ops.dispatch import Context, operation, own_parts
from langmem_layer.store.plan import Binding, Handler, Query, writing

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
    "clear_messages",
    "close_thread",
    "idle_threads",
    "log_messages",
    "purge_closed_threads",
    "purge_messages",
    "recent_messages",
    "touch_thread",
    "users_with_expired_messages",
]


# -- SQL ----------------------------------------------------------------------------------


def touch_thread(user_id: str, thread_id: str, *, profile: str, agent_id: str | None,
                 now: datetime) -> Sql:
    """Stamp a thread's activity; a closed thread the user came back to opens again."""
    return (
        """INSERT INTO langmem_threads
            (user_id, thread_id, profile, agent_id, created_at, last_active_at)
        VALUES (%(user_id)s, %(thread_id)s, %(profile)s, %(agent_id)s, %(now)s, %(now)s)
        ON CONFLICT (user_id, thread_id) DO UPDATE SET
            last_active_at = GREATEST(langmem_threads.last_active_at, EXCLUDED.last_active_at),
            profile = EXCLUDED.profile,
            agent_id = COALESCE(EXCLUDED.agent_id, langmem_threads.agent_id),
            closed_at = NULL""",
        {"user_id": user_id, "thread_id": thread_id, "profile": profile,
         "agent_id": agent_id, "now": now},
    )


def idle_threads(before: datetime, limit: int) -> Sql:
    """Open threads of any user last active before ``before``, longest idle first."""
    return (
        """SELECT user_id, thread_id, profile, agent_id, last_active_at FROM langmem_threads
        WHERE closed_at IS NULL AND last_active_at < %(before)s
        ORDER BY last_active_at, user_id, thread_id
        LIMIT %(limit)s""",
        {"before": before, "limit": limit},
    )


def close_thread(user_id: str, thread_id: str, *, idle_before: datetime, now: datetime) -> Sql:
    """Close a thread unless it was used again meanwhile; returns a row when closed."""
    return (
        """UPDATE langmem_threads SET closed_at = %(now)s
        WHERE user_id = %(user_id)s AND thread_id = %(thread_id)s
          AND closed_at IS NULL AND last_active_at < %(before)s
        RETURNING thread_id""",
        {"user_id": user_id, "thread_id": thread_id, "before": idle_before, "now": now},
    )


#: The most messages ``log_messages`` inserts as rows of ``VALUES`` (3 parameters each).
VALUES_ROWS = 500


def log_messages(user_id: str, thread_id: str, *, profile: str,
                 messages: Sequence[dict[str, Any]], at: datetime) -> Sql:
    """Append messages to the user's log in order; a message id already there is skipped.

    A row of ``VALUES`` per message: Citus routes a multi-row ``VALUES`` to the user's
    shard, but inserts the rows of a ``SELECT`` that reads no table (``unnest`` of
    arrays) through the coordinator, a copy and a two-phase commit. Beyond
    ``VALUES_ROWS`` messages (an imported history, not a turn) the arrays are sent
    instead, as a statement's parameters are limited in number.
    """
    params: dict[str, Any] = {"user_id": user_id, "thread_id": thread_id,
                              "profile": profile, "at": at}
    if len(messages) > VALUES_ROWS:
        return (
            """INSERT INTO langmem_messages
                (user_id, thread_id, message_id, profile, role, text, at)
            SELECT %(user_id)s, %(thread_id)s, m.message_id, %(profile)s, m.role, m.text,
                   %(at)s
            FROM unnest(%(ids)s::text[], %(roles)s::text[], %(texts)s::text[])
                 WITH ORDINALITY AS m(message_id, role, text, n)
            ORDER BY m.n
            ON CONFLICT (user_id, thread_id, message_id) DO NOTHING
            RETURNING id""",
            {**params, "ids": [m["message_id"] for m in messages],
             "roles": [m["role"] for m in messages], "texts": [m["text"] for m in messages]},
        )
    rows = []
    for n, m in enumerate(messages):
        params.update({f"id{n}": m["message_id"], f"role{n}": m["role"],
                       f"text{n}": m["text"]})
        rows.append(f"(%(user_id)s, %(thread_id)s, %(id{n})s, %(profile)s, %(role{n})s, "
                    f"%(text{n})s, %(at)s)")
    values = ",\n               ".join(rows)
    return (
        f"""INSERT INTO langmem_messages
            (user_id, thread_id, message_id, profile, role, text, at)
        VALUES {values}
        ON CONFLICT (user_id, thread_id, message_id) DO NOTHING
        RETURNING id""",
        params,
    )


def recent_messages(user_id: str, *, profile: str, since: datetime, limit: int,
                    exclude_thread_id: str) -> Sql:
    """The user's newest logged messages in a profile since ``since``, outside a thread.

    A turn (thread and time) holding the source message of any of the user's
    ``avoid`` memories is left out whole: a boundary the user set must not come back
    verbatim as "recent conversation", nor the reply that acknowledged it.
    """
    return (
        """WITH avoided AS (
            SELECT m.thread_id, m.at
            FROM langmem_items i
            JOIN langmem_messages m
              ON m.user_id = i.user_id
             AND m.thread_id = coalesce(i.value -> 'source' ->> 'thread_id', '')
             AND m.message_id = i.value -> 'source' ->> 'message_id'
            WHERE i.user_id = %(user_id)s AND m.user_id = %(user_id)s AND i.is_memory
              AND (i.value ->> 'policy') = 'avoid' AND m.at >= %(since)s)
        SELECT m.thread_id, m.message_id, m.role, m.text, m.at
        FROM langmem_messages m
        WHERE m.user_id = %(user_id)s AND m.profile = %(profile)s AND m.at >= %(since)s
          AND m.thread_id <> %(exclude)s
          AND NOT EXISTS (SELECT 1 FROM avoided a
                          WHERE a.thread_id = m.thread_id AND a.at = m.at)
        ORDER BY m.at DESC, m.id DESC
        LIMIT %(limit)s""",
        {"user_id": user_id, "profile": profile, "since": since, "limit": limit,
         "exclude": exclude_thread_id},
    )


#: The columns of ``recent_messages``'s rows and their types (``citus.on_shard``).
LOGGED_ROW = "thread_id text, message_id text, role text, text text, at timestamptz"


def clear_messages(user_id: str, thread_id: str | None) -> Sql:
    """Delete a user's logged messages (one thread's, or all); returns the count."""
    return (
        """WITH gone AS (
            DELETE FROM langmem_messages
            WHERE user_id = %(user_id)s
              AND (%(thread_id)s::text IS NULL OR thread_id = %(thread_id)s)
            RETURNING 1)
        SELECT count(*) AS deleted FROM gone""",
        {"user_id": user_id, "thread_id": thread_id},
    )


def users_with_expired_messages(before: datetime) -> Sql:
    """Users with logged messages, or closed threads, older than ``before`` (ids only)."""
    return (
        """SELECT user_id FROM langmem_messages WHERE at < %(before)s
        UNION
        SELECT user_id FROM langmem_threads WHERE closed_at < %(before)s""",
        {"before": before},
    )


def purge_messages(user_id: str, before: datetime) -> Sql:
    """Delete a user's logged messages older than ``before``; returns the count."""
    return (
        """WITH gone AS (
            DELETE FROM langmem_messages
            WHERE user_id = %(user_id)s AND at < %(before)s
            RETURNING 1)
        SELECT count(*) AS deleted FROM gone""",
        {"user_id": user_id, "before": before},
    )


def purge_closed_threads(user_id: str, before: datetime) -> Sql:
    """Forget a user's threads closed before ``before``."""
    return (
        """DELETE FROM langmem_threads
        WHERE user_id = %(user_id)s AND closed_at < %(before)s""",
        {"user_id": user_id, "before": before},
    )


# -- handlers -----------------------------------------------------------------------------


def _touch_thread(ctx: Context, op: TouchThreadOp) -> Handler:
    yield Query(*touch_thread(op.user_id, op.thread_id, profile=op.profile,
                              agent_id=op.agent_id, now=op.now), last=True)


def _turn_start(ctx: Context, op: TurnStartOp) -> Handler:
    stamp, recent = op.stamp, op.recent
    own_parts(op, (stamp, recent))
    write = touch_thread(stamp.user_id, stamp.thread_id, profile=stamp.profile,
                         agent_id=stamp.agent_id, now=stamp.now)
    if recent.limit <= 0:
        yield Query(*write, last=True)
        return []
    # The stamp writes the threads table, the history reads the message log and
    # the memories: one statement does both.
    rows = yield writing(recent_messages(
        recent.user_id, profile=recent.profile, since=recent.since, limit=recent.limit,
        exclude_thread_id=recent.exclude_thread_id), write, last=True, columns=LOGGED_ROW)
    return [LoggedMessage(**r) for r in reversed(rows)]


def _idle_threads(ctx: Context, op: IdleThreadsOp) -> Handler:
    rows = yield Query(*idle_threads(op.before, op.limit))
    return [ThreadActivity(**r) for r in rows]


def _close_thread(ctx: Context, op: CloseThreadOp) -> Handler:
    rows = yield Query(*close_thread(op.user_id, op.thread_id,
                                     idle_before=op.idle_before, now=op.now))
    return bool(rows)


def _log_messages(ctx: Context, op: LogMessagesOp) -> Handler:
    if not op.messages:
        return 0
    rows = yield Query(*log_messages(op.user_id, op.thread_id, profile=op.profile,
                                     messages=op.messages, at=op.at), last=True)
    return len(rows)


def _recent_messages(ctx: Context, op: RecentMessagesOp) -> Handler:
    if op.limit <= 0:
        return []
    statement = recent_messages(op.user_id, profile=op.profile, since=op.since,
                                limit=op.limit, exclude_thread_id=op.exclude_thread_id)
    rows = yield Query(*statement, parts=lambda: (
        citus.on_shard(op.user_id, statement, LOGGED_ROW),))
    return [LoggedMessage(**r) for r in reversed(rows)]


def _purge_messages(ctx: Context, op: PurgeMessagesOp) -> Handler:
    users = yield Query(*users_with_expired_messages(op.before))
    total = 0
    for row in users:
        user = Binding(row["user_id"])
        deleted = yield Query(*purge_messages(row["user_id"], op.before), bind=user)
        yield Query(*purge_closed_threads(row["user_id"], op.before), bind=user)
        total += int(deleted[0]["deleted"])
    return total


def _clear_messages(ctx: Context, op: ClearMessagesOp) -> Handler:
    rows = yield Query(*clear_messages(op.user_id, op.thread_id))
    return int(rows[0]["deleted"])


# -- ops ----------------------------------------------------------------------------------


@operation(_touch_thread, free=True, async_commit=True)
class TouchThreadOp(NamedTuple):
    """Record a thread's activity now; reopens it if the sweeper closed it (result: None)."""

    user_id: str
    thread_id: str
    profile: str
    agent_id: str | None
    now: datetime


@operation(_idle_threads, maintenance=True)
class IdleThreadsOp(NamedTuple):
    """Open threads of all users last active before ``before`` (result: ``list[ThreadActivity]``).

    Reads identities only, to know whom the session sweeper serves.
    """

    before: datetime
    limit: int = 10_000


@operation(_close_thread)
class CloseThreadOp(NamedTuple):
    """Close a thread still idle since before ``idle_before`` (result: bool, closed now)."""

    user_id: str
    thread_id: str
    idle_before: datetime
    now: datetime


@operation(_log_messages, free=True)
class LogMessagesOp(NamedTuple):
    """Add messages to the user's message log, once per message id (result: int added).

    ``messages`` are dicts with ``message_id``, ``role`` and ``text``.
    """

    user_id: str
    thread_id: str
    profile: str
    messages: list[dict[str, Any]]
    at: datetime


@operation(_recent_messages, free=True, async_commit=True)
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


@operation(_clear_messages)
class ClearMessagesOp(NamedTuple):
    """Delete a user's logged messages, of one thread or all (result: int deleted)."""

    user_id: str
    thread_id: str | None = None


@operation(_purge_messages, maintenance=True)
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


@operation(_turn_start, free=True, async_commit=True)
class TurnStartOp(NamedTuple):
    """A turn's start on its thread in one statement: the thread's activity stamped
    (``stamp``) and the user's recent history read (``recent``; result:
    ``list[LoggedMessage]``, oldest first). Both parts are ``user_id``'s.
    """

    user_id: str
    stamp: TouchThreadOp
    recent: RecentMessagesOp
