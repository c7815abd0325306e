"""What an operator alerts on: /healthz, /readyz and /metrics of the HTTP app, scraped
with a real Prometheus text parser, against a real uvicorn server and database."""

from __future__ import annotations

import uuid

import httpx
import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from prometheus_client.parser import text_string_to_metric_families
from psycopg import conninfo

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import create_key
from langmem_layer.write.apply import enqueue_turn
from tests.fakes import BagOfWordsEmbeddings
from tests.http_server import serve

INDEX = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_health_readiness_and_metrics(bare_uri: str) -> None:
    with PostgresMemoryStore.from_conn_string(bare_uri, index=INDEX, pool_size=2) as store, \
            serve(create_app(store=store, agent=False)) as url, \
            httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").json() == {"status": "ready"}
        layer = MemoryLayer(store)
        # Queued without waking a worker: it waits until drain() below.
        layer.run(enqueue_turn(layer.env, "ops", [HumanMessage("I live in Lisbon."),
                                                   AIMessage("Noted.")], profile=None,
                               thread_id=None, agent_id=None, now=layer.now()))
        headers = {"Authorization": f"Bearer {create_key(store, 'ops')}"}
        assert http.get(f"/v1/memories/{uuid.uuid4()}", headers=headers).status_code == 404
        found = _samples(http.get("/metrics").text)
        assert found[("langmem_extraction_backlog", ())] == 1
        assert found[("langmem_extraction_oldest_seconds", ())] >= 0
        assert found[("langmem_extraction_parked", ())] == 0
        assert found[("langmem_errors_total", (("error", "MemoryNotFoundError"),))] == 1
        assert found[("langmem_pool_connections", ())] >= 1
        layer.drain()
        assert _samples(http.get("/metrics").text)[("langmem_extraction_backlog", ())] == 0
        # Nothing of a user's shows: counts and ages only.
        assert "Lisbon" not in http.get("/metrics").text


def test_readiness_fails_within_one_probe_and_recovers(bare_uri: str, pg_uri: str) -> None:
    name = conninfo.conninfo_to_dict(bare_uri)["dbname"]
    with PostgresMemoryStore.from_conn_string(bare_uri, index=None, pool_size=2) as store, \
            serve(create_app(store=store, agent=False)) as url, \
            httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("/readyz").status_code == 200
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s", (name,))
        down = http.get("/readyz")
        assert down.status_code == 503 and "database unreachable" in down.text
        assert http.get("/healthz").status_code == 200  # the process is still up
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
        assert http.get("/readyz").status_code == 200  # on its own, no restart


def test_readiness_says_when_the_schema_is_not_current(bare_uri: str) -> None:
    from fastapi.testclient import TestClient

    with PostgresMemoryStore.from_conn_string(bare_uri, index=None, pool_size=2) as store, \
            TestClient(create_app(store=store, agent=False)) as client:  # runs setup()
        assert client.get("/readyz").status_code == 200
        with psycopg.connect(bare_uri, autocommit=True) as conn:  # as an older version left it
            conn.execute("DELETE FROM langmem_migrations WHERE v = "
                         "(SELECT max(v) FROM langmem_migrations)")
        stale = client.get("/readyz")
        assert stale.status_code == 503 and "schema not current" in stale.text


def test_json_logs_are_one_object_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import logging

    from langmem_layer.server.http import serve

    monkeypatch.setenv("LANGMEM_LOG_FORMAT", "json")
    config = serve._log_config()
    assert {f["()"] for f in config["formatters"].values()} == {serve.JsonFormatter}
    record = logging.LogRecord("langmem_layer", logging.INFO, __file__, 1,
                               "memory database: %s", ("embedded PostgreSQL in /x",), None)
    line = json.loads(serve.JsonFormatter().format(record))
    assert line["message"] == "memory database: embedded PostgreSQL in /x"
    assert line["level"] == "INFO" and line["logger"] == "langmem_layer"
    monkeypatch.delenv("LANGMEM_LOG_FORMAT")
    plain = serve._log_config()["formatters"].values()
    assert serve.JsonFormatter not in {f.get("()") for f in plain}


def test_the_worker_serves_the_same_metrics(bare_uri: str) -> None:
    """``langmem-layer worker --metrics-port``: the figures the app's /metrics has, from
    the worker process, plus the turns it extracted."""
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with PostgresMemoryStore.from_conn_string(bare_uri, index=None) as store:
        store.setup()
        layer = MemoryLayer(store)
        layer.run(enqueue_turn(layer.env, "w", [HumanMessage("I live in Oslo.")],
                               profile=None, thread_id=None, agent_id=None, now=layer.now()))
    root = Path(__file__).resolve().parents[2]
    worker = subprocess.Popen(
        [sys.executable, "-m", "langmem_layer.cli", "--database-url", bare_uri, "worker",
         "--no-jobs", "--interval", "0.2", "--metrics-port", str(port)],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    try:
        found: dict = {}
        for _ in range(150):  # up to 30 s: the worker starts, extracts, then reports
            try:
                found = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
            except httpx.HTTPError:
                found = {}
            if found.get(("langmem_turns_extracted_total", ())) == 1:
                break
            time.sleep(0.2)
        assert found[("langmem_turns_extracted_total", ())] == 1
        assert found[("langmem_extraction_backlog", ())] == 0
    finally:
        worker.terminate()
        worker.wait(timeout=30)
