"""SQL for the durable extraction queue, the applied-operations log and the ingest log.

Builders return ``(sql, params)`` and do no I/O. Every statement binds ``user_id``
except ``claimable_users``, which reads only user ids to know whom to serve.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langmem_layer.sql import Sql, merge

__all__ = [
    "APPLIED_KEY",
    "backlog",
    "claim",
    "claimable_users",
    "complete",
    "enqueue",
    "fail",
    "ingest_log",
    "mark_applied",
    "park",
    "parked",
    "pending",
    "renew",
    "write_ingest_log",
]


#: The constraint a strict ``mark_applied`` of an operation applied before violates.
APPLIED_KEY = "langmem_applied_ops_pkey"

_CLAIMABLE = """q.done_at IS NULL AND q.parked_at IS NULL AND q.next_attempt_at <= %(now)s
          AND (q.locked_until IS NULL OR q.locked_until <= %(now)s)"""
#: A leased entry as the worker gets it (a QueueEntry), of the row ``u``.
_ENTRY = "u.user_id, u.id, u.profile, u.thread_id, u.agent_id, u.messages, u.turn_at, u.attempts"


def enqueue(
    user_id: str,
    dedupe_key: str,
    *,
    profile: str,
    thread_id: str | None,
    agent_id: str | None,
    messages_json: str,
    turn_at: datetime,
    now: datetime,
    lease_until: datetime | None = None,
) -> Sql:
    """Queue a turn once: a repeated dedupe key is a no-op (returns no row).

    With ``lease_until`` the entry is leased as it is queued, as ``claim`` would
    lease it (its first attempt), and the row returned is the claim's, plus ``others``:
    whether the user had other entries ready to claim when it was queued (the
    statement's snapshot does not hold the new row).
    """
    params = {"user_id": user_id, "key": dedupe_key, "profile": profile,
              "thread_id": thread_id, "agent_id": agent_id, "messages": messages_json,
              "turn_at": turn_at, "now": now}
    leased_cols = leased_values = ""
    if lease_until is not None:
        leased_cols, leased_values = ", locked_until, attempts", ", %(lease)s, 1"
        params["lease"] = lease_until
    insert = f"""INSERT INTO langmem_extraction_queue AS u
            (user_id, dedupe_key, profile, thread_id, agent_id, messages, turn_at,
             enqueued_at, next_attempt_at{leased_cols})
        VALUES (%(user_id)s, %(key)s, %(profile)s, %(thread_id)s, %(agent_id)s,
                %(messages)s::jsonb, %(turn_at)s, %(now)s, %(now)s{leased_values})
        ON CONFLICT (user_id, dedupe_key) DO NOTHING"""
    if lease_until is None:
        return f"{insert}\n        RETURNING u.id", params
    # ``others`` outside the INSERT (Citus refuses a subquery in an INSERT's RETURNING),
    # and not counting the new row: Citus runs the INSERT of a CTE as a step of its own,
    # whose row the rest of the statement then sees.
    return (
        f"""WITH queued AS ({insert}
        RETURNING {_ENTRY})
        SELECT u.*, EXISTS (SELECT 1 FROM langmem_extraction_queue q
                            WHERE q.user_id = %(user_id)s AND {_CLAIMABLE}
                              AND q.id <> u.id) AS others
        FROM queued u""",
        params,
    )


def claimable_users(now: datetime, limit: int) -> Sql:
    """Users with work ready now (user ids only)."""
    return (
        f"""SELECT DISTINCT q.user_id FROM langmem_extraction_queue q
        WHERE {_CLAIMABLE} LIMIT %(limit)s""",
        {"now": now, "limit": limit},
    )


def claim(user_id: str, *, now: datetime, lease_until: datetime, limit: int) -> Sql:
    """Lease up to ``limit`` of a user's ready entries, oldest first.

    ``SKIP LOCKED`` lets several workers share the queue; the lease makes an entry
    claimable again if its worker dies before finishing it. The pick is a materialized
    CTE: as an ``IN (subquery)`` it may be rescanned and lease more than ``limit``.
    """
    return (
        f"""WITH picked AS MATERIALIZED (
            SELECT q.id FROM langmem_extraction_queue q
            WHERE q.user_id = %(user_id)s AND {_CLAIMABLE}
            ORDER BY q.id
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED)
        UPDATE langmem_extraction_queue u
        SET locked_until = %(lease)s, attempts = u.attempts + 1
        FROM picked
        WHERE u.user_id = %(user_id)s AND u.id = picked.id
        RETURNING {_ENTRY}""",
        {"user_id": user_id, "now": now, "lease": lease_until, "limit": limit},
    )


def renew(user_id: str, held: Sequence[tuple[int, int]], *, lease_until: datetime) -> Sql:
    """Extend the lease of entries a pass still holds; returns the ids renewed.

    ``held`` pairs each entry id with the ``attempts`` its claim saw: a later claim by
    another worker counted one more, so an entry taken over (or finished, parked,
    released) meanwhile is not renewed, and the pass leaves it alone.
    """
    return (
        """UPDATE langmem_extraction_queue q SET locked_until = %(lease)s
        FROM unnest(%(ids)s::bigint[], %(attempts)s::integer[]) AS held(id, attempts)
        WHERE q.user_id = %(user_id)s AND q.id = held.id AND q.attempts = held.attempts
          AND q.done_at IS NULL AND q.parked_at IS NULL AND q.locked_until IS NOT NULL
        RETURNING q.id""",
        {"user_id": user_id, "ids": [i for i, _ in held], "attempts": [a for _, a in held],
         "lease": lease_until},
    )


def complete(user_id: str, entry_id: int, now: datetime) -> Sql:
    """Mark an entry done (in the same transaction that applied its operations)."""
    return (
        """UPDATE langmem_extraction_queue
        SET done_at = %(now)s, locked_until = NULL, last_error = NULL
        WHERE user_id = %(user_id)s AND id = %(id)s""",
        {"user_id": user_id, "id": entry_id, "now": now},
    )


def fail(user_id: str, entry_id: int, *, error: str, retry_at: datetime,
         outage: bool = False) -> Sql:
    """Release an entry after a failure; it is retried at ``retry_at``. An ``outage``
    gives back the attempt its claim counted (a done entry is left as it is)."""
    return (
        """UPDATE langmem_extraction_queue
        SET locked_until = NULL, last_error = %(error)s, next_attempt_at = %(retry_at)s,
            attempts = CASE WHEN %(outage)s THEN greatest(attempts - 1, 0) ELSE attempts END
        WHERE user_id = %(user_id)s AND id = %(id)s AND done_at IS NULL""",
        {"user_id": user_id, "id": entry_id, "error": error[:2000], "retry_at": retry_at,
         "outage": outage},
    )


def park(user_id: str, entry_id: int, *, error: str, now: datetime) -> Sql:
    """Stop retrying an entry; it keeps its messages and its error."""
    return (
        """UPDATE langmem_extraction_queue
        SET locked_until = NULL, last_error = %(error)s, parked_at = %(now)s
        WHERE user_id = %(user_id)s AND id = %(id)s""",
        {"user_id": user_id, "id": entry_id, "error": error[:2000], "now": now},
    )


def parked(user_id: str, thread_id: str | None = None) -> Sql:
    """A user's parked entries (optionally one thread's), with their messages."""
    return (
        """SELECT user_id, id, thread_id, messages, turn_at, attempts, parked_at, last_error
        FROM langmem_extraction_queue
        WHERE user_id = %(user_id)s AND done_at IS NULL AND parked_at IS NOT NULL
          AND (%(thread_id)s::text IS NULL OR thread_id = %(thread_id)s)
        ORDER BY id""",
        {"user_id": user_id, "thread_id": thread_id},
    )


def pending(user_id: str, thread_id: str | None = None) -> Sql:
    """A user's unfinished entries (optionally one thread's), with their state; a parked
    entry has ``parked_at``."""
    return (
        """SELECT id, thread_id, attempts, next_attempt_at, locked_until, last_error,
               parked_at
        FROM langmem_extraction_queue
        WHERE user_id = %(user_id)s AND done_at IS NULL
          AND (%(thread_id)s::text IS NULL OR thread_id = %(thread_id)s)
        ORDER BY id""",
        {"user_id": user_id, "thread_id": thread_id},
    )


def mark_applied(user_id: str, op_id: str, now: datetime, *, locks: Sql | None = None,
                 strict: bool = False) -> Sql:
    """Record an operation; no row back means it was applied before.

    With ``locks`` (a SELECT taking advisory locks, one row), the same statement takes
    them first: the row it inserts is read from theirs. The conflict check does not
    depend on the statement's snapshot (taken before the wait): under READ COMMITTED an
    operation that a transaction holding the lock committed meanwhile is seen as
    applied and skipped. ``strict``: an operation applied before fails the statement
    instead (unique violation on ``APPLIED_KEY``), and with it the transaction.
    """
    params = {"user_id": user_id, "op_id": op_id, "now": now}
    tail = "" if strict else " ON CONFLICT DO NOTHING RETURNING op_id"
    if locks is not None:
        lock_sql, lock_params = locks
        return (
            f"""WITH l AS MATERIALIZED ({lock_sql})
            INSERT INTO langmem_applied_ops (user_id, op_id, applied_at)
            SELECT %(user_id)s, %(op_id)s, %(now)s FROM l{tail}""",
            merge(params, lock_params),
        )
    return (
        f"""INSERT INTO langmem_applied_ops (user_id, op_id, applied_at)
        VALUES (%(user_id)s, %(op_id)s, %(now)s){tail}""",
        params,
    )


def write_ingest_log(
    user_id: str,
    *,
    at: datetime,
    thread_id: str | None,
    agent_id: str | None,
    decisions_json: str,
) -> Sql:
    """Keep the gate's decisions of one ingest."""
    return (
        """INSERT INTO langmem_ingest_log (user_id, at, thread_id, agent_id, decisions)
        VALUES (%(user_id)s, %(at)s, %(thread_id)s, %(agent_id)s, %(decisions)s::jsonb)""",
        {
            "user_id": user_id,
            "at": at,
            "thread_id": thread_id,
            "agent_id": agent_id,
            "decisions": decisions_json,
        },
    )


