"""Turns waiting for re-extraction (the LLM extractor fell back to the rules), in one
place: the ops, their SQL and their handlers.

Builders return ``(sql, params)`` and do no I/O; each statement on a user's rows binds
``user_id``. ``fallback_turns`` without a user reads all users' rows for the
``reextract`` job, which then works user by user.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.sql import Sql
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.plan import Handler, Query

__all__ = ["FallbackTurn", "FallbackTurnsOp", "RecordFallbackOp", "ResolveFallbackOp",
           "fallback_turns", "record_fallback", "resolve_fallback"]

# -- SQL ----------------------------------------------------------------------------------

_COLUMNS = ("user_id, turn_key, profile, thread_id, agent_id, messages, turn_at, extractor, "
            "attempts, recorded_at")


def record_fallback(user_id: str, turn_key: str, *, profile: str, thread_id: str | None,
                    agent_id: str | None, messages: list[dict[str, Any]], turn_at: datetime,
                    extractor: str, now: datetime) -> Sql:
    """Keep a fallback turn; the same turn again counts one more attempt."""
    return (
        f"""INSERT INTO langmem_reextract AS r ({_COLUMNS})
        VALUES (%(user_id)s, %(turn_key)s, %(profile)s, %(thread_id)s, %(agent_id)s,
                %(messages)s::jsonb, %(turn_at)s, %(extractor)s, 1, %(now)s)
        ON CONFLICT (user_id, turn_key) DO UPDATE
        SET attempts = r.attempts + 1, extractor = EXCLUDED.extractor,
            recorded_at = EXCLUDED.recorded_at
        WHERE r.user_id = EXCLUDED.user_id""",
        {"user_id": user_id, "turn_key": turn_key, "profile": profile, "thread_id": thread_id,
         "agent_id": agent_id, "messages": json.dumps(messages), "turn_at": turn_at,
         "extractor": extractor, "now": now},
    )


def fallback_turns(user_id: str | None, limit: int) -> Sql:
    """Turns waiting for re-extraction, of one user or (``None``) all, oldest first."""
    if user_id is None:
        return (f"SELECT {_COLUMNS} FROM langmem_reextract "
                "ORDER BY recorded_at, user_id, turn_key LIMIT %(limit)s", {"limit": limit})
    return (f"SELECT {_COLUMNS} FROM langmem_reextract WHERE user_id = %(user_id)s "
            "ORDER BY recorded_at, turn_key LIMIT %(limit)s",
            {"user_id": user_id, "limit": limit})


def resolve_fallback(user_id: str, turn_key: str, attempts: int) -> Sql:
    """Forget a record whose re-run did not fall back (its attempts did not change)."""
    return (
        """DELETE FROM langmem_reextract
        WHERE user_id = %(user_id)s AND turn_key = %(turn_key)s AND attempts = %(attempts)s
        RETURNING turn_key""",
        {"user_id": user_id, "turn_key": turn_key, "attempts": attempts},
    )


# -- handlers -----------------------------------------------------------------------------


def _record_fallback(ctx: Context, op: RecordFallbackOp) -> Handler:
    yield Query(*record_fallback(
        op.user_id, op.turn_key, profile=op.profile, thread_id=op.thread_id,
        agent_id=op.agent_id, messages=op.messages, turn_at=op.turn_at,
        extractor=op.extractor, now=op.now or ctx.now()))


def _fallback_turns(ctx: Context, op: FallbackTurnsOp) -> Handler:
    rows = yield Query(*fallback_turns(op.user_id, op.limit))
    return [FallbackTurn(**r) for r in rows]


def _resolve_fallback(ctx: Context, op: ResolveFallbackOp) -> Handler:
    rows = yield Query(*resolve_fallback(op.user_id, op.turn_key, op.attempts))
    return bool(rows)


# -- ops ----------------------------------------------------------------------------------


@operation(_record_fallback)
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


@operation(_fallback_turns)
class FallbackTurnsOp(NamedTuple):
    """Turns waiting for re-extraction, of one user or all, oldest first
    (result: ``list[FallbackTurn]``)."""

    user_id: str | None = None
    limit: int = 100


@operation(_resolve_fallback)
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
