"""Embedding calls: per-user cache for 30 days, truncation, retries, batches of 100.

The database tests run on both stores (``impl``): PostgresMemoryStore through its async
methods (``abatch`` → ``batch`` in a worker thread) and AsyncPostgresMemoryStore. The
embedder records every text it receives, so the tests count texts, not calls.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.store.base import BaseStore, PutOp

from langmem_layer.errors import EmbeddingError
from langmem_layer.store.core import StoreCore
from langmem_layer.store.embedding.work import (
    CACHE_TTL,
    Retry,
    default_max_input_tokens,
    parse_vector,
)
from langmem_layer.store.plan import Handler, Plan, Step
from langmem_layer.tokens import get_token_counter
from tests.fakes import BagOfWordsEmbeddings, Clock

U1 = ("memories", "u1", "work")
U2 = ("memories", "u2", "work")
MAX_TOKENS = 16


class RecordingEmbeddings(BagOfWordsEmbeddings):
    """Records each text and batch size; raises while ``failures`` is above zero."""

    def __init__(self, dims: int = 64) -> None:
        super().__init__(dims)
        self.texts: list[str] = []
        self.batches: list[int] = []
        self.failures = 0

    def _maybe_fail(self) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("embedding endpoint unavailable")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self._maybe_fail()
        self.batches.append(len(texts))
        self.texts.extend(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self._maybe_fail()
        self.texts.append(text)
        return super().embed_query(text)


@pytest.fixture
def embedder() -> RecordingEmbeddings:
    return RecordingEmbeddings(dims=64)


@pytest.fixture
def index(embedder: RecordingEmbeddings) -> dict[str, Any]:
    # fields=["text"]: the embedded text is exactly the value's "text".
    return {"embed": embedder, "dims": 64, "model_id": "bow-64", "fields": ["text"],
            "max_input_tokens": MAX_TOKENS}


@pytest.fixture(params=["sync", "async"])
def impl(request: pytest.FixtureRequest) -> BaseStore:
    store: BaseStore = request.getfixturevalue("store" if request.param == "sync" else "astore")
    return store


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def db(pg_uri: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def cache_rows(pg_uri: str) -> list[tuple[Any, ...]]:
    return db(pg_uri, "SELECT user_id, model_id, content_hash, created_at "
                      "FROM langmem_embedding_cache ORDER BY user_id, content_hash")


def stored_vectors(pg_uri: str) -> dict[tuple[str, str], str]:
    rows = db(pg_uri, "SELECT user_id, key, embedding::text FROM langmem_embeddings")
    return {(u, k): v for u, k, v in rows}


async def maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# -- cache ------------------------------------------------------------------------------


async def test_same_text_same_user_is_embedded_once(
    impl: BaseStore, embedder: RecordingEmbeddings, pg_uri: str
) -> None:
    text = "I drink oat milk in my coffee"
    await impl.aput(U1, "a", {"text": text})
    await impl.aput(U1, "b", {"text": text})
    assert embedder.texts == [text]
    # The cached vector is the fresh one: both items hold the same, right vector.
    vectors = stored_vectors(pg_uri)
    assert vectors[("u1", "a")] == vectors[("u1", "b")]
    fresh = BagOfWordsEmbeddings(64).embed_documents([text])[0]
    assert parse_vector(vectors[("u1", "b")]) == pytest.approx(fresh, abs=1e-6)
    found = await impl.asearch(U1, query="oat milk coffee")
    assert sorted(i.key for i in found) == ["a", "b"]
    assert found[0].score == pytest.approx(found[1].score)


async def test_cache_is_per_user(
    impl: BaseStore, embedder: RecordingEmbeddings, pg_uri: str
) -> None:
    text = "My sister lives in Lisbon"
    await impl.aput(U1, "a", {"text": text})
    await impl.aput(U2, "a", {"text": text})
    assert embedder.texts == [text, text]  # u2 never gets u1's cache entry
    assert [r[:3] for r in cache_rows(pg_uri)] == [
        ("u1", "bow-64", sha(text)), ("u2", "bow-64", sha(text)),
    ]


async def test_duplicates_in_one_batch_are_embedded_once_per_user(
    impl: BaseStore, embedder: RecordingEmbeddings, pg_uri: str
) -> None:
    text = "Allergic to peanuts"
    await impl.abatch([
        PutOp(U1, "a", {"text": text}), PutOp(U1, "b", {"text": text}),
        PutOp(U2, "c", {"text": text}), PutOp(("docs",), "d", {"text": text}),
    ])
    assert embedder.texts == [text, text, text]  # u1, u2 and the shared tenant ""
    assert [r[0] for r in cache_rows(pg_uri)] == ["", "u1", "u2"]
    assert len(set(stored_vectors(pg_uri).values())) == 1


async def test_cache_key_is_the_exact_text(impl: BaseStore, embedder: RecordingEmbeddings) -> None:
    await impl.aput(U1, "a", {"text": "Call me Bob"})
    await impl.aput(U1, "b", {"text": "call me bob"})  # case can change a vector
    await impl.aput(U1, "c", {"text": "Call me Bob"})
    assert embedder.texts == ["Call me Bob", "call me bob"]


async def test_cache_expires_after_30_days_on_the_store_clock(
    impl: BaseStore, embedder: RecordingEmbeddings, clock: Clock, pg_uri: str
) -> None:
    text = "Works night shifts at the hospital"
    await impl.aput(U1, "a", {"text": text})
    clock.advance(days=29)
    await impl.aput(U1, "b", {"text": text})
    assert embedder.texts == [text]
    clock.advance(days=2)  # 31 days after the entry was made
    await impl.aput(U1, "c", {"text": text})
    assert embedder.texts == [text, text]
    assert [r[3] for r in cache_rows(pg_uri)] == [clock.now]  # the entry was renewed


async def test_purge_deletes_only_entries_too_old_to_use(
    impl: BaseStore, clock: Clock, pg_uri: str
) -> None:
    await impl.aput(U1, "a", {"text": "old text"})
    clock.advance(days=31)
    await impl.aput(U2, "b", {"text": "new text"})
    purge = impl.purge_embedding_cache  # type: ignore[attr-defined]
    assert await maybe_await(purge()) == 1
    assert [(r[0], r[2]) for r in cache_rows(pg_uri)] == [("u2", sha("new text"))]
    assert await maybe_await(purge(now=clock.now + CACHE_TTL)) == 1
    assert cache_rows(pg_uri) == []


async def test_cached_vector_of_another_size_is_a_miss(
    impl: BaseStore, embedder: RecordingEmbeddings, clock: Clock, pg_uri: str
) -> None:
    text = "Prefers window seats"
    db(pg_uri, "INSERT INTO langmem_embedding_cache VALUES ('u1', 'bow-64', %s, '[1,2,3]', %s)",
       [sha(text), clock.now])
    await impl.aput(U1, "a", {"text": text})
    assert embedder.texts == [text]
    assert db(pg_uri, "SELECT vector_dims(embedding) FROM langmem_embedding_cache") == [(64,)]


async def test_queries_are_not_cached(impl: BaseStore, embedder: RecordingEmbeddings) -> None:
    await impl.asearch(U1, query="coffee")
    await impl.asearch(U1, query="coffee")
    assert embedder.texts == ["coffee", "coffee"]


# -- truncation -------------------------------------------------------------------------


async def test_long_text_is_truncated_before_embedding_and_caching(
    impl: BaseStore, embedder: RecordingEmbeddings, pg_uri: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    long = " ".join(f"word{i}" for i in range(200))
    counter = get_token_counter("cl100k_base")
    assert counter.count(long) > MAX_TOKENS
    with caplog.at_level(logging.DEBUG, logger="langmem_layer.embedding"):
        await impl.aput(U1, "a", {"text": long})
    (sent,) = embedder.texts
    assert long.startswith(sent) and 0 < counter.count(sent) <= MAX_TOKENS
    assert "truncated" in caplog.text and "word1" not in caplog.text  # no user text logged
    assert [r[2] for r in cache_rows(pg_uri)] == [sha(sent)]
    # Another text with the same first tokens is the same model input: a cache hit.
    await impl.aput(U1, "b", {"text": sent + " and a different ending entirely"})
    assert embedder.texts == [sent]
    item = await impl.aget(U1, "a")
    assert item is not None and item.value["text"] == long  # only the embedding input is cut


def test_default_input_limits(embedder: RecordingEmbeddings) -> None:
    assert default_max_input_tokens("text-embedding-3-small") == 8191
    assert default_max_input_tokens("openai:text-embedding-3-large") == 8191
    assert default_max_input_tokens("all-MiniLM-L6-v2") == 256
    assert default_max_input_tokens("sentence-transformers/all-MiniLM-L6-v2") == 256
    assert default_max_input_tokens("bow-64") is None
    assert default_max_input_tokens(None) is None
    core = StoreCore(None, index={"embed": embedder, "dims": 64,
                                  "model_id": "text-embedding-3-small"})
    assert core.max_input_tokens == 8191
    core = StoreCore(None, index={"embed": embedder, "dims": 64,
                                  "model_id": "text-embedding-3-small", "max_input_tokens": None})
    assert core.max_input_tokens is None


# -- retries ----------------------------------------------------------------------------


def test_retry_policy() -> None:
    retry = Retry(0.5)
    error = ConnectionError("down")
    assert [retry.pause_after(error), retry.pause_after(error)] == [0.5, 1.0]
    with pytest.raises(EmbeddingError, match="down"):
        retry.pause_after(error)


async def test_embedder_failing_twice_then_succeeding(
    impl: BaseStore, embedder: RecordingEmbeddings
) -> None:
    impl.embedding_retry_delay = 0  # type: ignore[attr-defined]
    embedder.failures = 2
    await impl.aput(U1, "a", {"text": "Plays the cello"})
    assert embedder.texts == ["Plays the cello"]
    assert await impl.aget(U1, "a") is not None
    embedder.failures = 2  # queries are retried the same way
    assert [i.key for i in await impl.asearch(U1, query="cello")] == ["a"]


async def test_embedder_failing_three_times_raises_and_writes_nothing(
    impl: BaseStore, embedder: RecordingEmbeddings, pg_uri: str
) -> None:
    impl.embedding_retry_delay = 0  # type: ignore[attr-defined]
    embedder.failures = 3
    with pytest.raises(EmbeddingError, match="unavailable"):
        await impl.aput(U1, "a", {"text": "Plays the cello"})
    assert embedder.texts == []
    assert await impl.aget(U1, "a") is None
    assert cache_rows(pg_uri) == [] and stored_vectors(pg_uri) == {}
    await impl.aput(U1, "a", {"text": "Plays the cello"})  # the model is back
    assert await impl.aget(U1, "a") is not None


# -- batching ---------------------------------------------------------------------------


async def test_250_texts_are_embedded_in_calls_of_at_most_100(
    impl: BaseStore, embedder: RecordingEmbeddings, pg_uri: str
) -> None:
    await impl.abatch([PutOp(U1, f"k{i}", {"text": f"fact number {i}"}) for i in range(250)])
    assert embedder.batches == [100, 100, 50]
    assert len(cache_rows(pg_uri)) == 250 and len(stored_vectors(pg_uri)) == 250
    await impl.abatch([PutOp(U1, f"again{i}", {"text": f"fact number {i}"}) for i in range(250)])
    assert embedder.batches == [100, 100, 50]  # all cache hits: no call at all


# -- plans ------------------------------------------------------------------------------


def test_nested_plan_passes_owners_to_the_outer_cache(
    embedder: RecordingEmbeddings, clock: Clock
) -> None:
    core = StoreCore(None, index={"embed": embedder, "dims": 64, "model_id": "bow-64"},
                     clock=clock)

    def combined() -> Handler:
        # What a handler running other handlers as one does (e.g. exactly-once apply).
        inner = Plan([Step([0], core._put([PutOp(U2, "a", {"t": "x"})]))], 1, None, None)
        request = inner.embedding_request()
        assert request is not None
        inner.deliver_embeddings(*(yield request))
        while (query := inner.next_query()) is not None:
            inner.deliver_rows((yield query))
        return inner.results()

    plan = Plan([Step([0], combined())], 1, 64, "bow-64", now=clock.now)
    lookup = plan.cache_lookup()
    assert lookup is not None
    assert "c.user_id" in lookup.sql.split("WHERE", 1)[1]
    assert lookup.params["users"] == ["u2"]


@pytest.fixture
def no_db_plan(embedder: RecordingEmbeddings, clock: Clock) -> Iterator[Plan]:
    core = StoreCore(None, index={"embed": embedder, "dims": 64, "model_id": "bow-64"},
                     clock=clock)
    yield core.plan([PutOp(U1, "a", {"t": "x"}), PutOp(U1, "b", {"t": "x"})])


def test_cache_write_is_the_first_statement(no_db_plan: Plan) -> None:
    plan = no_db_plan
    assert plan.embedding_work() == (['{"t": "x"}'], [])
    plan.deliver_embeddings([[1.0] + [0.0] * 63], [])
    first = plan.next_query()
    assert first is not None and "langmem_embedding_cache" in first.sql
    plan.deliver_rows([])
    second = plan.next_query()
    assert second is not None and "langmem_items" in second.sql
