"""Vector search inside one user's namespace at 100k memories across 100 users.

Exact search and per-user HNSW indexes must both return `limit` results, with recall
against the exact top-10 of at least 0.95.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import numpy as np
import psycopg
import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp

from langmem_layer import Kind, Layer, MemoryRecord
from langmem_layer.sql import vector as vsql
from langmem_layer.store.ops import RecallOp
from langmem_layer.store.sync import PostgresMemoryStore
from tests.conftest import _truncate

DIMS = 32
USERS = 100
PER_USER = 1000
NOW = datetime(2026, 11, 18, tzinfo=UTC)


class RandomEmbeddings(Embeddings):
    """A deterministic random unit vector per text: exact neighbours are well defined."""

    def _vec(self, text: str) -> list[float]:
        seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
        v = np.random.default_rng(seed).standard_normal(DIMS)
        return (v / np.linalg.norm(v)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


@pytest.fixture(scope="module")
def big_store(pg_uri: str):
    _truncate(pg_uri)
    emb = RandomEmbeddings()
    index = {"embed": emb, "dims": DIMS, "model_id": "random-32"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        value = MemoryRecord(content="x", kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                             occurred_at=NOW, last_accessed_at=NOW).to_value()
        ops = []
        for u in range(USERS):
            for i in range(PER_USER):
                ops.append(PutOp(("memories", f"user{u}", "work"), f"m{i}",
                                 {**value, "content": f"user{u} memory {i}"}))
                if len(ops) == 5000:
                    store.batch(ops)
                    ops = []
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute("ANALYZE langmem_embeddings")
            conn.execute("ANALYZE langmem_items")
        yield store, emb
    _truncate(pg_uri)


def _exact(emb: RandomEmbeddings, user: int, query: str) -> list[str]:
    docs = np.array(emb.embed_documents([f"user{user} memory {i}" for i in range(PER_USER)]))
    sims = docs @ np.array(emb.embed_query(query))
    return [f"m{i}" for i in np.argsort(-sims)[:10]]


def _check(store: PostgresMemoryStore, emb: RandomEmbeddings) -> float:
    recalls = []
    for n in range(20):
        user = (n * 37) % USERS
        query = f"query {n}"
        found = store.search(("memories", f"user{user}"), query=query, limit=10)
        assert len(found) == 10
        assert all(item.namespace[1] == f"user{user}" for item in found)
        recalls.append(len({i.key for i in found} & set(_exact(emb, user, query))) / 10)
    return float(np.mean(recalls))


def test_exact_then_per_user_hnsw_keep_limit_and_recall(big_store) -> None:
    store, emb = big_store
    assert _check(store, emb) == 1.0  # exact search per user
    assert store.index_large_users(threshold=PER_USER + 1) == []
    indexed = store.index_large_users(threshold=PER_USER)
    assert len(indexed) == USERS
    assert store.index_large_users(threshold=PER_USER) == []  # idempotent
    assert _check(store, emb) >= 0.95  # through each user's own HNSW graph
    # ... and the search really walks that user's own index, not a scan.
    name = vsql.index_name("user7", "random-32")
    stats = "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s"
    with store.conn.cursor() as cur:
        before = cur.execute(stats, [name]).fetchone()[0]  # type: ignore[index]
        store.search(("memories", "user7"), query="another query", limit=10)
        cur.execute("SELECT pg_stat_force_next_flush()")
    with psycopg.connect(store.conn.info.dsn, autocommit=True) as conn:
        after = conn.execute(stats, [name]).fetchone()[0]  # type: ignore[index]
    assert after > before
    # Recall (the load_memory path) walks it too, and still fills its vector list.
    (cands,) = store.batch([RecallOp("user7", ("work",), query="query 3", per_source=10)])
    vector = sorted((c for c in cands if "vector" in c.ranks), key=lambda c: c.ranks["vector"])
    assert len(vector) == 10
    assert len({c.key for c in vector} & set(_exact(emb, 7, "query 3"))) >= 9
    store.conn.execute("SELECT pg_stat_force_next_flush()")
    with psycopg.connect(store.conn.info.dsn, autocommit=True) as conn:
        assert conn.execute(stats, [name]).fetchone()[0] > after  # type: ignore[index]
