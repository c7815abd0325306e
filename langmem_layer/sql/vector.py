"""SQL for nearest-neighbour search inside one user's vectors, exact or per-user HNSW.

A small user's vectors are scanned exactly (the user's rows are found by the primary
key, then sorted by distance): every result is correct and ``limit`` results come back
whenever that many exist. A user with many vectors gets an HNSW index of their own, a
partial index ``WHERE user_id = … AND model_id = …``; the search then walks only that
user's graph, so no result is lost to filtering after the scan (the failure of one
shared index filtered by namespace afterwards). Identifiers and literals of the index
DDL are composed with ``psycopg.sql``; everything else travels as parameters.

Vector types: vectors are always stored single precision (``vector``). A store whose
``ann_index_config`` asks for ``halfvec`` builds its users' HNSW indexes over
``embedding::halfvec(dims)``, so each index holds half-precision copies (half its size),
and walks them with the same cast. The heap keeps single precision because the index is
what an HNSW walk must keep in memory (it reads graph pages at random; the heap only for
the rows returned), while a separate ``halfvec`` column would make every other reader of
the table (exact scans, recall, export) choose a column per store, and a store switching
vector type would have to re-embed instead of re-index. Exact scans of small users stay
single precision (and byte-identical to a ``vector`` store's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import sql

from langmem_layer.sql import Ddl, Sql, merge

__all__ = [
    "create_user_index",
    "large_users",
    "nearest",
    "prepare_search",
    "record_user_index",
    "search_settings",
    "user_walk",
    "vector_literal",
]


#: hnsw.ef_search floor for per-user indexes: recall >= 0.95 at 100k vectors (measured).
ANN_EF_SEARCH = 100
#: HNSW graph parameters of per-user indexes (pgvector defaults).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64

#: A search's score per distance type, ``{}`` standing for the vector column and the
#: query; higher is better. LangGraph's PostgresStore scores alike: cosine similarity,
#: minus the Euclidean distance, and the dot product (pgvector's ``<#>`` is its negative).
SCORES = {
    "cosine": "1 - ({} <=> {})",
    "l2": "-({} <-> {})",
    "inner_product": "-({} <#> {})",
}


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form. Text keeps the driver free of per-connection type setup.

    Nine significant digits: pgvector stores float32, which they round-trip exactly,
    and they format in half the time of ``repr`` (formatting dominated bulk puts).
    """
    return "[" + ",".join(map("{:.9g}".format, vector)) + "]"


def index_name(user_id: str, model_id: str, vector_type: str = "vector") -> str:
    """A stable, short, identifier-safe name for a user's index.

    A ``halfvec`` index is named apart, so building one never mistakes a single-precision
    index of the same user (``CREATE INDEX IF NOT EXISTS``) for it.
    """
    seed = f"{user_id}\x00{model_id}" + ("" if vector_type == "vector" else f"\x00{vector_type}")
    digest = hashlib.sha256(seed.encode()).hexdigest()[:20]
    return f"langmem_emb_hnsw_{digest}"


def prepare_search(
    user_id: str, model_id: str, *, ef_search: int = ANN_EF_SEARCH, vector_type: str = "vector"
) -> Sql:
    """One row: the dims of the user's ANN index (NULL: search exactly).

    A ``halfvec`` store counts only an index of its own type: walking the cast of
    another's would scan the user's vectors without an index.

    For a user without an index of their own, the rest of the transaction also switches
    to generic plans, which saves the milliseconds recall's CTEs take to plan on every
    turn: a small user's rows are reached through the (user_id, ...) indexes whatever
    the plan, and the statements parse the query vector and text once (scalar
    subqueries), so a generic plan runs as fast as a custom one. A user with an index
    of their own keeps PostgreSQL's choice: a generic plan estimates ``user_id = $1`` as
    the average user, and with a 200k-memory user among 2,000 users of 200 a turn's
    read took p95 167 ms that way against 16 ms planned for the user. HNSW walks in the
    transaction use ``ef_search`` (clamped to pgvector's 1..1000) and, past it,
    pgvector's iterative scan.
    """
    # Each setting's value for an indexed user and for one without, from one table.
    indexed, small = (dict(search_settings(indexed=i, ef_search=ef_search)) for i in (True, False))
    own = ("WHERE user_id = %(user_id)s AND model_id = %(model_id)s"
           + ("" if vector_type == "vector" else " AND vector_type = %(vector_type)s"))
    values = ",\n".join(
        f"set_config(%(name{n})s, CASE WHEN d.dims IS NULL THEN %(small{n})s"
        f" ELSE %(indexed{n})s END, true) AS s{n}" for n in range(len(indexed)))
    params: dict[str, Any] = {"user_id": user_id, "model_id": model_id,
                              "vector_type": vector_type}
    for n, name in enumerate(indexed):
        params.update({f"name{n}": name, f"small{n}": small[name],
                       f"indexed{n}": indexed[name]})
    return (
        f"""SELECT d.dims, {values}
        FROM (SELECT (SELECT dims FROM langmem_vector_indexes {own}) AS dims) d""",
        params,
    )


