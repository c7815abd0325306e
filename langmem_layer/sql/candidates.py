"""SQL of recall: the candidates of every retrieval strategy in one round trip.

The builder returns ``(sql, params)`` with named parameters and does no I/O. Every
strategy binds ``user_id`` and the caller's scopes (namespaces) and statuses.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langmem_layer.sql import Sql
from langmem_layer.sql.bm25 import LARGE_BM25, SMALL_MATCH, TSQ, small_bm25
from langmem_layer.sql.dating import DATED_PARAMS, dated_sql
from langmem_layer.sql.generic_items import VALUE
from langmem_layer.sql.moved import STATUS, UPDATED, open_loop
from langmem_layer.sql.sources import RECALL_SOURCES
from langmem_layer.sql.vector import user_walk, vector_literal
from langmem_layer.types import utc_iso

__all__ = [
    "KW_DOC_BUDGET", "MAX_QUERY_TERMS", "RECALL_SOURCES", "ROW", "ann_depth", "cap_terms",
    "recall_candidates",
]


_ELIGIBLE = f"""i.user_id = %(user_id)s AND i.prefix = ANY(%(prefixes)s::text[]) AND i.is_memory
          AND {STATUS} = ANY(%(statuses)s::text[])
          AND (i.expires_at IS NULL OR i.expires_at > %(now)s)"""


#: The strategies' CTE names, which prefix their rank columns (see ``sources``).
_COLUMNS = tuple(s.column for s in RECALL_SOURCES)
#: ``recall_candidates``' columns and types, in order (its call on Citus: ``citus.on_shard``).
ROW = ", ".join(["prefix text, key text, value jsonb, created_at timestamptz, updated_at "
                 "timestamptz, similarity float8", *(f"{c}_rank bigint" for c in _COLUMNS),
                 "cand_prefix text, linked text[]"])
#: BM25 parameters of the keyword strategy (Robertson & Zaragoza's usual values).
BM25_K1, BM25_B = 1.2, 0.75
#: The per-user HNSW walk returns this many times ``per_source`` neighbours, so that
#: memories filtered out afterwards (other scopes, inactive, expired) leave enough.
ANN_OVERFETCH = 1.5


def ann_depth(per_source: int) -> int:
    """How many neighbours recall's HNSW walk returns, and its ``hnsw.ef_search``.

    The walk feeds one RRF list, not a final top-k, so it searches no deeper than it
    returns. Measured at 100k vectors of one user (``benchmarks/read_path_bench.py`` data,
    40 queries): ef_search 45 keeps 0.943 of the exact top 30 among its 45, against 0.975
    at the 100 store searches use (``ANN_EF_SEARCH``), in 0.6x the time; pgvector's
    iterative scan still fills the list when filters drop rows.
    """
    return math.ceil(ANN_OVERFETCH * per_source)


#: For a large user, BM25 scores at most this many memories: those holding the query's
#: rarest terms (by the document frequencies in ``langmem_terms``), taken rarest first
#: while their summed frequency fits. A memory sharing only common terms with the query
#: scores little under BM25 anyway; vector search still sees it. On LoCoMo forced onto
#: this path (``benchmarks/locomo_retrieval.py --large-path``), recall@10 is 0.724 at
#: 200, 0.723 at 100, 0.720 at 50; at 100k memories 100 saves ~1 ms a turn over 200.
KW_DOC_BUDGET = 100
#: The full-text search ORs at most this many distinct words of the query (the default
#: of ``MemorySettings.max_query_terms``). PostgreSQL parses an OR of N terms into a tree
#: N deep: from about 17k distinct words the tsquery exceeds its stack depth and the
#: whole recall fails. No ordinary question has 128 distinct words; each term costs an
#: index probe and a match per memory, and past this many BM25 no longer discriminates.
MAX_QUERY_TERMS = 128
_WORD = re.compile(r"\w+")


def cap_terms(text: str, max_terms: int = MAX_QUERY_TERMS) -> str:
    """``text``, or when it has more than ``max_terms`` words, its distinct words (at most
    ``max_terms``, the longest, the first seen among equals) in the order they first occur.

    Longer words are rarer (and stop words short), so they are the ones BM25 weighs
    most; the vector search still embeds the whole message.
    """
    words = _WORD.findall(text)
    if len(words) <= max_terms:
        return text
    # Repeated words add nothing to the query's lexemes but size: a 3 MB message of a
    # few words repeated made a tsquery over PostgreSQL's 1 MB limit.
    firsts = {w.lower(): n for n, w in reversed(list(enumerate(words)))}  # first seen
    keep = sorted(firsts, key=lambda w: (-len(w), firsts[w]))[:max_terms]
    return " ".join(words[firsts[w]] for w in sorted(keep, key=firsts.__getitem__))


#: A reference carried by more than this many memories, and by more than
#: ``ref_max_share`` of the user's memories, does not discriminate (like a stop word).
REF_MIN_CAP = 10


def _by_similarity(name: str, scored: str, limit: str) -> str:
    """CTE ``name``: the rows of ``scored`` (``prefix, key, sim``, best first) ranked by
    similarity, each probed for eligibility in that order until ``%(limit)s`` are.

    Each candidate's eligibility is one probe of its row by key. The key alone is
    fenced off (OFFSET 0 keeps the filters out of the subquery): without it, on tables
    never analysed (a new database's first minute, before autovacuum), the planner may
    take the partial index of the user's memories, which the filters match too, and
    scan all of them for every candidate.
    """
    return f"""{name} AS (
            SELECT s.prefix, s.key, row_number() OVER (ORDER BY s.sim DESC, s.key) - 1 AS rnk
            FROM (
                SELECT s.prefix, s.key, s.sim
                FROM ({scored}) s
                CROSS JOIN LATERAL (
                    SELECT 1 FROM (
                        SELECT * FROM langmem_items i
                        WHERE i.user_id = %(user_id)s AND i.prefix = s.prefix
                          AND i.key = s.key
                        OFFSET 0) i
                    WHERE {_ELIGIBLE}
                    LIMIT 1) ok
                ORDER BY s.sim DESC, s.key
                LIMIT %({limit})s
            ) s
        )"""


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
    keyword: str = "bm25",
    window: tuple[datetime, datetime] | None = None,
    link_types: Sequence[str] = (),
    link_seeds: int = 10,
    seed_min_similarity: float | None = None,
    open_questions: int = 0,
    ref_max_share: float = 1.0,
    indexed_dims: int | None = None,
    due_window: tuple[datetime, datetime] | None = None,
    due_limit: int = 0,
    standing_limit: int = 0,
    max_terms: int = MAX_QUERY_TERMS,
    vector_type: str = "vector",
    owner_reads: bool = True,
    context_limit: int = 0,
    context_floor: float = -1.0,
) -> Sql:
    """Candidates from every retrieval strategy in one round trip.

    Strategies (each a CTE giving ``prefix, key, rnk``, the 0-based rank in its list):

    * ``vec``: vector similarity (exact cosine over the user's vectors; ``sims`` holds
      the similarity of every scored memory);
    * ``kw``: full-text, any query term (at most ``max_terms`` of them, see
      ``cap_terms``). ``keyword="bm25"`` ranks by Okapi BM25 over
      the user's memories (term frequency from the tsvector positions, document
      frequency among the matching memories, ``N`` the user's item count, length
      normalised by the matching memories' mean length), so a term most memories
      share (a name said in every turn) weighs little. For a large user (one with
      ``indexed_dims``), df and N come from ``langmem_terms`` and only the memories
      holding the query's rarest terms are scored (``KW_DOC_BUDGET``).
      ``"cover_density"`` ranks by ``ts_rank_cd`` as before;
    * ``rf``: exact reference match (the per-user GIN of migration 11), ranked by the summed
      rarity ``ln(1 + N / df)`` of the references matched, then by similarity; a
      reference carried by more than ``ref_max_share`` of the user's memories (and
      by more than ``REF_MIN_CAP`` of them) is ignored;
    * ``tw``: memories whose ``occurred_at`` lies in ``window`` ([start, end)), ranked
      by similarity (then newest first) and, in turn, the most similar of those dating
      something (``sql.dating``); for a large user, among the window's newest
      ``KW_DOC_BUDGET``;
    * ``cx``: the ``context_limit`` memories whose context vectors (the memory with
      those before it in its thread; ``store/ops/context.py``) are most like the query,
      each at least ``context_floor`` like it, for a user without an HNSW index of
      their own;
    * ``lk``: one hop over ``link_types`` links, in both directions, from the seeds —
      the top ``link_seeds`` of ``vec`` (only those with similarity of at least
      ``seed_min_similarity``), ``kw`` and ``rf`` — ranked by their best seed's rank;
    * ``oq``: up to ``open_questions`` open loops (not closed) whose references overlap
      the references of the seeds or ``refs``, ranked by overlap;
    * ``du``: up to ``due_limit`` open loops (not closed) whose due date lies in
      ``due_window`` ([start, end]), whatever the query, soonest due first, from the
      partial index on due dates (migration of the lifecycle);
    * ``sp``: up to ``standing_limit`` preferences with policy ``adapt`` (how to answer),
      whatever the query, most salient first, from their partial index;
    * ``pin``: pinned memories.

    Only memories of the user, in ``prefixes``, with a status in ``statuses`` and not
    expired are ever returned. Each row carries its rank per strategy (``<cte>_rank``,
    NULL where that strategy did not find it) and its cosine similarity when known, so
    fusion and ranking happen in Python over the union. ``vector_type`` is that of
    the user's HNSW index (``indexed_dims``); the exact scan reads single precision.
    ``owner_reads``: the store acts as the row-level-security role, so a small user's
    reference matches are read as the owner too (``langmem_ref_matches``), where the
    shared refs index serves under the policies.
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
    has_vec = query_vector is not None
    has_kw = bool(query_text and query_text.strip())
    large = indexed_dims is not None
    if has_vec or has_kw or refs:
        # BM25's and the reference rarity's N: a small user's memories are counted, a
        # large user's come from the '' row of the trigger-kept langmem_terms.
        ctes.append(
            """n_items AS (
            SELECT greatest(coalesce(sum(df), 0), 1)::float8 AS n FROM langmem_terms
            WHERE user_id = %(user_id)s AND prefix = ANY(%(prefixes)s::text[]) AND lexeme = ''
        )"""
            if large
            else """n_items AS (
            SELECT greatest(count(*), 1)::float8 AS n FROM langmem_items
            WHERE user_id = %(user_id)s AND prefix = ANY(%(prefixes)s::text[])
        )"""
        )
    if has_vec:
        assert query_vector is not None
        params.update(qv=vector_literal(query_vector), model_id=model_id)
        if indexed_dims is None:  # exact: every vector of the user, in these scopes
            sims = """sims AS (
            SELECT e.prefix, e.key, max(1 - (e.embedding <=> (SELECT %(qv)s::vector))) AS sim
            FROM langmem_embeddings e
            WHERE e.user_id = %(user_id)s AND e.model_id = %(model_id)s
              AND e.prefix = ANY(%(prefixes)s::text[])
            GROUP BY e.prefix, e.key
        ),"""
        else:  # the user's own HNSW graph (sql/vector.py); over-fetch for the filters
            params["ann_n"] = ann_depth(per_source)
            sims = f"""sims AS (
            SELECT n.prefix, n.key, max(n.sim) AS sim FROM (
                {user_walk(user_id, model_id or "", indexed_dims, vector_type)}
            ) n
            WHERE n.prefix = ANY(%(prefixes)s::text[])
            GROUP BY n.prefix, n.key
        ),"""
        ctes.append(sims + "\n        " + _by_similarity(
            "vec", "SELECT * FROM sims ORDER BY sim DESC, key", "n"))
        sources.append("vec")
    if has_kw:
        params["qt"] = cap_terms(query_text or "", max_terms)
        if keyword == "bm25":
            params.update(k1=BM25_K1, b=BM25_B, kw_budget=KW_DOC_BUDGET)
            ctes.extend(LARGE_BM25 if large else small_bm25(_ELIGIBLE))
        else:
            ctes.append(
                TSQ
                + """,
        kw AS (
            SELECT i.prefix, i.key,
                   row_number() OVER (ORDER BY ts_rank_cd(i.tsv, t.q::tsquery) DESC, i.key) - 1
                       AS rnk
            FROM langmem_items i, tsq t
            WHERE """
                + ("t.q <> '' AND i.tsv @@ t.q::tsquery" if large else SMALL_MATCH)
                + " AND "
                + _ELIGIBLE
                + """
            ORDER BY rnk
            LIMIT %(n)s
        )"""
            )
        sources.append("kw")
    sim_of = "max(s.sim)" if has_vec else "NULL::float8"
    sim_join = "LEFT JOIN sims s ON s.prefix = h.prefix AND s.key = h.key" if has_vec else ""
    if refs:
        params.update(refs=list(refs), ref_share=ref_max_share, ref_cap=REF_MIN_CAP)
        # the lookup keys in the index's own form ('user.ref'), made by the same function
        user_refs = "langmem_user_refs(%(user_id)s, to_jsonb(%(refs)s::text[]))"
        # As the owner (a function) under the role: the overlap (``&&``) is not
        # leakproof, so behind the policy no refs index serves (docs/isolation.md).
        # Without the role a small user's match is read in place, cheaper.
        matches = "langmem_user_ref_matches" if large else "langmem_ref_matches"
        if large or owner_reads:
            hits = f"""rf_hits AS (
            SELECT m.prefix, m.key, r.ref
            FROM {matches}(%(user_id)s, {user_refs}, %(prefixes)s::text[],
                           %(statuses)s::text[], %(now)s) m
            CROSS JOIN LATERAL jsonb_array_elements_text(m.refs) AS r(ref)
            WHERE r.ref = ANY(%(refs)s::text[])"""
        else:
            hits = f"""rf_hits AS (
            SELECT i.prefix, i.key, r.ref
            FROM langmem_items i
            CROSS JOIN LATERAL jsonb_array_elements_text(i.value -> 'refs') AS r(ref)
            WHERE langmem_user_refs(i.user_id, i.value -> 'refs') && {user_refs}
              AND r.ref = ANY(%(refs)s::text[]) AND """ + _ELIGIBLE
        ctes.append(
            hits
            + f"""
        ),
        rf_df AS (SELECT ref, count(*)::float8 AS df FROM rf_hits GROUP BY ref),
        rf AS (
            SELECT h.prefix, h.key,
                   row_number() OVER (ORDER BY round(sum(ln(1 + n.n / f.df))::numeric, 9) DESC,
                                               {sim_of} DESC NULLS LAST, h.key) - 1 AS rnk
            FROM rf_hits h JOIN rf_df f ON f.ref = h.ref CROSS JOIN n_items n
            {sim_join}
            WHERE f.df <= greatest(%(ref_cap)s, %(ref_share)s * n.n)
            GROUP BY h.prefix, h.key
            ORDER BY rnk
            LIMIT %(n)s
        )"""
        )
        sources.append("rf")
    if window is not None:
        params.update(w_start=utc_iso(window[0]), w_end=utc_iso(window[1]))
        tw_sim = "s.sim" if has_vec else "NULL::float8"
        tw_join = "LEFT JOIN sims s ON s.prefix = i.prefix AND s.key = i.key" if has_vec else ""
        in_window = (
            "i.value->>'occurred_at' >= %(w_start)s AND i.value->>'occurred_at' < %(w_end)s "
            "AND " + _ELIGIBLE
        )
        if large:  # the window's newest memories only, from the occurred_at index
            # (through the function, as the owner: see migration 30)
            params["tw_cap"] = KW_DOC_BUDGET
            rows = ("langmem_user_window(%(user_id)s, %(w_start)s, %(w_end)s,"
                    " %(prefixes)s::text[], %(statuses)s::text[], %(now)s, %(tw_cap)s) i")
            in_window = "true"
        else:
            rows = "langmem_items i"
        # The most similar, and in turn the most similar dating something (sql.dating, its
        # cues first): one dating an event in the period may share few words with the query.
        params.update(DATED_PARAMS)
        dated = dated_sql("i.value->>'content'")
        order = f"{tw_sim} DESC NULLS LAST, i.value->>'occurred_at' DESC, i.key"
        ctes.append(f"""tw AS (
            SELECT w.prefix, w.key, row_number() OVER (ORDER BY LEAST(w.r_sim, w.r_dated),
                                                       w.r_sim) - 1 AS rnk
            FROM (SELECT i.prefix, i.key, row_number() OVER (ORDER BY {order}) AS r_sim,
                         CASE WHEN {dated} THEN row_number() OVER (PARTITION BY {dated}
                                                   ORDER BY {order}) END AS r_dated
                  FROM {rows} {tw_join} WHERE {in_window}) w
            ORDER BY rnk LIMIT %(n)s)""")
        sources.append("tw")
    if has_vec and context_limit > 0 and not large:
        # Context vectors (store/ops/context.py), as vec's: ordered by similarity, each
        # probed for eligibility in that order until enough. Exact only: a large user's
        # would be a scan of all their vectors per turn, where theirs are walked by HNSW.
        params.update(n_cx=context_limit, cx_floor=context_floor)
        ctes.append(_by_similarity(
            "cx", """SELECT c.prefix, c.key, c.sim FROM (
                          SELECT v.prefix, v.key,
                                 1 - (v.embedding <=> (SELECT %(qv)s::vector)) AS sim
                          FROM langmem_context_vectors v
                          WHERE v.user_id = %(user_id)s AND v.model_id = %(model_id)s
                            AND v.prefix = ANY(%(prefixes)s::text[])) c
                      WHERE c.sim >= %(cx_floor)s
                      ORDER BY c.sim DESC, c.key""", "n_cx"))
        sources.append("cx")
    seeded = [s for s in ("vec", "kw", "rf") if s in sources]
    if seeded and (link_types or open_questions > 0):
        params.update(seeds=link_seeds, seed_sim=-2.0 if seed_min_similarity is None
                      else seed_min_similarity)
        parts = []
        for s in seeded:
            if s == "vec":
                parts.append(
                    "SELECT v.key, v.rnk FROM vec v JOIN sims s ON s.prefix = v.prefix "
                    "AND s.key = v.key WHERE v.rnk < %(seeds)s AND s.sim >= %(seed_sim)s")
            else:
                parts.append(f"SELECT key, rnk FROM {s} WHERE rnk < %(seeds)s")
        ctes.append(
            "seed_best AS (SELECT key, min(rnk) AS rnk FROM ("
            + " UNION ALL ".join(parts)
            + ") x GROUP BY key)"
        )
    if seeded and link_types:
        params["link_types"] = list(link_types)
        ctes.append(
            """lk_pairs AS (
            SELECT l.dst_key AS key, sb.rnk FROM seed_best sb
            JOIN langmem_links l ON l.user_id = %(user_id)s AND l.src_key = sb.key
                                AND l.link_type = ANY(%(link_types)s::text[])
            UNION ALL
            SELECT l.src_key AS key, sb.rnk FROM seed_best sb
            JOIN langmem_links l ON l.user_id = %(user_id)s AND l.dst_key = sb.key
                                AND l.link_type = ANY(%(link_types)s::text[])
        ),
        lk AS (
            SELECT i.prefix, i.key, row_number() OVER (ORDER BY min(p.rnk), i.key) - 1 AS rnk
            FROM lk_pairs p
            JOIN langmem_items i ON i.user_id = %(user_id)s AND i.key = p.key
            WHERE """
            + _ELIGIBLE
            + """
            GROUP BY i.prefix, i.key
            ORDER BY rnk
            LIMIT %(n)s
        )"""
        )
        sources.append("lk")
    if open_questions > 0 and (seeded or refs):
        params.update(oq_limit=open_questions, oq_refs=list(refs))
        seed_refs = (
            """SELECT r.ref FROM seed_best sb
                JOIN langmem_items si ON si.user_id = %(user_id)s AND si.key = sb.key
                CROSS JOIN LATERAL jsonb_array_elements_text(si.value -> 'refs') AS r(ref)
                UNION """
            if seeded
            else ""
        )
        not_seed = "AND i.key NOT IN (SELECT key FROM seed_best)" if seeded else ""
        ctes.append(
            f"""oq_refs AS (
            {seed_refs}SELECT unnest(%(oq_refs)s::text[]) AS ref
        ),
        oq AS (
            SELECT i.prefix, i.key,
                   row_number() OVER (ORDER BY count(*) DESC, max({UPDATED}) DESC, i.key) - 1
                       AS rnk
            FROM langmem_items i
            CROSS JOIN LATERAL jsonb_array_elements_text(i.value -> 'refs') AS r(ref)
            WHERE {open_loop()}
              AND r.ref IN (SELECT ref FROM oq_refs) {not_seed}
              AND """
            + _ELIGIBLE
            + """
            GROUP BY i.prefix, i.key
            ORDER BY rnk
            LIMIT %(oq_limit)s
        )"""
        )
        sources.append("oq")
    if due_window is not None and due_limit > 0:
        params.update(due_from=utc_iso(due_window[0]), due_to=utc_iso(due_window[1]),
                      due_limit=due_limit)
        # The open-loop conditions are the due index's predicate, word for word (and
        # the loop status a move wrote, checked at the row).
        ctes.append(
            f"""du AS (
            SELECT i.prefix, i.key,
                   row_number() OVER (ORDER BY i.value ->> 'due_at', i.key) - 1 AS rnk
            FROM langmem_items i
            WHERE {open_loop()}
              AND (i.value ->> 'due_at') IS NOT NULL
              AND (i.value ->> 'due_at') >= %(due_from)s AND (i.value ->> 'due_at') <= %(due_to)s
              AND """
            + _ELIGIBLE
            + """
            ORDER BY rnk
            LIMIT %(due_limit)s
        )"""
        )
        sources.append("du")
    if standing_limit > 0:
        params.update(standing_limit=standing_limit)
        # The conditions are the standing index's predicate, word for word.
        ctes.append(
            f"""sp AS (
            SELECT i.prefix, i.key,
                   row_number() OVER (ORDER BY (i.value ->> 'salience') DESC,
                                      {UPDATED} DESC, i.key) - 1 AS rnk
            FROM langmem_items i
            WHERE (i.value ->> 'kind') = 'preference' AND (i.value ->> 'policy') = 'adapt'
              AND """
            + _ELIGIBLE
            + """
            ORDER BY rnk
            LIMIT %(standing_limit)s
        )"""
        )
        sources.append("sp")
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
    # One hash aggregate over the tagged lists (rather than a join per list) gives each
    # candidate its rank in every list and its similarity; sims rows alone are not
    # candidates. The rows are then fetched by (user, key), the prefix compared behind
    # an OFFSET 0 fence: given the prefix too, a generic plan (large users) can pick
    # the (user_id, prefix) index and scan the user's whole scope once per candidate.
    parts = [f"SELECT {n} AS src, prefix, key, rnk, NULL::float8 AS sim FROM {s}"
             for n, s in enumerate(sources)]
    if has_vec:
        parts.append(f"SELECT {len(sources)}, prefix, key, NULL::bigint, sim FROM sims")
    rank_cols = ", ".join(
        f"min(rnk) FILTER (WHERE src = {sources.index(s)}) AS {s}_rank" if s in sources
        else f"NULL::bigint AS {s}_rank"
        for s in _COLUMNS
    )
    # Each candidate's links, read with it when the link walk ran: ranking spreads a
    # hit's score over those between candidates (it keeps only those), and a second
    # round trip for them is saved. Not filtered here: naming `cand` twice would make
    # PostgreSQL materialise it.
    linked = (
        """CASE WHEN EXISTS (SELECT 1 FROM lk) THEN (
                SELECT coalesce(array_agg(DISTINCT x.other), '{}'::text[]) FROM (
                    SELECT l.dst_key AS other FROM langmem_links l
                    WHERE l.user_id = %(user_id)s AND l.src_key = c.key
                      AND l.link_type = ANY(%(link_types)s::text[])
                    UNION ALL
                    SELECT l.src_key FROM langmem_links l
                    WHERE l.user_id = %(user_id)s AND l.dst_key = c.key
                      AND l.link_type = ANY(%(link_types)s::text[])
                ) x) END"""
        if "lk" in sources else "NULL::text[]"
    )
    sql = f"""WITH {", ".join(ctes)},
        cand AS (
            SELECT prefix, key, max(sim) AS similarity, {rank_cols}
            FROM ({" UNION ALL ".join(parts)}) x
            GROUP BY prefix, key
            HAVING bool_or(src < {len(sources)})
        )
        SELECT * FROM (
            SELECT i.prefix, i.key, {VALUE} AS value, i.created_at, {UPDATED} AS updated_at,
                   c.similarity,
                   {", ".join(f"c.{s}_rank" for s in _COLUMNS)}, c.prefix AS cand_prefix,
                   {linked} AS linked
            FROM cand c JOIN langmem_items i ON i.user_id = %(user_id)s AND i.key = c.key
            OFFSET 0
        ) r WHERE r.prefix = r.cand_prefix"""
    return sql, params


