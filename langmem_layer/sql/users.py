"""The per-user tables, and the SQL that erases a deleted memory's traces.

``USER_TABLES`` is the one list of per-user tables, which erasing a user
(``langmem_layer.store.ops.erasure``) empties; a test reads the catalog and fails
when a table with a ``user_id`` column is missing from it, so a new table cannot be
forgotten. It stays here, in the ``sql`` room, because ``sql/citus.py`` distributes
those tables. Builders return ``(sql, params)`` and do no I/O; each binds ``user_id``
with an equality predicate.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "KEYS_TABLE",
    "USER_TABLES",
    "forget_memory_traces",
]

#: Every table holding per-user rows, in deletion order: rows that reference others
#: first (links and embeddings before items), term statistics after the items whose
#: triggers update them, and the index registry after its indexes are dropped.
USER_TABLES: tuple[str, ...] = (
    "langmem_links",
    "langmem_embeddings",
    "langmem_context_vectors",
    "langmem_decay",
    "langmem_items",
    "langmem_terms",
    "langmem_extraction_queue",
    "langmem_applied_ops",
    "langmem_ingest_log",
    "langmem_embedding_cache",
    "langmem_messages",
    "langmem_threads",
    "langmem_reextract",
    "langmem_vector_indexes",
    "langmem_api_keys",
    "langmem_agent_trust",
    "langmem_job_users",
)


#: The per-user table of API keys (kept by a reset that keeps the user's access).
KEYS_TABLE = "langmem_api_keys"


def forget_memory_traces(user_id: str, key: str) -> list[tuple[str, dict[str, Any]]]:
    """Statements that erase what a memory left behind besides its row, links and vectors.

    Run in the memory's delete transaction and before its row is deleted (they read
    its content from it): the decisions that proposed, updated or targeted it leave
    the decision log, and its content's cached vector leaves the embedding cache.
    """
    params = {"user_id": user_id, "key": key}
    memory = """SELECT i.value ->> 'content' AS content FROM langmem_items i
               WHERE i.user_id = %(user_id)s AND i.key = %(key)s AND i.is_memory"""
    return [
        (
            f"""UPDATE langmem_ingest_log l
            SET decisions = coalesce(
                (SELECT jsonb_agg(d ORDER BY n) FROM jsonb_array_elements(l.decisions)
                     WITH ORDINALITY AS e(d, n)
                 WHERE (d ->> 'content') IS DISTINCT FROM m.content
                   AND (d ->> 'target_id') IS DISTINCT FROM %(key)s),
                '[]'::jsonb)
            FROM ({memory}) m
            WHERE l.user_id = %(user_id)s
              AND EXISTS (SELECT 1 FROM jsonb_array_elements(l.decisions) d
                          WHERE d ->> 'content' = m.content OR d ->> 'target_id' = %(key)s)""",
            params,
        ),
        # The hash is computed in a subquery kept apart (OFFSET 0: not pulled up into
        # the join): Citus refuses a STABLE function (convert_to) over a column in the
        # WHERE clause of a modification.
        (
            """DELETE FROM langmem_embedding_cache c
            USING (SELECT encode(sha256(convert_to(i.value ->> 'content', 'UTF8')), 'hex')
                          AS content_hash
                   FROM langmem_items i
                   WHERE i.user_id = %(user_id)s AND i.key = %(key)s AND i.is_memory
                   OFFSET 0) m
            WHERE c.user_id = %(user_id)s AND c.content_hash = m.content_hash""",
            params,
        ),
    ]
