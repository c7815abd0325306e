"""The server-lifetime owner of the store and layer, and the server's auth rules, in-process.

`tests/test_langgraph_dev.py` runs them under a real `langgraph dev`; these pin the
pieces: what :func:`serving.serve` hands out and closes, and how requests are confined.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import AccessDeniedError, ConfigurationError, serving
from langmem_layer.server_auth import bearer_token, scope_namespace


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
        await served.layer.asubmit("serve-u", [HumanMessage("I live in Lisbon."),
                                               AIMessage("Noted.")], thread_id="t1")
    with pytest.raises(ConfigurationError):
        serving.current()
    async with serving.serve(pg_uri, index=None) as again:
        found = await again.layer.alist("serve-u")
        assert any("Lisbon" in r.record.content for r in found)
        assert not again.store.conn.closed
    assert again.store.conn.closed


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