def ingest_log(user_id: str, limit: int, thread_id: str | None = None) -> Sql:
    """A user's most recent ingest decisions, newest first."""
    return (
        """SELECT id, at, thread_id, agent_id, decisions FROM langmem_ingest_log
        WHERE user_id = %(user_id)s
          AND (%(thread_id)s::text IS NULL OR thread_id = %(thread_id)s)
        ORDER BY id DESC LIMIT %(limit)s""",
        {"user_id": user_id, "limit": limit, "thread_id": thread_id},
    )


def backlog(now: datetime) -> Sql:
    """The extraction queue across users, for an operator's metrics (a maintenance
    statement: it names no user): turns waiting, the age in seconds of the oldest, turns
    being retried after a failure, and turns parked (kept, no longer retried)."""
    return (
        """SELECT count(*) FILTER (WHERE done_at IS NULL AND parked_at IS NULL) AS waiting,
               coalesce(extract(epoch FROM %(now)s - min(turn_at)
                   FILTER (WHERE done_at IS NULL AND parked_at IS NULL)), 0) AS oldest,
               count(*) FILTER (WHERE done_at IS NULL AND parked_at IS NULL
                                AND attempts > 0) AS retrying,
               count(*) FILTER (WHERE done_at IS NULL AND parked_at IS NOT NULL) AS parked
        FROM langmem_extraction_queue""",
        {"now": now},
    )
