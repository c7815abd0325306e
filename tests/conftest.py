"""Shared fixtures: one real embedded PostgreSQL + pgvector for the whole session.

Tests that need the database fail (never skip) when it cannot be started.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings, Clock

TABLES = "langmem_links, langmem_embeddings, langmem_items"


# Under the checkout, not pytest's 0700 temp root: the embedded server runs as its own
# system user and must be able to reach its data directory to shut down cleanly.
DATA_DIR = Path(__file__).resolve().parents[1] / ".langmem-test"


@pytest.fixture(scope="session")
def pg_uri() -> str:
    """URI of the embedded PostgreSQL, with the schema rebuilt from scratch this session."""
    uri = embedded_uri(DATA_DIR)
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLES}, langmem_migrations CASCADE")
    with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
        store.setup()
    return uri


def _truncate(uri: str) -> None:
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLES}")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def embedder() -> BagOfWordsEmbeddings:
    return BagOfWordsEmbeddings(dims=64)


@pytest.fixture
def index(embedder: BagOfWordsEmbeddings) -> dict:
    return {"embed": embedder, "dims": 64, "model_id": "bow-64"}


@pytest.fixture
def store(pg_uri: str, index: dict, clock: Clock) -> Iterator[PostgresMemoryStore]:
    """A sync store on an emptied database, with the fake embedder and a movable clock."""
    _truncate(pg_uri)
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as s:
        yield s


@pytest.fixture
async def astore(pg_uri: str, index: dict, clock: Clock) -> AsyncIterator[AsyncPostgresMemoryStore]:
    """The async twin of ``store``."""
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as s:
        yield s
