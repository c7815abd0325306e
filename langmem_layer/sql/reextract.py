"""SQL for turns waiting for re-extraction (the LLM extractor fell back to the rules).

Builders return ``(sql, params)`` and do no I/O; each statement on a user's rows binds
``user_id``. ``fallback_turns`` without a user reads all users' rows for the
``reextract`` job, which then works user by user.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from langmem_layer.sql import Sql

__all__ = ["fallback_turns", "record_fallback", "resolve_fallback"]

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
