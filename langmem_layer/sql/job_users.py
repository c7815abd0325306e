"""SQL of a per-user job's memory of each user: what the user's data looked like when the
job last ran for them, so that a run can pass over a user with nothing new.

``langmem_job_users`` holds one row per (user, job): the time the job ran at (its
``now``), its options, and a fingerprint of the user's data as the job left it. The
fingerprint is computed by the database from the user's memories (each one's key,
``updated_at``, status, policy, content hash and history length) and logged messages
(count and newest id), leaving out the memories that *other* jobs wrote, so that one
job's writes do not make every other job run again. It is taken in the user's
transaction after the job's own writes, so those count as already seen.

Builders return ``(sql, params)`` and do no I/O; every statement binds ``user_id``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from langmem_layer.sql import Sql
from langmem_layer.sql.moved import STATUS, UPDATED, moved

__all__ = ["TABLE", "remember", "state"]

#: The table (a per-user table: its key leads with ``user_id``, RLS like the others).
TABLE = """
    CREATE TABLE IF NOT EXISTS langmem_job_users (
        user_id     text NOT NULL,
        job         text NOT NULL,
        ran_now     timestamptz NOT NULL,
        options     jsonb NOT NULL DEFAULT '{}'::jsonb,
        fingerprint text NOT NULL,
        PRIMARY KEY (user_id, job)
    );
"""

# Memories whose source is another job are that job's output, not news for this one.
# A lifecycle move changes only the moved columns (sql/moved.py): read through them.
_FINGERPRINT = f"""(SELECT md5(coalesce((
        SELECT string_agg(i.prefix || '/' || i.key || '|' || {UPDATED}::text || '|'
                          || coalesce({STATUS}, '') || '|'
                          || coalesce(i.value ->> 'policy', '') || '|'
                          || coalesce(i.value ->> 'content_hash', '') || '|'
                          || coalesce(jsonb_array_length({moved("history")}), 0)::text,
                          ',' ORDER BY i.prefix, i.key)
        FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.is_memory
          AND (coalesce(i.value -> 'source' ->> 'agent_id', '') NOT LIKE 'job:%%'
               OR i.value -> 'source' ->> 'agent_id' = %(agent)s)), '')
        || '#' || (SELECT count(*)::text || ':' || coalesce(max(m.id), 0)::text
                   FROM langmem_messages m WHERE m.user_id = %(user_id)s)))"""


def _params(job: str, user_id: str) -> dict[str, Any]:
    return {"user_id": user_id, "job": job, "agent": f"job:{job}"}


def state(job: str, user_id: str) -> Sql:
    """The user's row for ``job`` (``ran_now``, ``options``, ``fingerprint``; NULLs when the
    job never ran for the user) and the fingerprint of the user's data now (``current``)."""
    return (
        f"""SELECT s.ran_now, s.options, s.fingerprint, {_FINGERPRINT} AS current
        FROM (SELECT 1) one
        LEFT JOIN langmem_job_users s ON s.user_id = %(user_id)s AND s.job = %(job)s""",
        _params(job, user_id),
    )


def remember(job: str, user_id: str, now: datetime, options: Mapping[str, Any]) -> Sql:
    """Record that ``job`` ran for the user at ``now`` with ``options``, with the
    fingerprint of the user's data as it stands in this transaction (an ``INSERT ...
    SELECT``: Citus refuses the fingerprint's subqueries in ``VALUES``). The row a
    conflict updates is the user's own (``user_id`` leads the key); its update names
    no parameter (Citus computes the row on the coordinator and would send such a
    condition without its value)."""
    return (
        f"""INSERT INTO langmem_job_users AS s (user_id, job, ran_now, options, fingerprint)
        SELECT %(user_id)s, %(job)s, %(now)s, %(options)s::jsonb, {_FINGERPRINT}
        ON CONFLICT (user_id, job) DO UPDATE SET ran_now = excluded.ran_now,
            options = excluded.options, fingerprint = excluded.fingerprint""",
        {**_params(job, user_id), "now": now,
         "options": json.dumps(dict(options), sort_keys=True, default=str)},
    )
