"""The memory agent through LangServe, driven by LangServe's own client over loopback.

A uvicorn server (in a thread of this process, on a socket bound to 127.0.0.1) serves
``tests.langserve_app``; ``RemoteRunnable`` invokes, batches and streams the agent, and
the database is read after each call. The user is the authenticated one: a config
naming another user is refused and writes nothing for that user.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from langchain_core.messages import AIMessage, HumanMessage
from langserve import RemoteRunnable

from langmem_layer.server.http.lifespan import MemoryService
from tests.http_server import serve
from tests.langserve_app import make_app

STARTUP_LIMIT = 120.0  # seconds; a bound on waiting, not a performance assertion


@dataclass
class Server:
    url: str
    app: FastAPI

    @property
    def service(self) -> MemoryService:
        return self.app.state.memory  # type: ignore[no-any-return]

    def drain(self) -> None:
        """Extract everything the server queued, on the server's own loop."""
        loop = self.service.store.loop  # type: ignore[attr-defined]
        asyncio.run_coroutine_threadsafe(self.service.layer.adrain(), loop).result(60)

    def agent(self, user: str, *, admin: bool = False) -> RemoteRunnable:
        headers = {"x-test-user": user, **({"x-test-admin": "1"} if admin else {})}
        return RemoteRunnable(f"{self.url}/agent", headers=headers, timeout=60)


@pytest.fixture(scope="module")
def server(pg_uri: str) -> Iterator[Server]:
    app = make_app(pg_uri)
    with serve(app) as url:
        yield Server(url, app)


def _user() -> str:
    return f"u-{uuid.uuid4().hex[:10]}"


def _counts(uri: str, user: str) -> dict[str, int]:
    """Rows the user owns in the tables a turn writes to."""
    with psycopg.connect(uri, autocommit=True) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table} WHERE user_id = %s",
                                (user,)).fetchone()[0]  # type: ignore[index]
            for table in ("langmem_extraction_queue", "langmem_messages", "langmem_items",
                          "langmem_threads", "langmem_ingest_log")
        }


def _turn(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)]}


def _reply(state: dict[str, Any]) -> str:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return last.text


def test_invoke_recalls_a_memory_in_another_thread(server: Server, pg_uri: str) -> None:
    user = _user()
    agent = server.agent(user)
    first = agent.invoke(_turn("I am allergic to peanuts"),
                         config={"configurable": {"thread_id": "t1"}})
    assert "allergic to peanuts" in _reply(first)
    server.drain()
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        queued = conn.execute(
            "SELECT thread_id, done_at IS NOT NULL FROM langmem_extraction_queue "
            "WHERE user_id = %s", (user,)).fetchall()
    assert queued == [("t1", True)]  # the thread from the config; the user from the key
    assert _counts(pg_uri, user)["langmem_items"] >= 1

    second = agent.invoke(_turn("Am I allergic to anything?"),
                          config={"configurable": {"thread_id": "t2"}})
    # The extracted memory, not only the other thread's words: an allergy is a fact the
    # agent must not contradict (the offline model quotes only speakable sections).
    assert "### DO NOT CONTRADICT\n- Is allergic to peanuts." in second["memory_context"]
    assert any("peanuts" in r["value"]["content"] for r in second["recalled"])
    assert _reply(second).startswith('Noted: "Am I allergic to anything?"')


def test_stream_batch_and_stream_events(server: Server, pg_uri: str) -> None:
    user = _user()
    agent = server.agent(user)
    agent.invoke(_turn("I live in Lisbon"), config={"configurable": {"thread_id": "a"}})
    server.drain()

    chunks = list(agent.stream(_turn("Where do I live?"),
                               config={"configurable": {"thread_id": "b"}}))
    # One update per node, in the graph's order.
    assert [next(iter(c)) for c in chunks] == [
        "load_memory", "assemble_context", "agent", "extract_after_turn"]
    assert "Lisbon" in _reply(chunks[2]["agent"])

    outs = agent.batch([_turn("Where do I live?"), _turn("What do you know about me?")],
                       config={"configurable": {"thread_id": "c"}})
    assert len(outs) == 2
    assert all("Lisbon" in o["memory_context"] for o in outs)

    async def events() -> list[dict[str, Any]]:
        return [e async for e in agent.astream_events(
            _turn("Where do I live?"), config={"configurable": {"thread_id": "d"}},
            version="v2")]

    seen = asyncio.run(events())
    kinds = {e["event"] for e in seen}
    assert {"on_chain_start", "on_chain_end", "on_chat_model_end"} <= kinds
    names = {e["name"] for e in seen}
    assert {"load_memory", "assemble_context", "agent", "extract_after_turn"} <= names
    server.drain()
    counts = _counts(pg_uri, user)
    assert counts["langmem_extraction_queue"] == 5  # every turn queued, for this user