def search_settings(*, indexed: bool,
                    ef_search: int = ANN_EF_SEARCH) -> tuple[tuple[str, str], ...]:
    """The settings ``prepare_search`` gives recall's transaction, as name/value pairs
    (for a server where a statement runs elsewhere than that transaction's settings:
    ``citus.on_shard``): generic plans only for a user without an index of their own,
    and the HNSW walk's depth (clamped to pgvector's 1..1000) and, past it, pgvector's
    iterative scan."""
    return (("plan_cache_mode", "auto" if indexed else "force_generic_plan"),
            ("hnsw.ef_search", str(min(max(ef_search, 1), 1000))),
            ("hnsw.iterative_scan", "relaxed_order"))


def user_walk(user_id: str, model_id: str, dims: int, vector_type: str = "vector") -> str:
    """A SELECT of the user's nearest vectors through their own HNSW index, for recall.

    Rows (prefix, key, sim), best first; named parameters ``qv`` (the query vector as
    text) and ``ann_n`` (how many). The user and model are quoted literals: the index is
    partial (see ``create_user_index``), and a plan can use a partial index only when
    the query names the same constants. The statement text is then one per large user,
    so its generic plan is cached per user and nothing is planned per turn.
    ``vector_type`` is the index's (the cast must match its expression).
    """
    vec = f"{_vector_type(vector_type)}({int(dims)})"
    # '%' doubled: the text goes through psycopg's %(name)s placeholders.
    user, model = (sql.Literal(v).as_string(None).replace("%", "%%")
                   for v in (user_id, model_id))
    # (SELECT ...): the text is parsed into a vector once, not again for every row.
    qv = f"(SELECT %(qv)s::{vec})"
    return f"""SELECT e.prefix, e.key, 1 - (e.embedding::{vec} <=> {qv}) AS sim
                FROM langmem_embeddings e
                WHERE e.user_id = {user} AND e.model_id = {model}
                ORDER BY e.embedding::{vec} <=> {qv}
                LIMIT %(ann_n)s"""


