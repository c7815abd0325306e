"""SQL of learned agent trust that the ``sql`` room itself uses: the table (a migration
of ``ddl_features``) and the read of a user's counts (joined into a turn's reads by
``summaries.with_trust``). The ops, the count and the handlers are in
``langmem_layer.store.ops.trust``. The statement binds the user with an equality
predicate."""

from __future__ import annotations

from langmem_layer.sql import Sql

__all__ = ["TRUST_TABLE", "counts"]


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


def counts(user_id: str) -> Sql:
    """The user's trust counts: (agent_id, kind, confirmed, total) rows."""
    return (
        """SELECT agent_id, kind, confirmed, total FROM langmem_agent_trust
        WHERE user_id = %(user_id)s AND total > 0""",
        {"user_id": user_id},
    )
