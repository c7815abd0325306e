"""Shared fixtures: one real embedded PostgreSQL + pgvector for the whole session.

Tests that need the database fail (never skip) when it cannot be started.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import conninfo

from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings, Clock

# The statement audit: every SQL statement the library sends must bind the user.
pytest_plugins = ["tests.audit"]

#: Test modules that start a database server themselves (a command in a subprocess, the
#: LangGraph server, a browser against the app) without the ``pg_uri`` fixture.
_SERVER_MODULES = frozenset({
    "test_cli", "test_cli_memories", "test_commands_as_written", "test_demo",
    "test_docs_examples", "test_langgraph_dev", "test_local_model", "test_new_user",
    "test_no_secrets", "test_panel_browser", "test_privacy_embedded", "test_faults_kill",
    "test_faults_services", "test_http_serve", "test_mcp_server", "test_readme_agents",
    "test_jobs_cli", "test_store_smoke",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``db`` every test that needs PostgreSQL (it takes ``pg_uri``, directly or
    through another fixture, or its module starts a server): ``pytest -m "not db"``
    runs the rest in seconds."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
        if "pg_uri" in getattr(item, "fixturenames", ()) or module in _SERVER_MODULES:
            item.add_marker(pytest.mark.db)

TABLES = (
    "langmem_links, langmem_embeddings, langmem_items, langmem_extraction_queue, "
    "langmem_applied_ops, langmem_ingest_log, langmem_embedding_cache, "
    "langmem_threads, langmem_messages, langmem_terms, langmem_reextract, langmem_job_runs, "
    "langmem_api_keys, langmem_decay, langmem_agent_trust"
)


# Under the checkout, not pytest's 0700 temp root: the embedded server runs as its own
# system user and must be able to reach its data directory to shut down cleanly.
DATA_DIR = Path(__file__).resolve().parents[1] / ".langmem-test"


@pytest.fixture(scope="session")
def pg_uri() -> Iterator[str]:
    """A database of its own for this test session, schema installed from scratch.

    One embedded server, one database per session: concurrent sessions never see
    each other's rows.
    """
    server_uri = embedded_uri(DATA_DIR)
    name = f"langmem_test_{os.getpid()}"
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    uri = conninfo.make_conninfo(server_uri, dbname=name)
    with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
        store.setup()
    yield uri
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def bare_uri(pg_uri: str) -> Iterator[str]:
    """A database of its own on the suite's server, on which setup() never ran."""
    name = f"langmem_bare_{os.getpid()}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    yield conninfo.make_conninfo(pg_uri, dbname=name)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


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


@pytest.fixture
def clean_working_tables(pg_uri: str) -> None:
    """Empty working memory's tables, for tests that do not take ``store``."""
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("TRUNCATE langmem_threads, langmem_messages")


@pytest.fixture
def saver(pg_uri: str) -> Iterator[PostgresSaver]:
    """LangGraph's own PostgreSQL checkpointer on the test database."""
    with PostgresSaver.from_conn_string(pg_uri) as s:
        s.setup()
        yield s
