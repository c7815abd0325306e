"""SQL of learned agent trust: count an agent's checkable writes, read a user's
counts. Every statement binds the user with an equality predicate."""

from __future__ import annotations

from datetime import datetime

from langmem_layer.sql import Sql

__all__ = ["TRUST_TABLE", "count", "counts"]


#: The table (a migration): per user, agent and kind ('' = all kinds), the agent's
#: checkable writes and how many were confirmed.
TRUST_TABLE = """
    CREATE TABLE IF NOT EXISTS langmem_agent_trust (
        user_id    text NOT NULL,
        agent_id   text NOT NULL,
        kind       text NOT NULL DEFAULT '',
        confirmed  integer NOT NULL DEFAULT 0,
        total      integer NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, agent_id, kind)
    );
"""


def count(user_id: str, agent_id: str, kind: str, confirmed: int, total: int,
          now: datetime) -> Sql:
    """Add ``confirmed`` / ``total`` to the agent's counts, overall (kind ``''``) and for
    ``kind``, in one statement; concurrent counts add up (no read-modify-write). The row
    updated on a conflict is the user's own (``user_id`` leads the key); a condition
    naming a parameter there is not sent by Citus with its value (the insert's rows are
    computed on the coordinator), so there is none."""
    return (
        """INSERT INTO langmem_agent_trust AS t
               (user_id, agent_id, kind, confirmed, total, updated_at)
        SELECT %(user_id)s, %(agent_id)s, k, %(confirmed)s, %(total)s, %(now)s
        FROM unnest(%(kinds)s::text[]) AS k
        ON CONFLICT (user_id, agent_id, kind) DO UPDATE
        SET confirmed = t.confirmed + excluded.confirmed, total = t.total + excluded.total,
            updated_at = excluded.updated_at""",
        {"user_id": user_id, "agent_id": agent_id, "confirmed": confirmed, "total": total,
         "now": now, "kinds": sorted({"", kind})},
    )


def counts(user_id: str) -> Sql:
    """The user's trust counts: (agent_id, kind, confirmed, total) rows."""
    return (
        """SELECT agent_id, kind, confirmed, total FROM langmem_agent_trust
        WHERE user_id = %(user_id)s AND total > 0""",
        {"user_id": user_id},
    )
