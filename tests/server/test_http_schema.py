"""The OpenAPI document is valid, and a bounded Schemathesis run against the live server
(real uvicorn on loopback, real database) finds no server error and no response outside
the document."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import create_key
from tests.fakes import BagOfWordsEmbeddings
from tests.http_server import serve

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.fixture(scope="module")
def live(pg_uri: str) -> Iterator[tuple[str, str]]:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, pool_size=4) as store:
        token = create_key(store, "fuzz-user", admin=True)
        layer = MemoryLayer(store, extraction="inline")
        for text in ("Lives in Lisbon.", "Prefers tea.", "Will call Ana on Friday."):
            layer.remember("fuzz-user", text)
        # The REST API's document: the agent's routes are LangServe's own (their errors
        # are not problem documents, and fuzzing a chat turn is not this test's business).
        with serve(create_app(store=store, agent=False, max_body_bytes=256 * 1024)) as url:
            yield url, token


def test_openapi_document_validates(live: tuple[str, str]) -> None:
    import schemathesis

    url, _ = live
    doc = httpx.get(f"{url}/openapi.json").json()
    schema = schemathesis.openapi.from_dict(doc)
    # Loading resolves every operation and reference: an invalid document fails here.
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) >= 12
    for op in operations:
        for status, response in op.definition.raw["responses"].items():
            if status.startswith(("4", "5")):
                assert "application/problem+json" in response["content"], (op.label, status)


def test_schemathesis_finds_no_server_error(live: tuple[str, str], tmp_path: Path) -> None:
    url, token = live
    result = subprocess.run(
        [str(SCHEMATHESIS), "run", f"{url}/openapi.json", "--no-color",
         "-H", f"Authorization: Bearer {token}",
         "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
         "response_schema_conformance",
         "--phases", "examples,fuzzing", "--max-examples", "40", "--max-time", "30",
         "--workers", "1", "--seed", "17", "--generation-database", "none",
         "--request-timeout", "20"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
