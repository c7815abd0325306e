"""SQL of recall's keyword strategy: Okapi BM25 over a user's memories, as CTEs.

Pieces of ``langmem_layer.sql.candidates``'s one statement (its ``kw`` CTE and what it
reads), kept apart so that the statement's builder reads as the list of strategies.
Each piece binds ``user_id`` through the eligibility condition the builder passes, or
through ``langmem_terms``' user and the owner's function for a large user.
"""

from __future__ import annotations

__all__ = ["LARGE_BM25", "SMALL_MATCH", "TSQ", "small_bm25"]


# Pieces shared by both paths. The query's lexemes:
KW_Q = """kw_q AS (
            SELECT DISTINCT q.lexeme FROM unnest(to_tsvector('english', %(qt)s)) q
        )"""
# Term frequency and length of each scored memory (kw_docs) for the query's lexemes:
# (materialized, the lexemes as one array: each memory's tsvector is unnested once
# whatever row counts a generic plan guesses)
KW_TERMS = """kw_terms AS MATERIALIZED (
            SELECT d.prefix, d.key, u.lexeme,
                   coalesce(cardinality(u.positions), 1)::float8 AS tf,
                   length(d.tsv)::float8 AS dl
            FROM kw_docs d CROSS JOIN LATERAL unnest(d.tsv) AS u(lexeme, positions, weights)
            WHERE u.lexeme = ANY(ARRAY(SELECT lexeme FROM kw_q))
        )"""
# Okapi BM25 over kw_terms with df from kw_df and N from n_items. Scores are rounded
# before ranking: a float sum's last bits depend on the order the plan adds the
# terms, and equal scores must tie (broken by key) whatever the plan.
KW_RANK = """kw_len AS (SELECT greatest(avg(length(tsv)), 1)::float8 AS avgdl FROM kw_docs),
        kw AS (
            SELECT t.prefix, t.key,
                   row_number() OVER (ORDER BY round(sum(
                       ln(1 + (greatest(n.n - f.df, 0) + 0.5) / (f.df + 0.5))
                       * t.tf * (%(k1)s + 1)
                       / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * t.dl / l.avgdl)))::numeric, 9)
                       DESC, t.key) - 1 AS rnk
            FROM kw_terms t JOIN kw_df f ON f.lexeme = t.lexeme, kw_len l, n_items n
            GROUP BY t.prefix, t.key
            ORDER BY rnk
            LIMIT %(n)s
        )"""
# The query's terms OR-ed: a memory sharing any content word is a candidate.
TSQ = """tsq AS (
            SELECT replace(plainto_tsquery('english', %(qt)s)::text, '&', '|') AS q
        )"""
# A small user's memories are matched one by one: ts_match_vq is @@ in a form the
# shared full-text index cannot serve. Through that index, a query's common terms
# match across every user of the store (66k rows at 1M memories, 11 ms) before the
# user's few are kept; a small user has at most ANN_MIN_USER_VECTORS memories to test.
# The query is a scalar subquery so that it is built once, not once per memory.
SMALL_MATCH = "ts_match_vq(i.tsv, (SELECT nullif(q, '')::tsquery FROM tsq))"


def small_bm25(eligible: str) -> list[str]:
    """A small user: every matching memory that is ``eligible`` (a condition on
    ``langmem_items i`` binding the user) is scored, df counted among them."""
    return [
        TSQ,
        KW_Q,
        """kw_docs AS (
            SELECT i.prefix, i.key, i.tsv
            FROM langmem_items i
            WHERE """ + SMALL_MATCH + " AND " + eligible + """
        )""",
        KW_TERMS,
        "kw_df AS (SELECT lexeme, count(*)::float8 AS df FROM kw_terms GROUP BY lexeme)",
        KW_RANK,
    ]


#: A user with an index of their own (see ``recall.KW_DOC_BUDGET``): df and N read
#: from langmem_terms, the memories of the rarest terms scored, from the user's own
#: GIN index.
LARGE_BM25 = (
    KW_Q,
    """kw_df AS (
            SELECT q.lexeme, coalesce(sum(t.df), 0)::float8 AS df
            FROM kw_q q LEFT JOIN langmem_terms t
              ON t.user_id = %(user_id)s AND t.prefix = ANY(%(prefixes)s::text[])
             -- the ANY() lets the planner probe the primary key per lexeme
             AND t.lexeme = ANY(ARRAY(SELECT lexeme FROM kw_q)) AND t.lexeme = q.lexeme
            GROUP BY q.lexeme
        ),
        kw_pick AS (
            SELECT lexeme FROM (
                SELECT lexeme, sum(df) OVER (ORDER BY df, lexeme) AS upto,
                       row_number() OVER (ORDER BY df, lexeme) AS nth
                FROM kw_df WHERE df > 0
            ) r WHERE upto <= %(kw_budget)s OR nth = 1
        ),
        kw_docs AS (
            -- planned per call (EXECUTE): a cached generic plan may AND the shared
            -- full-text index with the user's whole scope instead of using theirs
            SELECT m.prefix, m.key, m.tsv
            FROM langmem_user_matches(
                %(user_id)s,
                (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM kw_pick),
                %(prefixes)s::text[], %(statuses)s::text[], %(now)s, %(kw_budget)s) m
        )""",
    KW_TERMS,
    KW_RANK,
)
