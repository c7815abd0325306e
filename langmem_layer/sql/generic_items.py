"""SQL for the generic BaseStore operations: get, put, delete, search, list namespaces.

Every builder returns ``(sql, params)`` and does no I/O. Every statement binds the
tenant (``user_id``) in its WHERE clause, except ``list_prefixes`` without a
tenant, which reads only namespace names (never values) for namespace browsing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from langmem_layer.sql import Params, Sql, merge
from langmem_layer.sql.moved import CLEAR, UPDATED
from langmem_layer.sql.vector import nearest, vector_literal

__all__ = [
    "VALUE",
    "delete_embeddings",
    "delete_items",
    "expired_users",
    "get_items",
    "insert_embeddings",
    "list_prefixes",
    "match_items",
    "prefix_condition",
    "replace_embeddings",
    "search_items",
    "sweep_expired",
    "upsert_items",
    "vector_literal",
]

_LIVE = "(i.expires_at IS NULL OR i.expires_at > %(now)s)"


def _live(now: datetime, omit_expired: bool) -> Sql:
    """Which rows a read sees: live ones, or (``omit_expired=False``, as LangGraph's
    PostgresStore by default) also expired ones the sweep has not deleted yet."""
    return (_LIVE, {"now": now}) if omit_expired else ("TRUE", {})

#: An item's value as every reader sees it (alias ``i``): reinforcement keeps the access
#: fields in the ``access`` column (migration 13, see ``touch``),
#: the lifecycle's moves their keys in the ``moved`` column (``moved``),
#: and a write of the value clears both. Their keys never overlap, so one merge of the
#: value does (``||`` merges top-level keys, and is associative); most rows have neither.
VALUE = "(i.value || coalesce(i.moved || i.access, i.moved, i.access, '{}'::jsonb))"


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def prefix_condition(prefix: str, *, column: str = "i.prefix") -> Sql:
    """Match a namespace and everything below it (``prefix`` is the dotted text form)."""
    if not prefix:
        return "TRUE", {}
    return (f"({column} = %(ns)s OR {column} LIKE %(ns_below)s)",
            {"ns": prefix, "ns_below": _escape_like(prefix) + ".%"})


def prefix_args(prefix: str) -> tuple[str | None, str | None]:
    """``prefix_condition`` as plain values: (namespace, LIKE pattern)."""
    if not prefix:
        return None, None
    return prefix, _escape_like(prefix) + ".%"


def get_items(
    user_id: str, prefix: str, keys: Sequence[str], now: datetime, *, omit_expired: bool = True,
    refresh_ttl: bool = False,
) -> Sql:
    """Fetch items of one namespace by key (live ones only, unless ``omit_expired=False``).

    With ``refresh_ttl`` the same statement restarts the TTL clock of those that have
    one (see ``_refreshing``); the rows returned are as they were read.
    """
    live_sql, live_params = _live(now, omit_expired)
    refresh = (f"WITH {_refreshing('SELECT %(prefix)s::text, unnest(%(keys)s::text[])')}\n"
               if refresh_ttl else "")
    return (
        f"""{refresh}SELECT i.prefix, i.key, {VALUE} AS value, i.created_at, {UPDATED} AS updated_at
        FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.prefix = %(prefix)s AND i.key = ANY(%(keys)s::text[])
          AND {live_sql}""",
        merge({"user_id": user_id, "prefix": prefix, "keys": list(keys)}, live_params,
              {"now": now} if refresh_ttl else None),
    )


def _refreshing(rows: str) -> str:
    """CTEs that restart the TTL clock of the items ``rows`` (a query of prefix, key)
    names that have a TTL, for a read to run in its own statement.

    The refresh runs inside the read's transaction, so overlapping reads of the same
    items must never wait on each other: an UPDATE that visits rows in join order takes
    their locks in different orders in different transactions and deadlocks. Instead
    the rows are locked in one fixed order (prefix, key) and a row another transaction
    holds is skipped (``FOR UPDATE SKIP LOCKED``): that transaction is a write, which
    sets the row's expiry itself, or another read, which refreshes it to the same "now"
    give or take its own clock. So a refresh never blocks and never fails a read, and
    costs the read no statement or round trip of its own. The read's rows come from the
    statement's snapshot, taken before the refresh, as a read before a refresh sees them.
    """
    return f"""locked AS (
            SELECT i.prefix, i.key
            FROM langmem_items i
            JOIN ({rows}) AS t(prefix, key) ON i.prefix = t.prefix AND i.key = t.key
            WHERE i.user_id = %(user_id)s AND i.ttl_minutes IS NOT NULL AND {_LIVE}
            ORDER BY i.prefix, i.key
            FOR UPDATE OF i SKIP LOCKED
        ), refreshed AS (
            UPDATE langmem_items i
            -- in UTC timestamps: timestamptz + interval is STABLE, and Citus refuses a
            -- STABLE function over a column in an UPDATE (the same instant either way)
            SET expires_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC')
                              + make_interval(secs => i.ttl_minutes * 60)) AT TIME ZONE 'UTC'
            FROM locked
            WHERE i.user_id = %(user_id)s AND i.prefix = locked.prefix AND i.key = locked.key
        )"""


#: How an upsert treats an item that exists (both forms of it share this).
_UPSERT = f"""ON CONFLICT (user_id, prefix, key) DO UPDATE SET
            -- An expired row not swept yet is gone for readers: writing it again creates it.
            created_at = CASE WHEN i.expires_at IS NOT NULL AND i.expires_at <= EXCLUDED.updated_at
                              THEN EXCLUDED.created_at ELSE i.created_at END,
            value = EXCLUDED.value,
            access = NULL,
            -- a writer of a memory read it merged (VALUE): the moves are in what it writes
            {CLEAR},
            is_memory = EXCLUDED.is_memory,
            search_text = EXCLUDED.search_text,
            updated_at = EXCLUDED.updated_at,
            expires_at = EXCLUDED.expires_at,
            ttl_minutes = EXCLUDED.ttl_minutes
        WHERE i.user_id = EXCLUDED.user_id"""


def upsert_items(rows: Sequence[dict[str, Any]], now: datetime) -> Sql:
    """Insert or replace items in one statement.

    Each row has user_id, prefix, key, value (JSON-compatible), is_memory, search_text,
    ttl_minutes, and optionally created_at / updated_at (an import keeps the originals;
    otherwise both are ``now``) and expires_at (a typed memory's own expiry, which wins
    over the TTL). Rows must be unique by (user_id, prefix, key).

    The rows travel as one JSON document: psycopg dumps ten array parameters in Python,
    a cost every put paid, where ``json.dumps`` of the rows is one C call.
    """
    payload = json.dumps([{
        **{c: r[c] for c in ("user_id", "prefix", "key", "value", "is_memory", "search_text",
                             "ttl_minutes")},
        "created_at": _stamp(r.get("created_at") or now),
        "updated_at": _stamp(r.get("updated_at") or now),
        "expires_at": _stamp(r.get("expires_at")),
    } for r in rows])
    return (
        f"""INSERT INTO langmem_items AS i
            (user_id, prefix, key, value, is_memory, search_text,
             created_at, updated_at, expires_at, ttl_minutes)
        SELECT t.user_id, t.prefix, t.key, t.value, t.is_memory, t.search_text,
               t.created_at, t.updated_at,
               coalesce(t.expires_at, %(now)s + make_interval(secs => t.ttl_minutes * 60)),
               t.ttl_minutes
        FROM jsonb_to_recordset(%(rows)s::jsonb)
             AS t(user_id text, prefix text, key text, value jsonb, is_memory bool,
                  search_text text, ttl_minutes float8, created_at timestamptz,
                  updated_at timestamptz, expires_at timestamptz)
        {_UPSERT}""",
        {"now": now, "rows": payload},
    )


#: The most rows ``upsert_item_rows`` writes as rows of ``VALUES`` (10 parameters each).
VALUES_ROWS = 100


def upsert_item_rows(rows: Sequence[dict[str, Any]], now: datetime) -> Sql:
    """``upsert_items`` as a row of ``VALUES`` per item (at most ``VALUES_ROWS``): the
    form Citus routes to each user's shard, where it inserts the rows of a ``SELECT``
    that reads no table (the JSON document's) through the coordinator, with a copy and
    a two-phase commit. On one server the JSON document costs less to send."""
    if len(rows) > VALUES_ROWS:
        raise ValueError(f"{len(rows)} rows: at most {VALUES_ROWS} as VALUES")
    params: dict[str, Any] = {}
    values = []
    for n, r in enumerate(rows):
        ttl = r["ttl_minutes"]
        expires = r.get("expires_at") or (None if ttl is None
                                          else now + timedelta(minutes=ttl))
        params.update({f"u{n}": r["user_id"], f"p{n}": r["prefix"], f"k{n}": r["key"],
                       f"v{n}": json.dumps(r["value"]), f"m{n}": r["is_memory"],
                       f"s{n}": r["search_text"], f"c{n}": r.get("created_at") or now,
                       f"a{n}": r.get("updated_at") or now, f"e{n}": expires,
                       f"t{n}": ttl})
        values.append(f"(%(u{n})s, %(p{n})s, %(k{n})s, %(v{n})s::jsonb, %(m{n})s, "
                      f"%(s{n})s, %(c{n})s, %(a{n})s, %(e{n})s, %(t{n})s)")
    rows_sql = ",\n               ".join(values)
    return (
        f"""INSERT INTO langmem_items AS i
            (user_id, prefix, key, value, is_memory, search_text,
             created_at, updated_at, expires_at, ttl_minutes)
        VALUES {rows_sql}
        {_UPSERT}""",
        params,
    )


def _stamp(value: datetime | None) -> str | None:
    # A naive time is read in the session's time zone, as psycopg sends one.
    return None if value is None else value.isoformat()


def delete_items(user_id: str, prefix: str, keys: Sequence[str]) -> Sql:
    """Delete items of one namespace; their embeddings go by cascade."""
    return (
        """DELETE FROM langmem_items
        WHERE user_id = %(user_id)s AND prefix = %(prefix)s AND key = ANY(%(keys)s::text[])""",
        {"user_id": user_id, "prefix": prefix, "keys": list(keys)},
    )


def delete_embeddings(triples: Sequence[tuple[str, str, str]], model_id: str) -> Sql:
    """Drop one model's vectors of re-written items, so no stale vector survives an update."""
    return (
        """DELETE FROM langmem_embeddings e
        USING unnest(%(users)s::text[], %(prefixes)s::text[], %(keys)s::text[])
              AS t(user_id, prefix, key)
        WHERE e.user_id = t.user_id AND e.prefix = t.prefix AND e.key = t.key
          AND e.model_id = %(model_id)s""",
        {"users": [u for u, _, _ in triples], "prefixes": [p for _, p, _ in triples],
         "keys": [k for _, _, k in triples], "model_id": model_id},
    )


def insert_embeddings(
    rows: Sequence[tuple[str, str, str, str, list[float]]],
    *,
    model_id: str,
    dims: int,
    now: datetime,
) -> Sql:
    """Insert vectors given as (user_id, prefix, key, field, vector) rows."""
    return (
        """INSERT INTO langmem_embeddings
            (user_id, prefix, key, model_id, field, dims, embedding, created_at)
        SELECT t.user_id, t.prefix, t.key, %(model_id)s, t.field, %(dims)s, t.vec::vector,
               %(now)s
        FROM unnest(%(users)s::text[], %(prefixes)s::text[], %(keys)s::text[],
                    %(fields)s::text[], %(vectors)s::text[])
             AS t(user_id, prefix, key, field, vec)
        ON CONFLICT (user_id, prefix, key, model_id, field)
        DO UPDATE SET embedding = EXCLUDED.embedding, dims = EXCLUDED.dims,
                      created_at = EXCLUDED.created_at""",
        {
            "model_id": model_id,
            "dims": dims,
            "now": now,
            "users": [r[0] for r in rows],
            "prefixes": [r[1] for r in rows],
            "keys": [r[2] for r in rows],
            "fields": [r[3] for r in rows],
            "vectors": [vector_literal(r[4]) for r in rows],
        },
    )


def replace_embeddings(
    triples: Sequence[tuple[str, str, str]],
    rows: Sequence[tuple[str, str, str, str, list[float]]],
    *,
    model_id: str,
    dims: int,
    now: datetime,
) -> Sql:
    """``delete_embeddings`` of ``triples`` and ``insert_embeddings`` of ``rows``
    in one statement: the re-written items' vectors of fields they no longer have go,
    the others are replaced. The two parts touch different rows (a field with a new
    vector is upserted, not deleted), so neither sees the other's change."""
    insert_sql, params = insert_embeddings(rows, model_id=model_id, dims=dims, now=now)
    return (
        f"""WITH gone AS (
            DELETE FROM langmem_embeddings e
            USING unnest(%(old_users)s::text[], %(old_prefixes)s::text[], %(old_keys)s::text[])
                  AS t(user_id, prefix, key)
            WHERE e.user_id = t.user_id AND e.prefix = t.prefix AND e.key = t.key
              AND e.model_id = %(model_id)s
              AND NOT EXISTS (
                  SELECT 1 FROM unnest(%(users)s::text[], %(prefixes)s::text[],
                                       %(keys)s::text[], %(fields)s::text[])
                       AS f(user_id, prefix, key, field)
                  WHERE f.user_id = e.user_id AND f.prefix = e.prefix AND f.key = e.key
                    AND f.field = e.field))
        {insert_sql}""",
        {**params, "old_users": [u for u, _, _ in triples],
         "old_prefixes": [p for _, p, _ in triples], "old_keys": [k for _, _, k in triples]},
    )


def search_items(
    user_id: str,
    prefix: str,
    *,
    filter_sql: Sql,
    limit: int,
    offset: int,
    now: datetime,
    query_vector: Sequence[float] | None = None,
    model_id: str | None = None,
    indexed_dims: int | None = None,
    distance: str = "cosine",
    omit_expired: bool = True,
    vector_type: str = "vector",
    refresh_ttl: bool = False,
) -> Sql:
    """Filter items under a namespace prefix; with a query vector, rank by ``distance``
    (scored as ``SCORES``, higher first).
    ``vector_type`` is that of the tenant's HNSW index (``indexed_dims``).

    Expired items not swept yet are left out unless ``omit_expired=False``. The vector
    branch searches only this tenant's vectors (exactly, or through the
    tenant's own HNSW index when it has one, see ``langmem_layer.sql.vector``), so a
    search inside one user's namespace returns ``limit`` results when that many match.
    With ``refresh_ttl`` the same statement restarts the TTL clock of the items found
    that have one (see ``_refreshing``).
    """
    ns_sql, ns_params = prefix_condition(prefix)
    f_sql, f_params = filter_sql
    live_sql, live_params = _live(now, omit_expired)
    if query_vector is None:
        read = (
            f"""SELECT i.prefix, i.key, {VALUE} AS value, i.created_at, {UPDATED} AS updated_at,
                   NULL::float8 AS score
            FROM langmem_items i
            WHERE i.user_id = %(user_id)s AND {ns_sql} AND {live_sql} AND {f_sql}
            ORDER BY {UPDATED} DESC, i.prefix, i.key
            LIMIT %(limit)s OFFSET %(offset)s""",
            merge({"user_id": user_id, "limit": limit, "offset": offset}, ns_params,
                  live_params, f_params),
        )
    else:
        near_sql, near_params = nearest(
            user_id,
            model_id or "",
            query_vector,
            prefix_sql=prefix_condition(prefix, column="e.prefix"),
            prefix_args=prefix_args(prefix),
            # Exact search scores every vector so filters can never starve the limit; an
            # indexed search over-fetches instead (iterative scan keeps walking).
            limit=None if indexed_dims is None else max(4 * (limit + offset), 40),
            indexed_dims=indexed_dims,
            distance=distance,
            vector_type=vector_type,
        )
        read = (
            f"""SELECT i.prefix, i.key, {VALUE} AS value, i.created_at, {UPDATED} AS updated_at,
                   s.sim AS score
            FROM ({near_sql}) s
            JOIN langmem_items i ON i.user_id = %(user_id)s AND i.prefix = s.prefix
                                AND i.key = s.key
            WHERE {live_sql} AND {f_sql}
            ORDER BY s.sim DESC, i.prefix, i.key
            LIMIT %(limit)s OFFSET %(offset)s""",
            merge(near_params, {"user_id": user_id, "limit": limit, "offset": offset},
                  live_params, f_params),
        )
    if not refresh_ttl:
        return read
    # The read's order again, by its output columns: a CTE's rows have no order.
    order = "updated_at DESC" if query_vector is None else "score DESC"
    return (f"""WITH found AS MATERIALIZED ({read[0]}),
        {_refreshing("SELECT prefix, key FROM found")}
        SELECT * FROM found ORDER BY {order}, prefix, key""",
            merge(read[1], {"user_id": user_id, "now": now}))


#: A search's first sort key: current memories (active, stale; and items that are not
#: memories) first, then archived ones, then contradicted (superseded) ones.
_HISTORY_LAST = ("CASE i.value->>'status' WHEN 'archived' THEN 1 "
                 "WHEN 'contradicted' THEN 2 ELSE 0 END")


def match_items(
    user_id: str,
    prefix: str,
    *,
    filter_sql: Sql,
    query_text: str,
    query_vector: Sequence[float] | None,
    model_id: str | None,
    floor: float,
    episodic_floor: float,
    limit: int,
    offset: int,
    now: datetime,
) -> Sql:
    """One page of the items under a namespace prefix that match a query by recall's
    relevance floor, best first: an item matches when its text shares a word
    with the query (full text, any term, as recall's keyword strategy) or, with a query
    vector, when its cosine similarity reaches ``floor`` (``episodic_floor`` for an
    episodic memory). ``score`` is the similarity (NULL for an item without a vector).

    Every vector of the user under the prefix is scored exactly: a search for a
    person's memory panel, not a turn's recall. A memory's history comes after what is
    current (``_HISTORY_LAST``), so a superseded memory never ranks above the one
    that replaced it.
    """
    ns_sql, ns_params = prefix_condition(prefix)
    f_sql, f_params = filter_sql
    live_sql, live_params = _live(now, True)
    # The query's terms OR-ed (recall's form); a scalar subquery so it is built once.
    words = ("ts_match_vq(i.tsv, (SELECT nullif(replace(plainto_tsquery('english', "
             "%(query_text)s)::text, '&', '|'), '')::tsquery))")
    near_params: Params = {}
    match_params: Params = {"query_text": query_text}
    if query_vector is None:
        join, score, match = "", "NULL::float8", words
    else:
        near_sql, near_params = nearest(
            user_id, model_id or "", query_vector,
            prefix_sql=prefix_condition(prefix, column="e.prefix"), limit=None,
            indexed_dims=None)
        join = f"LEFT JOIN ({near_sql}) s ON s.prefix = i.prefix AND s.key = i.key"
        score = "s.sim"
        match = (f"({words} OR s.sim >= CASE WHEN i.value->>'layer' = 'episodic' "
                 "THEN %(episodic_floor)s ELSE %(floor)s END)")
        match_params.update(episodic_floor=episodic_floor, floor=floor)
    return (
        f"""SELECT i.prefix, i.key, {VALUE} AS value, i.created_at, {UPDATED} AS updated_at,
               i.ttl_minutes,
               {score} AS score
        FROM langmem_items i {join}
        WHERE i.user_id = %(user_id)s AND {ns_sql} AND {live_sql} AND {f_sql} AND {match}
        ORDER BY {_HISTORY_LAST}, score DESC NULLS LAST, {UPDATED} DESC, i.prefix, i.key
        LIMIT %(limit)s OFFSET %(offset)s""",
        merge(near_params, {"user_id": user_id, "limit": limit, "offset": offset},
              ns_params, live_params, f_params, match_params),
    )


def list_prefixes(
    user_id: str | None, literal_prefix: str, now: datetime, *, omit_expired: bool = True
) -> Sql:
    """Distinct namespaces, optionally within one tenant and under a literal prefix; of
    live items only unless ``omit_expired=False``.

    Wildcards, suffixes and depth are applied by the caller on the (small) result.
    """
    live_sql, live_params = _live(now, omit_expired)
    clauses = [live_sql]
    params: Params = dict(live_params)
    if user_id is not None:
        clauses.append("i.user_id = %(user_id)s")
        params["user_id"] = user_id
    if literal_prefix:
        ns_sql, ns_params = prefix_condition(literal_prefix)
        clauses.append(ns_sql)
        params = merge(params, ns_params)
    return (
        f"SELECT DISTINCT i.prefix FROM langmem_items i WHERE {' AND '.join(clauses)}",
        params,
    )


def expired_users(now: datetime) -> Sql:
    """Tenants that hold expired items. Reads user ids only; the sweep then runs per user."""
    return (
        "SELECT DISTINCT user_id FROM langmem_items "
        "WHERE expires_at IS NOT NULL AND expires_at <= %(now)s",
        {"now": now},
    )


def sweep_expired(user_id: str, now: datetime) -> Sql:
    """Delete one tenant's expired items (TTL sweep). Embeddings go by cascade."""
    return (
        "DELETE FROM langmem_items "
        "WHERE user_id = %(user_id)s AND expires_at IS NOT NULL AND expires_at <= %(now)s "
        "RETURNING key, is_memory",
        {"user_id": user_id, "now": now},
    )
