"""`langmem-layer mcp` driven by the MCP SDK's own clients over stdio and streamable
HTTP (the server a subprocess on loopback), and its tools loaded into a LangGraph agent
through langchain-mcp-adapters: one person's memory shared by connections that chose
different profiles; the user is the server's, never the model's."""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from langchain_core.messages import ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.prebuilt import create_react_agent
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from langmem_layer import Kind, Layer, MemoryLayer
from langmem_layer.offline_chat import OfflineChatModel
from langmem_layer.server.keys import create_key
from langmem_layer.server.mcp import PROFILE_HEADER
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import ScriptedChatModel, tool_call

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

ROOT = Path(__file__).resolve().parents[2]
#: The MCP page of the docs, whose recipe the tests run as written.
MCP_PAGE = ROOT / "docs" / "mcp.md"
USER = f"mcp-{uuid.uuid4().hex[:8]}"  # the HTTP server's user, unique to this run
TOOLS = {"remember", "recall", "correct", "update", "forget"}


def _env(pg_uri: str) -> dict[str, str]:
    return {"LANGMEM_DATABASE_URL": pg_uri, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


def _command(*args: str) -> list[str]:
    # --no-embeddings: no model to load in each server process; recall is lexical.
    return ["-m", "langmem_layer.cli", "mcp", "--no-embeddings", *args]


def _text(result) -> str:
    assert not result.isError, result.content
    return "\n".join(part.text for part in result.content)


@asynccontextmanager
async def _memory(pg_uri: str) -> AsyncIterator[MemoryLayer]:
    """The database the servers write to, read directly."""
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        yield MemoryLayer(store)


async def _identity(pg_uri: str, user: str, content: str) -> None:
    """An identity memory (global to the person), as extraction stores a name."""
    async with _memory(pg_uri) as memory:
        await memory.aremember(user, content, kind=Kind.PROFILE_FACT, layer=Layer.IDENTITY)


# -- stdio: one server process per connection -------------------------------------------


@asynccontextmanager
async def _stdio(pg_uri: str, user: str, profile: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, cwd=str(ROOT), env=_env(pg_uri),
        args=_command("--transport", "stdio", "--user", user, "--profile", profile))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_stdio_two_connections_two_profiles(pg_uri: str) -> None:
    user = f"stdio-{uuid.uuid4().hex[:8]}"
    await _identity(pg_uri, user, "Name is Dana.")
    async with _stdio(pg_uri, user, "work") as work:
        assert {t.name for t in (await work.list_tools()).tools} == TOOLS
        assert "Name is Dana." in _text(await work.call_tool("recall", {"query": "Dana"}))
        assert _text(await work.call_tool(
            "remember", {"content": "Prefers tabs over spaces.", "kind": "preference"}
        )).startswith("Remembered [")
    async with _stdio(pg_uri, user, "personal") as personal:
        # Identity is global to the person; a preference stays in its profile.
        assert "Name is Dana." in _text(await personal.call_tool("recall", {"query": "Dana"}))
        assert "tabs" not in _text(await personal.call_tool("recall", {"query": "tabs"}))
        block = await personal.read_resource("memory://block/Dana")
        assert "Name is Dana." in block.contents[0].text
    async with _memory(pg_uri) as memory:
        stored = {r.record.content: r.scope for r in await memory.alist(user)}
    assert stored == {"Name is Dana.": "identity", "Prefers tabs over spaces.": "work"}


# -- streamable HTTP: one server, connections choose their profile ----------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def key(pg_uri: str) -> str:
    """An API key of USER's: the HTTP server has no --user, each client sends a key."""
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        return create_key(store, USER)


@pytest.fixture(scope="module")
def http_url(pg_uri: str) -> Iterator[str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, *_command("--transport", "http", "--port", str(port))],
        cwd=ROOT, env={**os.environ, **_env(pg_uri)})
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        while True:  # bounded by the process: a server that dies fails the wait
            assert server.poll() is None, "the MCP server exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        assert server.wait(timeout=60) == 0  # shut down, not killed by the signal


@asynccontextmanager
async def _http(url: str, key: str, profile: str | None = None,
                query: str = "") -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {key}"}
    if profile:
        headers[PROFILE_HEADER] = profile
    async with (httpx.AsyncClient(headers=headers, timeout=60) as client,
                streamable_http_client(url + query, http_client=client) as (read, write, _),
                ClientSession(read, write) as session):
        await session.initialize()
        yield session


async def test_http_connections_choose_their_profile(http_url: str, key: str,
                                                     pg_uri: str) -> None:
    await _identity(pg_uri, USER, "Speaks Italian.")
    async with _http(http_url, key, "work") as work:
        assert {t.name for t in (await work.list_tools()).tools} == TOOLS
        await work.call_tool("remember", {"content": "Prefers dark roast coffee.",
                                          "kind": "preference"})
        assert "dark roast" in _text(await work.call_tool("recall", {"query": "coffee"}))
        resources = [str(r.uri) for r in (await work.list_resources()).resources]
        assert resources == ["memory://block"]
    async with _http(http_url, key, query="?profile=personal") as personal:
        assert "Speaks Italian." in _text(
            await personal.call_tool("recall", {"query": "Italian"}))
        assert "dark roast" not in _text(await personal.call_tool("recall", {"query": "coffee"}))
        block = (await personal.read_resource("memory://block/Italian")).contents[0].text
        assert "Speaks Italian." in block and "coffee" not in block
    async with _http(http_url, key, "nonsense") as wrong:
        result = await wrong.call_tool("recall", {"query": "coffee"})
        assert result.isError and "Unknown profile 'nonsense'" in result.content[0].text