def nearest(
    user_id: str,
    model_id: str,
    query_vector: Sequence[float],
    *,
    prefix_sql: Sql,
    prefix_args: tuple[str | None, str | None] = (None, None),
    limit: int | None,
    indexed_dims: int | None,
    distance: str = "cosine",
    vector_type: str = "vector",
) -> Sql:
    """The user's ``limit`` nearest items: rows (prefix, key, sim), best first.

    Args:
        prefix_sql: A condition on ``e.prefix`` (which namespaces count) and its params,
            for the exact search.
        prefix_args: The same condition as (namespace, LIKE pattern) for the indexed
            search, which runs inside a SQL function; (None, None) for every namespace.
        limit: How many; ``None`` scores every vector of the user (exact search only),
            for callers that filter afterwards and must still fill their limit.
        indexed_dims: The dimensions of the user's HNSW index, or None for exact search.
        distance: A key of ``SCORES``; the HNSW index (built for cosine) serves
            ``"cosine"`` only, so other distances need ``indexed_dims=None``.
        vector_type: The HNSW index's vector type; the exact search reads the stored
            single-precision vectors whatever it is.
    """
    p_sql, p_params = prefix_sql
    if indexed_dims is None:
        cut = "" if limit is None else "LIMIT %(near_limit)s"
        # (SELECT ...): the text is parsed into a vector once, not again for every row
        # (a generic plan would parse it per row).
        score = SCORES[distance].format("e.embedding", "(SELECT %(query_vector)s::vector)")
        return (
            f"""SELECT e.prefix, e.key, max({score}) AS sim
            FROM langmem_embeddings e
            WHERE e.user_id = %(user_id)s AND e.model_id = %(model_id)s AND {p_sql}
            GROUP BY e.prefix, e.key
            ORDER BY sim DESC, e.key
            {cut}""",
            merge({"query_vector": vector_literal(query_vector), "user_id": user_id,
                   "model_id": model_id},
                  p_params, {} if limit is None else {"near_limit": limit}),
        )
    if limit is None:
        raise ValueError("an HNSW search needs a limit")
    if distance != "cosine":
        raise ValueError("the per-user HNSW indexes serve cosine search only")
    # The user's own HNSW graph, walked inside langmem_user_nearest (migration 8), or
    # its halfvec twin.
    prefix, like = prefix_args
    vec = vector_literal(query_vector)
    fn = "langmem_user_nearest" + ("" if _vector_type(vector_type) == "vector" else "_halfvec")
    return (
        f"""SELECT prefix, key, max(sim) AS sim
        FROM {fn}(%(user_id)s, %(model_id)s, %(dims)s, %(query_vector)s, %(ns)s,
                  %(ns_below)s, %(fetch)s, %(ef_search)s)
        GROUP BY prefix, key
        ORDER BY sim DESC, key
        LIMIT %(near_limit)s""",
        # Over-fetch: an item may carry several vectors (fields), collapsed by max().
        {"user_id": user_id, "model_id": model_id, "dims": int(indexed_dims),
         "query_vector": vec, "ns": prefix, "ns_below": like, "fetch": 2 * limit,
         "ef_search": max(ANN_EF_SEARCH, 2 * limit), "near_limit": limit},
    )


def keyword_index_name(user_id: str, model_id: str, vector_type: str = "vector") -> str:
    """The name of the user's full-text index, made with their HNSW index."""
    return index_name(user_id, model_id, vector_type) + "_kw"


def large_users(model_id: str, threshold: int, vector_type: str = "vector") -> Sql:
    """Users with at least ``threshold`` vectors of a model and no indexes yet (or an HNSW
    index made before the keyword one existed); for a ``halfvec`` store, also users whose
    index is of another type."""
    if vector_type != "vector":
        return (
            """SELECT e.user_id, count(*) AS vectors FROM langmem_embeddings e
            WHERE e.model_id = %(model_id)s
              AND NOT EXISTS (SELECT 1 FROM langmem_vector_indexes x
                              WHERE x.user_id = e.user_id AND x.model_id = e.model_id
                                AND x.vector_type = %(vector_type)s
                                AND to_regclass(quote_ident(x.index_name || '_kw'))
                                    IS NOT NULL)
            GROUP BY e.user_id HAVING count(*) >= %(threshold)s
            ORDER BY count(*) DESC""",
            {"model_id": model_id, "vector_type": vector_type, "threshold": threshold},
        )
    return (
        """SELECT e.user_id, count(*) AS vectors FROM langmem_embeddings e
        WHERE e.model_id = %(model_id)s
          AND NOT EXISTS (SELECT 1 FROM langmem_vector_indexes x
                          WHERE x.user_id = e.user_id AND x.model_id = e.model_id
                            AND to_regclass(quote_ident(x.index_name || '_kw')) IS NOT NULL)
        GROUP BY e.user_id HAVING count(*) >= %(threshold)s
        ORDER BY count(*) DESC""",
        {"model_id": model_id, "threshold": threshold},
    )


