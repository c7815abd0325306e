"""LangGraph's PostgresStore defects, reproduced next to our store on the same database.

Both stores run on the session's embedded PostgreSQL 18 + pgvector (PostgresStore keeps
its own ``store`` / ``store_vectors`` tables). For each defect the test asserts what
PostgresStore does on the installed LangGraph version, and that our store is correct:

1. Ordering filters ($gt/$gte/$lt/$lte) compare numbers as text in PostgresStore.
2. PostgresStore rejects $in/$nin and nested-dict filters, and silently matches nothing
   for $and/$or and dotted keys; its $ne drops items that lack the field.
3. A query search inside one user's namespace, with PostgresStore's default HNSW index,
   returns fewer than ``limit`` results (the ANN scan runs before the namespace filter);
   ours scans that user's vectors exactly and returns the true top ``limit``.
4. PostgresStore embeds search queries with ``embed_documents``; ours uses
   ``embed_query`` for queries and ``embed_documents`` for stored texts.

If a future LangGraph fixes one of these, the PostgresStore assertion fails with a
message saying so: update the test and the documentation that cites the defect.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.store.base import PutOp
from langgraph.store.postgres import PostgresStore

from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.ops import RecallOp
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings

SCORES = (2, 10, 9.5, 100)
FIXED = "If PostgresStore now gets this right, the defect is fixed upstream: update this test."


def _exists(conn: psycopg.Connection[Any], table: str) -> bool:
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()[0]


@pytest.fixture
def pg_store(pg_uri: str, embedder: BagOfWordsEmbeddings) -> Iterator[PostgresStore]:
    """LangGraph's PostgresStore with its default (HNSW) vector index, emptied."""
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        if _exists(conn, "store") and _exists(conn, "store_vectors"):
            conn.execute("TRUNCATE store, store_vectors")
    index = {"dims": 64, "embed": embedder, "fields": ["text"]}
    with PostgresStore.from_conn_string(pg_uri, index=index) as s:  # type: ignore[arg-type]
        s.setup()
        yield s


def _scores(items: list[Any]) -> list[float]:
    return sorted(i.value["score"] for i in items)


def _keys(items: list[Any]) -> list[str]:
    return sorted(i.key for i in items)


# -- 1. numeric ordering filters -------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "bound", "pg_text_result"),
    [
        # What PostgresStore returns: 'value->>k > %s' compares strings ("10" < "5").
        ("$gt", 5, [9.5]),
        ("$lt", 50, [2, 10, 100]),
        ("$gte", 10, [2, 9.5, 10, 100]),
        ("$lte", 9.5, [2, 9.5, 10, 100]),
    ],
)
def test_numeric_filters_compare_numbers(
    pg_store: PostgresStore,
    store: PostgresMemoryStore,
    op: str,
    bound: float,
    pg_text_result: list[float],
) -> None:
    compare = {"$gt": operator.gt, "$lt": operator.lt, "$gte": operator.ge, "$lte": operator.le}
    correct = sorted(v for v in SCORES if compare[op](v, bound))
    for s in (pg_store, store):
        for v in SCORES:
            s.put(("nums",), f"s{v}", {"score": v})
    filt = {"score": {op: bound}}

    got = _scores(pg_store.search(("nums",), filter=filt))
    assert got != correct, f"PostgresStore returned the correct {correct} for {filt}. {FIXED}"
    assert got == pg_text_result

    assert _scores(store.search(("nums",), filter=filt)) == correct


# -- 2. operators, combinators and paths -------------------------------------------------

DOCS = {
    "en": {"tag": "a", "meta": {"lang": "en"}},
    "fr": {"tag": "b", "meta": {"lang": "fr"}},
    "de": {"meta": {"lang": "de"}},  # no "tag"
}


def _fill(*stores: Any) -> None:
    for s in stores:
        for k, v in DOCS.items():
            s.put(("ops",), k, v)


