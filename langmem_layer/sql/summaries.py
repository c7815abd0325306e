"""SQL of the temporal summaries and the procedural profile: one user's
logged messages over a period, and the per-thread figures the profile is inferred from.

Every statement binds the user with an equality predicate on each per-user table. A
turn holding the source message of one of the user's ``avoid`` memories is left out
whole, as the recent-history read does: a boundary is never summarized.
"""

from __future__ import annotations

from datetime import datetime

from langmem_layer.sql import Sql, merge
from langmem_layer.sql import trust_counts as tsql
from langmem_layer.sql.generic_items import VALUE, prefix_args
from langmem_layer.sql.moved import STATUS, UPDATED, moved

__all__ = ["WITH_TRUST_ROW", "candidates", "messages", "thread_stats", "with_trust"]


_AVOIDED = """avoided AS (
            SELECT m.thread_id, m.at
            FROM langmem_items i
            JOIN langmem_messages m
              ON m.user_id = i.user_id
             AND m.thread_id = coalesce(i.value -> 'source' ->> 'thread_id', '')
             AND m.message_id = i.value -> 'source' ->> 'message_id'
            WHERE i.user_id = %(user_id)s AND m.user_id = %(user_id)s AND i.is_memory
              AND (i.value ->> 'policy') = 'avoid'
              AND m.at >= %(since)s AND m.at < %(until)s)"""


def messages(user_id: str, since: datetime, until: datetime) -> Sql:
    """The user's logged messages with ``since <= at < until`` (every profile), oldest
    first: profile, thread_id, message_id, role, text, at."""
    return (
        f"""WITH {_AVOIDED}
        SELECT m.profile, m.thread_id, m.message_id, m.role, m.text, m.at
        FROM langmem_messages m
        WHERE m.user_id = %(user_id)s AND m.at >= %(since)s AND m.at < %(until)s
          AND NOT EXISTS (SELECT 1 FROM avoided a
                          WHERE a.thread_id = m.thread_id AND a.at = m.at)
        ORDER BY m.at, m.id""",
        {"user_id": user_id, "since": since, "until": until},
    )


def thread_stats(user_id: str, since: datetime, until: datetime) -> Sql:
    """Per thread of the period (every profile): profile, first and last message,
    the user's and the assistant's message counts and mean length in words."""
    return (
        """SELECT m.profile, m.thread_id, min(m.at) AS first_at, max(m.at) AS last_at,
                  count(*) FILTER (WHERE m.role = 'user') AS user_messages,
                  count(*) FILTER (WHERE m.role <> 'user') AS agent_messages,
                  avg(array_length(regexp_split_to_array(btrim(m.text), '\\s+'), 1))
                      FILTER (WHERE m.role <> 'user') AS agent_words,
                  avg(array_length(regexp_split_to_array(btrim(m.text), '\\s+'), 1))
                      FILTER (WHERE m.role = 'user') AS user_words
        FROM langmem_messages m
        WHERE m.user_id = %(user_id)s AND m.at >= %(since)s AND m.at < %(until)s
        GROUP BY m.profile, m.thread_id
        ORDER BY min(m.at)""",
        {"user_id": user_id, "since": since, "until": until},
    )


def candidates(user_id: str, prefix: str, *, start: str, end: str, now: datetime,
               limit: int) -> Sql:
    """The user's active temporal summaries in namespace ``prefix`` (or below it) whose
    period (``metadata.start`` .. ``metadata.end``, UTC ISO text) overlaps
    ``start`` .. ``end``, most recently written first: the narrative arc's candidates.

    A turn reads this for every user, so it walks the partial index of summaries
    (``langmem_items_summaries``), never the user's other memories. The periods are
    compared as text in byte order, which is time order for ``utc_iso`` strings.
    """
    _, below = prefix_args(prefix)
    return (
        f"""SELECT i.prefix, i.key, {VALUE} AS value, i.created_at, {UPDATED} AS updated_at
        FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.is_memory
          AND (i.value ->> 'kind') = 'temporal_summary'
          AND (i.prefix = %(prefix)s OR i.prefix LIKE %(below)s)
          AND (i.expires_at IS NULL OR i.expires_at > %(now)s)
          AND {STATUS} = 'active'
          AND ({moved('metadata')} ->> 'synthesis') = 'temporal_summary'
          AND ({moved('metadata')} ->> 'end') COLLATE "C" > %(start)s
          AND ({moved('metadata')} ->> 'start') COLLATE "C" < %(end)s
        -- the index's order: only status moves set moved_at, and none leaves a memory
        -- active (they go stale or archived; a reactivation writes the value)
        ORDER BY i.updated_at DESC, i.prefix, i.key
        LIMIT %(limit)s""",
        {"user_id": user_id, "prefix": prefix, "below": below, "now": now,
         "start": start, "end": end, "limit": limit},
    )


#: The columns of ``with_trust``'s rows and their types (``citus.on_shard``).
WITH_TRUST_ROW = ("trust jsonb, prefix text, key text, value jsonb, created_at timestamptz, "
                  "updated_at timestamptz")


def with_trust(user_id: str, prefix: str, *, start: str, end: str, now: datetime,
               limit: int) -> Sql:
    """``candidates`` and the user's trust counts (``counts``)
    in one statement, the two reads a turn adds to its recall.

    At least one row: each summary's (no summary: one row of NULLs), every row with the
    trust counts as a JSON array in ``trust``.
    """
    trust_sql, trust_params = tsql.counts(user_id)
    summaries_sql, summaries_params = candidates(user_id, prefix, start=start, end=end,
                                                 now=now, limit=limit)
    return (
        f"""SELECT t.trust, s.* FROM (
            SELECT coalesce(jsonb_agg(to_jsonb(c)), '[]'::jsonb) AS trust FROM ({trust_sql}) c
        ) t LEFT JOIN LATERAL ({summaries_sql}) s ON true
        ORDER BY s.updated_at DESC, s.prefix, s.key""",
        merge(trust_params, summaries_params),
    )
