"""The server-lifetime owner of the store and layer, and the server's auth rules, in-process.

`tests/server/test_langgraph_dev.py` runs them under a real `langgraph dev`; these pin the
pieces: what :func:`serving.serve` hands out and closes, and how requests are confined.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import AccessDeniedError, ConfigurationError
from langmem_layer.server import served as serving
from langmem_layer.server.keys import acreate_key
from langmem_layer.server.langgraph_auth import bearer_token, scope_namespace


async def test_serve_owns_one_store_and_layer_until_it_ends(pg_uri: str) -> None:
    with pytest.raises(ConfigurationError, match=r"langgraph\.json"):
        serving.current()
    # No embedding model (index=None): what is pinned here is the lifetime, not search.
    async with serving.serve(pg_uri, index=None) as served:
        assert serving.current() is served
        assert served.layer.store is served.store
        with pytest.raises(ConfigurationError, match="already running"):
            async with serving.serve(pg_uri, index=None):
                pass
        # A turn queued in the background is extracted by the time serve() ends.
        await served.layer.admin.asubmit("serve-u", [HumanMessage("I live in Lisbon."),
                                               AIMessage("Noted.")], thread_id="t1")
    with pytest.raises(ConfigurationError):
        serving.current()
    async with serving.serve(pg_uri, index=None) as again:
        found = await again.layer.alist("serve-u")
        assert any("Lisbon" in r.record.content for r in found)
        assert not again.store.conn.closed
    assert again.store.conn.closed


async def test_the_memory_app_uses_the_served_store(pg_uri: str) -> None:
    app = serving.memory_app()  # at import time in a server: nothing is open yet
    with pytest.raises(ConfigurationError, match=r"langgraph\.json"):
        async with app.router.lifespan_context(app):
            pass
    async with serving.serve(pg_uri, index=None) as served:
        key = await acreate_key(served.store, "app-u")
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                me = await http.get("/v1/me", headers={"Authorization": f"Bearer {key}"})
                assert me.status_code == 200 and me.json()["user_id"] == "app-u"
                assert (await http.get("/v1/me")).status_code == 401
            # Every documented route of the mounted app needs credentials (the server's
            # auth handler does not cover custom routes; see docs/langgraph-server.md).
            paths = app.openapi()["paths"]
            assert "/v1/memories" in paths
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                for path, methods in paths.items():
                    url = re.sub(r"\{[^}]+\}", "x", path)
                    for method in methods:
                        answer = await http.request(method.upper(), url)
                        assert answer.status_code == 401, (method, path, answer.text)
        # The app's shutdown left the served store open for serve() to close.
        assert not served.store.conn.closed
    assert served.store.conn.closed


@pytest.mark.parametrize("option", ["store", "database_url", "data_dir", "pool_size"])
def test_the_memory_app_opens_no_store_of_its_own(option: str) -> None:
    with pytest.raises(ConfigurationError, match=f"remove {option}"):
        serving.memory_app(**{option: None})


def test_a_bearer_key_is_required() -> None:
    assert bearer_token("Bearer abc ") == "abc"
    assert bearer_token("bearer abc") == "abc"
    for header in (None, "", "Bearer ", "Basic abc", "abc"):
        with pytest.raises(AccessDeniedError) as refused:
            bearer_token(header)
        assert refused.value.status == 401


@pytest.mark.parametrize(("asked", "scoped"), [
    (None, ("memories", "alice")),
    ((), ("memories", "alice")),
    (("memories",), ("memories", "alice")),
    (("memories", "alice"), ("memories", "alice")),
    (("memories", "alice", "work"), ("memories", "alice", "work")),
])
def test_the_store_api_is_confined_to_the_users_memories(asked: Any, scoped: Any) -> None:
    assert scope_namespace(asked, "alice") == scoped


@pytest.mark.parametrize("asked", [("memories", "bob"), ("memories", "bob", "alice"),
                                   ("docs",), ("alice",)])
def test_another_users_namespace_is_refused(asked: tuple[str, ...]) -> None:
    with pytest.raises(AccessDeniedError) as refused:
        scope_namespace(asked, "alice")
    assert refused.value.status == 403