@pytest.mark.parametrize(
    ("filt", "correct"),
    [
        ({"tag": {"$in": ["a", "b"]}}, ["en", "fr"]),
        ({"tag": {"$nin": ["a"]}}, ["de", "fr"]),
        ({"meta": {"lang": "en"}}, ["en"]),
    ],
)
def test_in_nin_and_nested_dicts_raise_in_postgres_store(
    pg_store: PostgresStore,
    store: PostgresMemoryStore,
    filt: dict[str, Any],
    correct: list[str],
) -> None:
    _fill(pg_store, store)
    # PostgresStore reads every dict under a key as {operator: value}.
    with pytest.raises(ValueError, match="Unsupported operator"):
        pg_store.search(("ops",), filter=filt)
    assert _keys(store.search(("ops",), filter=filt)) == correct


@pytest.mark.parametrize(
    ("filt", "correct"),
    [
        ({"$or": [{"tag": "a"}, {"tag": "b"}]}, ["en", "fr"]),
        ({"$and": [{"tag": "a"}, {"meta.lang": "en"}]}, ["en"]),
        ({"meta.lang": "fr"}, ["fr"]),
    ],
)
def test_combinators_and_dotted_keys_match_nothing_in_postgres_store(
    pg_store: PostgresStore,
    store: PostgresMemoryStore,
    filt: dict[str, Any],
    correct: list[str],
) -> None:
    _fill(pg_store, store)
    # PostgresStore takes "$or" / "meta.lang" for a literal top-level field name.
    got = _keys(pg_store.search(("ops",), filter=filt))
    assert got == [], f"PostgresStore returned {got} for {filt}. {FIXED}"
    assert _keys(store.search(("ops",), filter=filt)) == correct


def test_ne_keeps_items_without_the_field(
    pg_store: PostgresStore, store: PostgresMemoryStore
) -> None:
    _fill(pg_store, store)
    filt = {"tag": {"$ne": "a"}}
    # PostgresStore: 'value->k != v' is NULL for a missing field, so "de" drops out;
    # InMemoryStore (None != "a") and ours keep it.
    assert _keys(pg_store.search(("ops",), filter=filt)) == ["fr"]
    assert _keys(store.search(("ops",), filter=filt)) == ["de", "fr"]


# -- 3. filtered vector search -----------------------------------------------------------

USERS = 10
PER_USER = 500  # at 200/user the planner still prefers an exact scan; 300+ use HNSW
VOCAB = [f"topic{i}" for i in range(300)]


def _corpus() -> list[PutOp]:
    rng = random.Random(1234)
    return [
        PutOp(
            ("memories", f"user{u}"),
            f"m{j}",
            {"text": " ".join(rng.sample(VOCAB, 6))},
            index=["text"],  # both stores embed exactly the same text
        )
        for u in range(USERS)
        for j in range(PER_USER)
    ]


def test_filtered_vector_search_returns_limit_results(
    pg_store: PostgresStore,
    store: PostgresMemoryStore,
    pg_uri: str,
    embedder: BagOfWordsEmbeddings,
) -> None:
    ops = _corpus()
    pg_store.batch(ops)
    store.batch(ops)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        # The statistics autovacuum would gather in production; without them the
        # planner guesses, and the result would depend on autovacuum's timing.
        conn.execute("ANALYZE store; ANALYZE store_vectors; ANALYZE langmem_items")
        conn.execute("ANALYZE langmem_embeddings")
    ns = ("memories", "user3")
    user_texts = [op.value["text"] for op in ops if op.namespace == ns]  # type: ignore[index]
    rng = random.Random(99)
    queries = [" ".join(rng.sample(VOCAB, 4)) for _ in range(10)]

    pg_counts, our_counts = [], []
    for q in queries:
        pg_hits = pg_store.search(ns, query=q, limit=10)
        assert all(h.namespace == ns for h in pg_hits)
        pg_counts.append(len(pg_hits))

        ours = store.search(ns, query=q, limit=10)
        our_counts.append(len(ours))
        assert all(h.namespace == ns for h in ours)
        # Exact: the scores are the true top 10 of this user's items.
        qv = embedder.embed_query(q)
        exact = sorted(
            (
                sum(a * b for a, b in zip(qv, dv, strict=True))
                for dv in embedder.embed_documents(user_texts)
            ),
            reverse=True,
        )[:10]
        assert [h.score for h in ours] == pytest.approx(exact, abs=1e-6)

    assert our_counts == [10] * len(queries)
    mean = sum(pg_counts) / len(pg_counts)
    assert mean < 10, (
        f"PostgresStore returned {pg_counts} results of 10 (mean {mean}); its HNSW scan "
        f"no longer loses filtered results at {PER_USER}/user. {FIXED}"
    )
    assert mean < 8, f"PostgresStore counts {pg_counts}: expected a clear shortfall"