def test_another_users_id_in_config_is_refused_and_writes_nothing(
        server: Server, pg_uri: str) -> None:
    alice, bob = _user(), _user()
    headers = {"x-test-user": alice}
    other = {"configurable": {"user_id": bob, "thread_id": "x"}}
    body = {"input": {"messages": [{"type": "human", "content": "I live in Paris"}]}}
    with httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        for route, payload in (
            ("/agent/invoke", {**body, "config": other}),
            ("/agent/stream", {**body, "config": other}),
            ("/agent/stream_events", {**body, "config": other}),
            ("/agent/stream_log", {**body, "config": other}),
            ("/agent/batch", {"inputs": [body["input"]] * 2,
                              "config": [{"configurable": {"thread_id": "x"}}, other]}),
        ):
            r = client.post(route, json=payload)
            assert r.status_code == 403, (route, r.text)
            assert "another user" in r.json()["detail"]
        # The same through a share link: the config compressed into the path.
        from langserve.lzstring import LZString

        link = LZString.compressToEncodedURIComponent(json.dumps(other))
        r = client.post(f"/agent/c/{link}/invoke", json=body)
        assert r.status_code == 403, r.text
        # Naming oneself is fine.
        me = {"configurable": {"user_id": alice, "thread_id": "x"}}
        assert client.post("/agent/invoke", json={**body, "config": me}).status_code == 200
    server.drain()
    assert _counts(pg_uri, bob) == dict.fromkeys(_counts(pg_uri, bob), 0)
    assert _counts(pg_uri, alice)["langmem_extraction_queue"] == 1


def test_an_admin_may_act_for_another_user(server: Server, pg_uri: str) -> None:
    admin, bob = _user(), _user()
    out = server.agent(admin, admin=True).invoke(
        _turn("I work at Acme"), config={"configurable": {"user_id": bob, "thread_id": "y"}})
    assert _reply(out)
    server.drain()
    assert _counts(pg_uri, bob)["langmem_extraction_queue"] == 1
    assert _counts(pg_uri, admin)["langmem_extraction_queue"] == 0


def test_without_credentials_every_route_is_401(server: Server, pg_uri: str) -> None:
    body = {"input": {"messages": [{"type": "human", "content": "hello"}]}}
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for route in ("/agent/invoke", "/agent/stream", "/agent/stream_events"):
            r = client.post(route, json=body)
            assert r.status_code == 401, route
            assert r.headers["www-authenticate"] == "Bearer"
        assert client.post("/agent/batch", json={"inputs": [body["input"]]}).status_code == 401
        for route in ("/agent/input_schema", "/agent/output_schema", "/agent/config_schema",
                      "/agent/playground/index.html"):
            assert client.get(route).status_code == 401, route


def test_schemas_and_playground_are_served(server: Server) -> None:
    with httpx.Client(base_url=server.url, headers={"x-test-user": _user()},
                      timeout=60) as client:
        config = client.get("/agent/config_schema").json()
        fields = config["$defs"]["AgentConfig"]["properties"]
        assert {"user_id", "thread_id", "profile", "agent_id"} <= set(fields)
        schema = client.get("/agent/input_schema").json()
        assert "messages" in schema["$defs"]["MemoryState"]["properties"]
        assert client.get("/agent/output_schema").status_code == 200
        page = client.get("/agent/playground/index.html")
        assert page.status_code == 200
        assert "<html" in page.text.lower()


def test_served_runs_carry_no_langserve_event_aggregator() -> None:
    """LangServe attaches an event collector to each invoke, batch and stream run and
    discards it on these routes (no ``include_callback_events``); the served agent runs
    without it, as in process."""
    from dataclasses import dataclass as _dataclass

    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import START, MessagesState, StateGraph

    from langmem_layer.server.http.agent_route import add_agent_routes

    seen: list[list[str]] = []

    def node(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        seen.append([type(h).__name__ for h in config["callbacks"].handlers])
        return {"messages": [AIMessage("ok")]}

    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    graph = builder.compile()

    @_dataclass
    class Caller:
        user_id: str = "someone"
        admin: bool = False

    app = FastAPI()
    add_agent_routes(app, graph, principal_dependency=lambda: Caller(), playground=False)
    # sse-starlette keeps its exit event on the loop of the first server that streamed
    # (this module's); a second server on its own loop needs a fresh one.
    from sse_starlette.sse import AppStatus

    AppStatus.should_exit_event = None
    with serve(app) as url:
        agent = RemoteRunnable(f"{url}/agent", timeout=60)
        agent.invoke(_turn("hi"))
        agent.batch([_turn("a"), _turn("b")])
        list(agent.stream(_turn("c")))
    assert len(seen) == 4
    assert not any("AsyncEventAggregatorCallback" in names for names in seen), seen
