"""SQL for working memory: thread activity (for the session sweeper) and the message log.

Builders return ``(sql, params)`` and do no I/O. Every statement binds ``user_id``
except ``idle_threads`` and ``users_with_expired_messages``, which read only
identities (user and thread ids) to know whom a job serves, like the queue's
``claimable_users``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langmem_layer.sql import Sql

__all__ = [
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


def log_messages(user_id: str, thread_id: str, *, profile: str,
                 messages: Sequence[dict[str, Any]], at: datetime) -> Sql:
    """Append messages to the user's log in order; a message id already there is skipped."""
    return (
        """INSERT INTO langmem_messages
            (user_id, thread_id, message_id, profile, role, text, at)
        SELECT %(user_id)s, %(thread_id)s, m.message_id, %(profile)s, m.role, m.text, %(at)s
        FROM unnest(%(ids)s::text[], %(roles)s::text[], %(texts)s::text[])
             WITH ORDINALITY AS m(message_id, role, text, n)
        ORDER BY m.n
        ON CONFLICT (user_id, thread_id, message_id) DO NOTHING
        RETURNING id""",
        {
            "user_id": user_id,
            "thread_id": thread_id,
            "profile": profile,
            "ids": [m["message_id"] for m in messages],
            "roles": [m["role"] for m in messages],
            "texts": [m["text"] for m in messages],
            "at": at,
        },
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