# -- 4. query vs document embeddings -----------------------------------------------------


class RecordingEmbeddings(BagOfWordsEmbeddings):
    """Records which method embedded which text: ("documents" | "query", text)."""

    def __init__(self, dims: int = 64) -> None:
        super().__init__(dims)
        self.log: list[tuple[str, str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.log.extend(("documents", t) for t in texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.log.append(("query", text))
        return super().embed_query(text)


MEMORY = {
    "content": "Prefers green tea in the morning",
    "kind": "preference",
    "layer": "semantic",
    "occurred_at": "2026-11-18T15:00:00Z",
    "last_accessed_at": "2026-11-18T15:00:00Z",
}


def _methods(rec: RecordingEmbeddings, text: str) -> set[str]:
    return {method for method, t in rec.log if t == text}


def test_our_sync_store_embeds_queries_with_embed_query(
    store: PostgresMemoryStore, pg_uri: str
) -> None:
    rec = RecordingEmbeddings()
    index = {"embed": rec, "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as s:  # type: ignore[arg-type]
        s.put(("docs",), "d", {"text": "hot chocolate"}, index=["text"])
        s.put(("memories", "u1", "work"), "m", MEMORY)
        assert _keys(s.search(("docs",), query="warm drinks")) == ["d"]
        candidates = s.batch([RecallOp("u1", ("work",), query="what tea")])[0]
    assert [c.key for c in candidates] == ["m"]
    assert _methods(rec, "hot chocolate") == {"documents"}
    assert _methods(rec, MEMORY["content"]) == {"documents"}
    assert _methods(rec, "warm drinks") == {"query"}
    assert _methods(rec, "what tea") == {"query"}


async def test_our_async_store_embeds_queries_with_embed_query(
    astore: AsyncPostgresMemoryStore, pg_uri: str
) -> None:
    rec = RecordingEmbeddings()
    index = {"embed": rec, "dims": 64, "model_id": "bow-64"}
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=index) as s:  # type: ignore[arg-type]
        await s.aput(("docs",), "d", {"text": "hot chocolate"}, index=["text"])
        await s.aput(("memories", "u1", "work"), "m", MEMORY)
        assert _keys(await s.asearch(("docs",), query="warm drinks")) == ["d"]
        candidates = (await s.abatch([RecallOp("u1", ("work",), query="what tea")]))[0]
    assert [c.key for c in candidates] == ["m"]
    assert _methods(rec, "hot chocolate") == {"documents"}
    assert _methods(rec, MEMORY["content"]) == {"documents"}
    assert _methods(rec, "warm drinks") == {"query"}
    assert _methods(rec, "what tea") == {"query"}


def test_postgres_store_embeds_queries_as_documents(pg_uri: str) -> None:
    rec = RecordingEmbeddings()
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        if _exists(conn, "store") and _exists(conn, "store_vectors"):
            conn.execute("TRUNCATE store, store_vectors")
    index = {"dims": 64, "embed": rec, "fields": ["text"]}
    with PostgresStore.from_conn_string(pg_uri, index=index) as s:  # type: ignore[arg-type]
        s.setup()
        s.put(("docs",), "d", {"text": "hot chocolate"})
        assert _keys(s.search(("docs",), query="warm drinks")) == ["d"]
    assert _methods(rec, "hot chocolate") == {"documents"}
    assert _methods(rec, "warm drinks") == {"documents"}, (
        f"PostgresStore embedded the query with {_methods(rec, 'warm drinks')}. {FIXED}"
    )
    assert not [t for m, t in rec.log if m == "query"]
