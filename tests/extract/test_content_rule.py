"""One content rule for every way a memory is written: the Python API (``remember``,
``correct``), the REST API, the memory tools and the MCP server (a real MCP client over
the SDK's in-memory transport) accept and refuse the same texts, with the same message,
the rule's own (``langmem_layer.extract.gate.content_problem``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.messages import ToolMessage
from mcp.shared.memory import create_connected_server_and_client_session

from langmem_layer import InvalidContentError, MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.gate import content_problem
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import create_key
from langmem_layer.server.mcp import create_mcp_server
from langmem_layer.settings import GateSettings
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings
from tests.http_server import serve

#: Text -> whether it is a memory. Short memories a person writes are; "hi" is not.
TEXTS: dict[str, bool] = {
    "": False,
    "   \n": False,
    "x": False,
    "hi": False,
    "  ok  ": False,
    "Tea": True,
    "Vegan.": True,
    "Age 34": True,
    "Is allergic to peanuts.": True,
    "y" * 4001: False,
    "Likes\x00tea.": False,
}
IDS = [repr(t[:12]) + (f"x{len(t)}" if len(t) > 12 else "") for t in TEXTS]


def test_the_rule() -> None:
    gate = GateSettings()
    assert {t: content_problem(t, gate) is None for t in TEXTS} == TEXTS
    assert "too short" in (content_problem("hi", gate) or "")
    assert "min_content_chars" in (content_problem("hi", gate) or "")
    assert "max_content_chars" in (content_problem("y" * 4001, gate) or "")
    assert "empty" in (content_problem(" ", gate) or "")
    assert "NUL" in (content_problem("a\x00bc", gate) or "")
    assert content_problem("hi", GateSettings(min_content_chars=2)) is None


def _user() -> str:
    return f"rule-{uuid.uuid4().hex[:10]}"


async def _python(memory: MemoryLayer, text: str) -> tuple[str | None, str | None]:
    """(remember's refusal, correct's refusal) through the Python API."""
    refusals: list[str | None] = []
    user = _user()
    seed = await memory.aremember(user, "Seed memory to correct.")
    for call in (lambda: memory.aremember(user, text),
                 lambda: memory.acorrect(user, seed.key, text)):
        try:
            await call()
            refusals.append(None)
        except InvalidContentError as e:
            refusals.append(str(e))
    return refusals[0], refusals[1]


async def _tools(memory: MemoryLayer, text: str) -> tuple[str | None, str | None]:
    """The same through the memory tools, called as an agent calls them."""
    tools = {t.name: t for t in memory.tools()}
    user = _user()
    config = {"configurable": {"user_id": user, "thread_id": "t"}}
    seed = await memory.aremember(user, "Seed memory to correct.")
    refusals: list[str | None] = []
    for name, args in (("remember", {"content": text}),
                       ("correct", {"memory_id": seed.key, "content": text})):
        message = await tools[name].ainvoke(
            {"type": "tool_call", "id": "c1", "name": name, "args": args}, config)
        assert isinstance(message, ToolMessage)
        if message.status == "error":
            assert message.text.startswith("Error: "), message.text
            refusals.append(message.text.removeprefix("Error: "))
        else:
            assert message.text.startswith(("Remembered [", "Corrected: ")), message.text
            refusals.append(None)
    return refusals[0], refusals[1]


async def _mcp(memory: MemoryLayer, text: str) -> tuple[str | None, str | None]:
    """The same through the MCP server, from the SDK's own client."""
    user = _user()
    seed = await memory.aremember(user, "Seed memory to correct.")
    server = create_mcp_server(memory, user_id=user, profile="work")
    refusals: list[str | None] = []
    async with create_connected_server_and_client_session(server) as session:
        for name, args in (("remember", {"content": text}),
                           ("correct", {"memory_id": seed.key, "content": text})):
            result = await session.call_tool(name, args)
            reply = "\n".join(part.text for part in result.content)  # type: ignore[union-attr]
            if result.isError:
                prefix = f"Error executing tool {name}: "
                assert reply.startswith(prefix), reply
                refusals.append(reply.removeprefix(prefix))
            else:
                refusals.append(None)
    return refusals[0], refusals[1]


@pytest.fixture(scope="module")
def rest(pg_uri: str) -> Iterator[tuple[httpx.Client, PostgresMemoryStore]]:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with (PostgresMemoryStore.from_conn_string(pg_uri, index=index, pool_size=2) as store,
          serve(create_app(store=store, agent=False)) as url,
          httpx.Client(base_url=url, timeout=30) as http):
        yield http, store


def _rest(rest: tuple[httpx.Client, PostgresMemoryStore], text: str
          ) -> tuple[str | None, str | None]:
    """The same through the REST API: 201/200, or 422 with the rule's text as detail."""
    http, store = rest
    headers = {"Authorization": f"Bearer {create_key(store, _user())}"}
    seed = http.post("/v1/memories", json={"content": "Seed memory to correct."},
                     headers=headers).json()["id"]
    refusals: list[str | None] = []
    for path, ok in (("/v1/memories", 201), (f"/v1/memories/{seed}/correct", 200)):
        r = http.post(path, json={"content": text}, headers=headers)
        if r.status_code == 422:
            assert r.headers["content-type"].startswith("application/problem+json")
            refusals.append(r.json()["detail"])
        else:
            assert r.status_code == ok, r.text
            refusals.append(None)
    return refusals[0], refusals[1]


@pytest.mark.parametrize("text", list(TEXTS), ids=IDS)
async def test_every_way_in_applies_the_same_rule(
        text: str, pg_uri: str, index: dict[str, Any],
        rest: tuple[httpx.Client, PostgresMemoryStore]) -> None:
    expected = content_problem(text, GateSettings())
    assert (expected is None) is TEXTS[text]
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        memory = MemoryLayer(store, extraction="inline")
        seen = {
            "python": await _python(memory, text),
            "tools": await _tools(memory, text),
            "mcp": await _mcp(memory, text),
            "rest": _rest(rest, text),
        }
        await memory.aclose()
    assert seen == dict.fromkeys(seen, (expected, expected))
