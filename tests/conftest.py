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
    _citus_pending(items)

TABLES = (
    "langmem_links, langmem_embeddings, langmem_context_vectors, langmem_items, "
    "langmem_extraction_queue, "
    "langmem_applied_ops, langmem_ingest_log, langmem_embedding_cache, "
    "langmem_threads, langmem_messages, langmem_terms, langmem_reextract, langmem_job_runs, "
    "langmem_api_keys, langmem_decay, langmem_agent_trust"
)


# Under the checkout, not pytest's 0700 temp root: the embedded server runs as its own
# system user and must be able to reach its data directory to shut down cleanly.
DATA_DIR = Path(__file__).resolve().parents[1] / ".langmem-test"


#: A server to run the suite on instead of the embedded one (``make test-citus``: the
#: coordinator of a Citus cluster, tests/citus_cluster.py).
SERVER_ENV = "LANGMEM_TEST_DATABASE_URL"
#: The Citus tests need a cluster, which ``make test-citus`` starts and ``make test`` does
#: not: collected only when the suite runs against another server.
collect_ignore = [] if os.environ.get(SERVER_ENV) else ["store/test_citus.py"]
#: The torch build of the local model is an extra ``make test`` does not install:
#: ``make test-torch`` installs it and runs these.
TORCH_ENV = "LANGMEM_TEST_TORCH"
if not os.environ.get(TORCH_ENV):
    collect_ignore.append("local_torch")


def _citus_nodes(server_uri: str) -> tuple[tuple[str, int], list[tuple[str, int]]] | None:
    """The coordinator and workers of a Citus server (read from its own database), or None."""
    with psycopg.connect(server_uri, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            return None
        rows = conn.execute("SELECT groupid, nodename, nodeport FROM pg_dist_node "
                            "WHERE noderole = 'primary' ORDER BY groupid").fetchall()
    coordinator = [(h, p) for g, h, p in rows if g == 0]
    workers = [(h, p) for g, h, p in rows if g != 0]
    info = conninfo.conninfo_to_dict(server_uri)
    return (coordinator[0] if coordinator else (info.get("host", "127.0.0.1"),
                                                int(info.get("port", 5432))), workers)


def _create_database(server_uri: str, name: str) -> None:
    """A new database on the server; on Citus on every node, with its nodes registered."""
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    if (nodes := _citus_nodes(server_uri)) is None:
        return
    (host, port), workers = nodes
    for whost, wport in workers:
        node = conninfo.make_conninfo(server_uri, host=whost, port=wport)
        with psycopg.connect(node, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {name}")
    for h, p in [(host, port), *workers]:
        node = conninfo.make_conninfo(server_uri, host=h, port=p, dbname=name)
        with psycopg.connect(node, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    with psycopg.connect(conninfo.make_conninfo(server_uri, dbname=name),
                         autocommit=True) as conn:
        conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (host, port))
        for h, p in workers:
            conn.execute("SELECT citus_add_node(%s, %s)", (h, p))


def _drop_database(server_uri: str, name: str) -> None:
    nodes = _citus_nodes(server_uri)
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    for h, p in nodes[1] if nodes else []:
        with psycopg.connect(conninfo.make_conninfo(server_uri, host=h, port=p),
                             autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def on_citus(uri: str) -> bool:
    """Whether ``uri``'s database has the Citus extension."""
    with psycopg.connect(uri, autocommit=True) as conn:
        return conn.execute(
            "SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone() is not None


def _citus_pending(items: list[pytest.Item]) -> None:
    """On Citus, the tests ``tests/store/test_citus.py`` lists as not passing there yet are
    expected failures, with their reasons."""
    server = os.environ.get(SERVER_ENV)
    if not server or _citus_nodes(server) is None:
        return
    from tests.store.test_citus import CITUS_PENDING

    for item in items:
        reason = CITUS_PENDING.get(item.nodeid) or CITUS_PENDING.get(item.nodeid.split("[")[0])
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=f"on Citus: {reason}", strict=False))


@pytest.fixture(scope="session")
def pg_uri() -> Iterator[str]:
    """A database of its own for this test session, schema installed from scratch.

    One embedded server, one database per session: concurrent sessions never see
    each other's rows. With ``LANGMEM_TEST_DATABASE_URL`` set, that server instead; on
    a Citus coordinator the database is created on every node and distributed by
    ``setup()``.
    """
    server_uri = os.environ.get(SERVER_ENV) or embedded_uri(DATA_DIR)
    name = f"langmem_test_{os.getpid()}"
    _create_database(server_uri, name)
    uri = conninfo.make_conninfo(server_uri, dbname=name)
    with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
        store.setup()
    yield uri
    _drop_database(server_uri, name)


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
