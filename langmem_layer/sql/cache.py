"""SQL for the embedding cache: vectors kept per (user, model, exact text hash).

Builders return ``(sql, params)`` and do no I/O. The cache is per user, never shared:
a cross-tenant cache would reveal, through hits, whether another user stored a given
text. So every statement binds ``user_id`` in its WHERE clause, except
``stale_cache_users``, which reads user ids only (as the TTL sweep does) so that
the purge can then run per user. Times are always bound from the store clock, never
SQL ``now()``, so tests and replays control expiry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langmem_layer.sql import Sql
from langmem_layer.sql.vector import vector_literal

__all__ = [
    "lookup_cached",
    "purge_embedding_cache_sql",
    "stale_cache_users",
    "upsert_cached",
]


def lookup_cached(
    model_id: str, keys: Sequence[tuple[str, str]], fresh_after: datetime
) -> Sql:
    """Cached vectors of ``keys`` (user_id, content_hash) made after ``fresh_after``.

    Args:
        model_id: The model whose vectors are wanted.
        keys: (user_id, content_hash) pairs; a hash only matches under its own user.
        fresh_after: Entries created at or before this time are too old to use.

    Returns:
        ``(sql, params)`` selecting ``user_id``, ``content_hash`` and ``embedding``
        (pgvector's text form).
    """
    return (
        """SELECT c.user_id, c.content_hash, c.embedding::text AS embedding
        FROM langmem_embedding_cache c
        WHERE (c.user_id, c.content_hash) IN
                  (SELECT t.user_id, t.content_hash
                   FROM unnest(%(users)s::text[], %(hashes)s::text[])
                        AS t(user_id, content_hash))
          AND c.model_id = %(model_id)s AND c.created_at > %(fresh_after)s""",
        {"users": [u for u, _ in keys], "hashes": [h for _, h in keys],
         "model_id": model_id, "fresh_after": fresh_after},
    )


def upsert_cached(
    model_id: str, rows: Sequence[tuple[str, str, Sequence[float]]], now: datetime
) -> Sql:
    """Insert or refresh cache entries given as (user_id, content_hash, vector) rows.

    Rows must be unique by (user_id, content_hash): one INSERT cannot update the same
    row twice. Callers pass them sorted, so concurrent batches lock rows in the same
    order and cannot deadlock on each other.
    """
    return (
        """INSERT INTO langmem_embedding_cache AS c
            (user_id, model_id, content_hash, embedding, created_at)
        SELECT t.user_id, %(model_id)s, t.content_hash, t.vec::vector, %(now)s
        FROM unnest(%(users)s::text[], %(hashes)s::text[], %(vectors)s::text[])
             AS t(user_id, content_hash, vec)
        ON CONFLICT (user_id, model_id, content_hash) DO UPDATE
        SET embedding = EXCLUDED.embedding, created_at = EXCLUDED.created_at
        WHERE c.user_id = EXCLUDED.user_id""",
        {
            "model_id": model_id,
            "now": now,
            "users": [r[0] for r in rows],
            "hashes": [r[1] for r in rows],
            "vectors": [vector_literal(r[2]) for r in rows],
        },
    )


def stale_cache_users(before: datetime) -> Sql:
    """Users holding cache entries created at or before ``before`` (user ids only)."""
    return (
        "SELECT DISTINCT user_id FROM langmem_embedding_cache WHERE created_at <= %(before)s",
        {"before": before},
    )


def purge_embedding_cache_sql(user_id: str, before: datetime) -> Sql:
    """Delete one user's cache entries created at or before ``before``.

    Args:
        user_id: The user whose entries go.
        before: Usually the store clock's now minus
            ``CACHE_TTL``; such entries are
            never read again, so deleting them only frees space.

    Returns:
        ``(sql, params)`` returning one row with ``deleted``, the number of entries.
    """
    return (
        """WITH gone AS (
            DELETE FROM langmem_embedding_cache
            WHERE user_id = %(user_id)s AND created_at <= %(before)s
            RETURNING 1
        )
        SELECT count(*) AS deleted FROM gone""",
        {"user_id": user_id, "before": before},
    )
