"""SQL for typed-memory operations: hybrid candidates, reinforcement, status, links, export.

Builders return ``(sql, params)`` with named parameters and do no I/O. Each
statement binds ``user_id``; candidates are further limited to the caller's
scopes (namespaces) and statuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langmem_layer.sql.items import vector_literal
from langmem_layer.types import utc_iso

__all__ = [
    "delete_links_of",
    "delete_memory",
    "find_memory",
    "insert_link",
    "links_of",
    "recall_candidates",
    "set_status",
    "touch",
    "user_items",
    "user_links",
]

Sql = tuple[str, dict[str, Any]]

_ELIGIBLE = """i.user_id = %(user_id)s AND i.prefix = ANY(%(prefixes)s::text[]) AND i.is_memory
          AND i.value->>'status' = ANY(%(statuses)s::text[])
          AND (i.expires_at IS NULL OR i.expires_at > %(now)s)"""


def recall_candidates(
    user_id: str,
    prefixes: Sequence[str],
    *,
    now: datetime,
    statuses: Sequence[str] = ("active",),
    query_text: str | None = None,
    query_vector: Sequence[float] | None = None,
    model_id: str | None = None,
    refs: Sequence[str] = (),
    per_source: int = 40,
    pinned_limit: int = 50,
) -> Sql:
    """Candidates from every retrieval strategy in one round trip.

    Strategies: vector similarity (exact cosine over the user's vectors), full-text
    (any query term, ranked by cover density), exact reference match (GIN) and pinned
    memories. Each result row carries its 0-based rank per strategy (NULL where the
    strategy did not find it) and its cosine similarity when one exists, so fusion and
    ranking can happen in Python over the union.
    """
    params: dict[str, Any] = {
        "user_id": user_id,
        "prefixes": list(prefixes),
        "statuses": list(statuses),
        "now": now,
        "n": per_source,
        "pinned_limit": pinned_limit,
    }
    ctes: list[str] = []
    sources: list[str] = []
    if query_vector is not None:
        params.update(qv=vector_literal(query_vector), model_id=model_id)
        ctes.append(
            """sims AS (
            SELECT e.prefix, e.key, max(1 - (e.embedding <=> %(qv)s::vector)) AS sim
            FROM langmem_embeddings e
            WHERE e.user_id = %(user_id)s AND e.model_id = %(model_id)s
              AND e.prefix = ANY(%(prefixes)s::text[])
            GROUP BY e.prefix, e.key
        ),
        vec AS (
            SELECT s.prefix, s.key, row_number() OVER (ORDER BY s.sim DESC, s.key) - 1 AS rnk
            FROM sims s
            JOIN langmem_items i ON i.user_id = %(user_id)s AND i.prefix = s.prefix
                                AND i.key = s.key
            WHERE """
            + _ELIGIBLE
            + """
            ORDER BY s.sim DESC, s.key
            LIMIT %(n)s
        )"""
        )
        sources.append("vec")
    if query_text and query_text.strip():
        params["qt"] = query_text
        # OR the query's terms: a memory sharing any content word is a candidate;
        # cover-density ranking then prefers the ones sharing more.
        ctes.append(
            """tsq AS (
            SELECT replace(plainto_tsquery('english', %(qt)s)::text, '&', '|') AS q
        ),
        kw AS (
            SELECT i.prefix, i.key,
                   row_number() OVER (ORDER BY ts_rank_cd(i.tsv, t.q::tsquery) DESC, i.key) - 1
                       AS rnk
            FROM langmem_items i, tsq t
            WHERE t.q <> '' AND i.tsv @@ t.q::tsquery AND """
            + _ELIGIBLE
            + """
            ORDER BY rnk
            LIMIT %(n)s
        )"""
        )
        sources.append("kw")
    if refs:
        params["refs"] = list(refs)
        ctes.append(
            """rf AS (
            SELECT i.prefix, i.key,
                   row_number() OVER (ORDER BY i.updated_at DESC, i.key) - 1 AS rnk
            FROM langmem_items i
            WHERE (i.value -> 'refs') ?| %(refs)s::text[] AND """
            + _ELIGIBLE
            + """
            ORDER BY rnk
            LIMIT %(n)s
        )"""
        )
        sources.append("rf")
    ctes.append(
        """pin AS (
            SELECT i.prefix, i.key, row_number() OVER (ORDER BY i.updated_at DESC, i.key) - 1
                AS rnk
            FROM langmem_items i
            WHERE (i.value -> 'pinned') = 'true'::jsonb AND """
        + _ELIGIBLE
        + """
            ORDER BY rnk
            LIMIT %(pinned_limit)s
        )"""
    )
    sources.append("pin")
    union = " UNION ".join(f"SELECT prefix, key FROM {s}" for s in sources)
    rank_cols = ", ".join(
        f"{s}.rnk AS {s}_rank" if s in sources else f"NULL::bigint AS {s}_rank"
        for s in ("vec", "kw", "rf", "pin")
    )
    joins = "\n".join(
        f"LEFT JOIN {s} ON {s}.prefix = c.prefix AND {s}.key = c.key" for s in sources
    )
    sim_col = "sims.sim" if "vec" in sources else "NULL::float8"
    sim_join = (
        "LEFT JOIN sims ON sims.prefix = c.prefix AND sims.key = c.key" if "vec" in sources else ""
    )
    sql = f"""WITH {", ".join(ctes)},
        cand AS ({union})
        SELECT i.prefix, i.key, i.value, i.created_at, i.updated_at,
               {sim_col} AS similarity, {rank_cols}
        FROM cand c
        JOIN langmem_items i ON i.user_id = %(user_id)s AND i.prefix = c.prefix AND i.key = c.key
        {sim_join}
        {joins}"""
    return sql, params


def touch(user_id: str, keys: Sequence[str], now: datetime) -> Sql:
    """Reinforce retrieved memories: access_count + 1, last_accessed_at = now (R4.4)."""
    return (
        """UPDATE langmem_items i
        SET value = jsonb_set(
                jsonb_set(i.value, '{access_count}',
                          to_jsonb(coalesce((i.value->>'access_count')::int, 0) + 1)),
                '{last_accessed_at}', to_jsonb(%(now_iso)s::text))
        WHERE i.user_id = %(user_id)s AND i.key = ANY(%(keys)s::text[]) AND i.is_memory""",
        {"user_id": user_id, "keys": list(keys), "now_iso": utc_iso(now)},
    )


def set_status(user_id: str, keys: Sequence[str], status: str, now: datetime) -> Sql:
    """Move memories to a lifecycle status; returns the keys that changed."""
    return (
        """UPDATE langmem_items i
        SET value = jsonb_set(i.value, '{status}', to_jsonb(%(status)s::text)),
            updated_at = %(now)s
        WHERE i.user_id = %(user_id)s AND i.key = ANY(%(keys)s::text[]) AND i.is_memory
          AND i.value->>'status' IS DISTINCT FROM %(status)s
        RETURNING i.key""",
        {"user_id": user_id, "keys": list(keys), "status": status, "now": now},
    )


def find_memory(user_id: str, key: str) -> Sql:
    """One typed memory by id, whatever its scope."""
    return (
        """SELECT i.prefix, i.key, i.value, i.created_at, i.updated_at
        FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.key = %(key)s AND i.is_memory""",
        {"user_id": user_id, "key": key},
    )


def delete_memory(user_id: str, key: str) -> list[Sql]:
    """Delete a memory, its embeddings (cascade) and its links; run in one transaction."""
    params = {"user_id": user_id, "key": key}
    return [
        (
            """DELETE FROM langmem_links
            WHERE user_id = %(user_id)s AND (src_key = %(key)s OR dst_key = %(key)s)""",
            params,
        ),
        (
            """DELETE FROM langmem_items
            WHERE user_id = %(user_id)s AND key = %(key)s AND is_memory RETURNING key""",
            params,
        ),
    ]


def delete_links_of(user_id: str, keys: Sequence[str]) -> Sql:
    """Remove links touching deleted memories."""
    return (
        """DELETE FROM langmem_links
        WHERE user_id = %(user_id)s
          AND (src_key = ANY(%(keys)s::text[]) OR dst_key = ANY(%(keys)s::text[]))""",
        {"user_id": user_id, "keys": list(keys)},
    )


def insert_link(
    user_id: str,
    src_key: str,
    link_type: str,
    dst_key: str,
    now: datetime,
    metadata_json: str = "{}",
) -> Sql:
    """Record a typed link; a repeated link is a no-op."""
    return (
        """INSERT INTO langmem_links (user_id, src_key, link_type, dst_key, created_at, metadata)
        VALUES (%(user_id)s, %(src)s, %(type)s, %(dst)s, %(now)s, %(meta)s::jsonb)
        ON CONFLICT DO NOTHING""",
        {
            "user_id": user_id,
            "src": src_key,
            "type": link_type,
            "dst": dst_key,
            "now": now,
            "meta": metadata_json,
        },
    )


def links_of(user_id: str, keys: Sequence[str]) -> Sql:
    """Links touching any of ``keys``, in either direction."""
    return (
        """SELECT src_key, link_type, dst_key, created_at, metadata FROM langmem_links
        WHERE user_id = %(user_id)s
          AND (src_key = ANY(%(keys)s::text[]) OR dst_key = ANY(%(keys)s::text[]))
        ORDER BY created_at, src_key, link_type, dst_key""",
        {"user_id": user_id, "keys": list(keys)},
    )


def user_items(user_id: str) -> Sql:
    """Every item of a tenant (memories and generic items), for export."""
    return (
        """SELECT i.prefix, i.key, i.value, i.is_memory, i.created_at, i.updated_at,
               i.expires_at, i.ttl_minutes
        FROM langmem_items i WHERE i.user_id = %(user_id)s ORDER BY i.prefix, i.key""",
        {"user_id": user_id},
    )


def user_links(user_id: str) -> Sql:
    """Every link of a tenant, for export."""
    return (
        """SELECT src_key, link_type, dst_key, created_at, metadata FROM langmem_links
        WHERE user_id = %(user_id)s ORDER BY src_key, link_type, dst_key""",
        {"user_id": user_id},
    )
