"""The REST API's share of the bad-input corpus (tests/data/bad_inputs.json, ``"api":
"http"``): each request gets its 4xx status with a problem document, and the user's
memory is byte-identical before and after (compared through the export route).

A case gives ``method``, ``path`` (``$seed`` is the id of a memory the user has), and a
JSON ``body``, a ``raw`` body (sent as it is, ``{"$repeat": [text, n]}`` for a long
one) or ``query`` parameters; ``status`` is expected, and ``mentions`` (may be empty)
must be in the problem's detail or its validation errors.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from langmem_layer import PostgresMemoryStore
from langmem_layer.control import EXPORT_FORMAT
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import create_key
from tests.fakes import BagOfWordsEmbeddings
from tests.http_server import serve

LIMIT = 64 * 1024  # the test server's body limit

CASES = [c for c in json.loads(
    (Path(__file__).parents[1] / "data" / "bad_inputs.json").read_text(encoding="utf-8"))
    if c["api"] == "http"]


@pytest.fixture(scope="module")
def server(pg_uri: str) -> Iterator[tuple[httpx.Client, PostgresMemoryStore]]:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with (
        PostgresMemoryStore.from_conn_string(pg_uri, index=index, pool_size=2) as store,
        serve(create_app(store=store, max_body_bytes=LIMIT)) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        yield http, store


def _fill(value: Any, seed: str) -> Any:
    if isinstance(value, dict):
        if "$repeat" in value:
            text, n = value["$repeat"]
            return text * n
        return {k: _fill(v, seed) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, seed) for v in value]
    if value == "$format":
        return EXPORT_FORMAT
    return value.replace("$seed", seed) if isinstance(value, str) else value


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_request_is_refused_with_a_problem_and_changes_nothing(
        case: dict[str, Any], server: tuple[httpx.Client, PostgresMemoryStore]) -> None:
    http, store = server
    user = f"u-{uuid.uuid4().hex[:10]}"
    headers = {"Authorization": f"Bearer {create_key(store, user)}"}
    created = http.post("/v1/memories", json={"content": "Likes tea."}, headers=headers)
    assert created.status_code == 201, created.text
    seed = created.json()["id"]
    before = http.get("/v1/export", headers=headers).content

    kwargs: dict[str, Any] = {"headers": headers}
    if "body" in case:
        kwargs["json"] = _fill(case["body"], seed)
    if "raw" in case:
        kwargs["content"] = _fill(case["raw"], seed).encode()
        kwargs["headers"] = {**headers, "Content-Type": "application/json"}
    if "query" in case:
        kwargs["params"] = case["query"]
    r = http.request(case["method"], _fill(case["path"], seed), **kwargs)

    assert r.status_code == case["status"], r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    problem = r.json()
    assert problem["status"] == case["status"] and problem["title"] and problem["type"]
    assert case["mentions"].lower() in json.dumps(problem).lower(), problem
    assert http.get("/v1/export", headers=headers).content == before