def create_user_index(
    user_id: str,
    model_id: str,
    dims: int,
    *,
    m: int = HNSW_M,
    ef_construction: int = HNSW_EF_CONSTRUCTION,
    vector_type: str = "vector",
) -> Ddl:
    """``CREATE INDEX`` of one user's HNSW graph (idempotent).

    ``m``, ``ef_construction`` and ``vector_type`` come from the store's
    ``ann_index_config`` (validated there); an index already built keeps the parameters
    it was built with. The graph is cosine (``vector_cosine_ops`` /
    ``halfvec_cosine_ops``): recall ranks by cosine whatever the store's
    ``distance_type``, and ``l2`` / ``inner_product`` searches scan exactly.
    """
    vtype = _vector_type(vector_type)
    query = sql.SQL(
        """CREATE INDEX IF NOT EXISTS {name} ON langmem_embeddings
        USING hnsw ((embedding::{vtype}({dims})) {opclass})
        WITH (m = {m}, ef_construction = {efc})
        WHERE user_id = {user} AND model_id = {model}"""
    ).format(
        name=sql.Identifier(index_name(user_id, model_id, vtype)),
        vtype=sql.SQL(vtype),
        opclass=sql.SQL(f"{vtype}_cosine_ops"),
        dims=sql.SQL(str(int(dims))),
        m=sql.SQL(str(int(m))),
        efc=sql.SQL(str(int(ef_construction))),
        user=sql.Literal(user_id),
        model=sql.Literal(model_id),
    )
    # No parameters (None, not []): psycopg then reads no '%' in the user id as one.
    return query, None


def create_user_keyword_index(user_id: str, model_id: str, vector_type: str = "vector") -> Ddl:
    """``CREATE INDEX`` of one user's own GIN over full text (idempotent): a large user's
    keyword search reads only their posting lists (``langmem_user_matches``).

    Without a pending list (``fastupdate = off``): every search would otherwise scan
    the list of recent entries, which reinforcement (an update per returned memory)
    keeps full, for milliseconds per turn. Writes go to the posting lists instead.
    """
    query = sql.SQL(
        """CREATE INDEX IF NOT EXISTS {name} ON langmem_items USING gin (tsv)
        WITH (fastupdate = off) WHERE user_id = {user} AND is_memory"""
    ).format(name=sql.Identifier(keyword_index_name(user_id, model_id, vector_type)),
             user=sql.Literal(user_id))
    return query, None  # see create_user_index


def record_user_index(
    user_id: str, model_id: str, dims: int, now: datetime, vector_type: str = "vector"
) -> Sql:
    """Remember that the user's index exists.

    A ``halfvec`` index replaces the record of an index of another type (the store has
    switched type; the old index is left for the operator to drop).
    """
    if vector_type != "vector":
        return (
            """INSERT INTO langmem_vector_indexes
                (user_id, model_id, dims, index_name, created_at, vector_type)
            VALUES (%(user_id)s, %(model_id)s, %(dims)s, %(index_name)s, %(now)s,
                    %(vector_type)s)
            ON CONFLICT (user_id, model_id) DO UPDATE
            SET dims = EXCLUDED.dims, index_name = EXCLUDED.index_name,
                created_at = EXCLUDED.created_at, vector_type = EXCLUDED.vector_type
            WHERE langmem_vector_indexes.vector_type <> EXCLUDED.vector_type""",
            {"user_id": user_id, "model_id": model_id, "dims": dims,
             "index_name": index_name(user_id, model_id, vector_type), "now": now,
             "vector_type": vector_type},
        )
    return (
        """INSERT INTO langmem_vector_indexes (user_id, model_id, dims, index_name, created_at)
        VALUES (%(user_id)s, %(model_id)s, %(dims)s, %(index_name)s, %(now)s)
        ON CONFLICT DO NOTHING""",
        {"user_id": user_id, "model_id": model_id, "dims": dims,
         "index_name": index_name(user_id, model_id), "now": now},
    )


def _vector_type(vector_type: str) -> str:
    # Interpolated into SQL text: only pgvector's names pass.
    if vector_type not in ("vector", "halfvec"):
        raise ValueError(f"unsupported vector type {vector_type!r}")
    return vector_type