async def test_a_model_cannot_pass_another_users_id(http_url: str, key: str,
                                                    pg_uri: str) -> None:
    victim = f"victim-{uuid.uuid4().hex[:8]}"
    async with _http(http_url, key, "work") as session:
        tool = next(t for t in (await session.list_tools()).tools if t.name == "remember")
        assert "user_id" not in tool.inputSchema["properties"]
        reply = _text(await session.call_tool(
            "remember", {"content": "Owns a red bicycle.", "user_id": victim}))
        assert reply.startswith("Remembered [")
    async with _memory(pg_uri) as memory:
        assert await memory.alist(victim) == []
        assert "Owns a red bicycle." in [r.record.content for r in await memory.alist(USER)]


async def test_tool_errors_set_is_error(http_url: str, key: str) -> None:
    async with _http(http_url, key, "work") as session:
        result = await session.call_tool("forget", {"memory_id": "no-such-memory"})
        assert result.isError
        assert result.content[0].text == (  # type: ignore[union-attr]
            f"Error executing tool forget: No memory 'no-such-memory' for user {USER!r}.")
        # Content the one rule refuses, as remember() and the REST API refuse it.
        result = await session.call_tool("remember", {"content": "hi"})
        assert result.isError and "too short" in result.content[0].text  # type: ignore[union-attr]
        remembered = await session.call_tool("remember", {"content": "Vegan."})
        assert _text(remembered).startswith("Remembered [")
        memory_id = _text(remembered).split("[")[1].split("]")[0]
        assert _text(await session.call_tool("forget", {"memory_id": memory_id})) == (
            f"Forgotten: [{memory_id}] Vegan.")
        again = await session.call_tool("forget", {"memory_id": memory_id})
        assert again.isError and "archived, not active" in again.content[0].text  # type: ignore[union-attr]


async def test_http_needs_a_valid_api_key(http_url: str, key: str) -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=60) as client:
        for headers in ({}, {"Authorization": "Bearer lm_not-a-key"},
                        {"Authorization": f"Basic {key}"}):
            reply = await client.post(http_url, json=initialize, headers={**accept, **headers})
            assert reply.status_code == 401 and "Bearer" in reply.json()["error"]
        ok = await client.post(http_url, json=initialize,
                               headers={**accept, "Authorization": f"Bearer {key}"})
        assert ok.status_code == 200


# -- a LangGraph agent using the server's tools ----------------------------------------


async def test_agent_with_mcp_tools_remembers_then_recalls(http_url: str, key: str) -> None:
    client = MultiServerMCPClient({"memory": {
        "transport": "streamable_http", "url": http_url,
        "headers": {"Authorization": f"Bearer {key}", PROFILE_HEADER: "work"}}})
    tools = await client.get_tools()
    assert {t.name for t in tools} == TOOLS
    model = ScriptedChatModel(script=[
        tool_call("remember", "c1", content="Is allergic to shellfish."), "Noted.",
        tool_call("recall", "c2", query="allergic shellfish", user_id="someone-else"),
        "You are allergic to shellfish."])
    agent = create_react_agent(model, tools)
    await agent.ainvoke({"messages": [("user", "I'm allergic to shellfish.")]})
    out = await agent.ainvoke({"messages": [("user", "Am I allergic to anything?")]})
    (found,) = [m.text for m in out["messages"] if isinstance(m, ToolMessage)]
    assert "Is allergic to shellfish." in found
    assert out["messages"][-1].text == "You are allergic to shellfish."


async def test_the_docs_recipe_runs_as_written(http_url: str, key: str) -> None:
    (recipe,) = re.findall(r"```python\n(.*?)```", MCP_PAGE.read_text(), re.S)
    model = ScriptedChatModel(script=[
        tool_call("remember", "c1", content="Grows tomatoes on the balcony."), "Noted."])
    code = compile(recipe.replace("http://127.0.0.1:8000/mcp", http_url), "docs/mcp.md",
                   "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    await eval(code, {"model": model, "key": key})
    (call,) = [m for m in model.seen[-1] if isinstance(m, ToolMessage)]
    assert call.text.startswith("Remembered [")


async def test_the_docs_recipe_runs_offline(http_url: str, pg_uri: str) -> None:
    user = f"offline-{uuid.uuid4().hex[:8]}"
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        key = create_key(store, user)
    (recipe,) = re.findall(r"```python\n(.*?)```", MCP_PAGE.read_text(), re.S)
    code = compile(recipe.replace("http://127.0.0.1:8000/mcp", http_url), "docs/mcp.md",
                   "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    # The offline model calls the server's remember tool for the fact the user states.
    await eval(code, {"model": OfflineChatModel(), "key": key})
    async with _memory(pg_uri) as memory:
        (found,) = await memory.alist(user)
    assert (found.record.content, found.scope, found.record.kind) == (
        "Is allergic to shellfish.", "work", Kind.PROFILE_FACT)


# -- configuration errors: one line, before the database is opened ----------------------


def test_cli_errors_say_how_to_fix(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from langmem_layer.cli import main

    monkeypatch.delenv("LANGMEM_USER_ID", raising=False)
    monkeypatch.setenv("LANGMEM_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert main(["mcp"]) == 1
    assert "No user_id" in capsys.readouterr().err
    assert main(["mcp", "--user", "alice", "--profile", "hobby"]) == 1
    assert "LANGMEM_PROFILES=work,personal,hobby" in capsys.readouterr().err
    assert main(["mcp", "--user", "alice", "--transport", "http", "--host", "0.0.0.0"]) == 1
    assert "without credentials" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "mcp.server.fastmcp", None)  # the extra not installed
    assert main(["mcp", "--user", "alice"]) == 1
    assert "pip install 'langmem-layer[mcp]'" in capsys.readouterr().err
