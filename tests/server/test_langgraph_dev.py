"""`langgraph dev` on loopback, driven with `langgraph_sdk`: the server learns.

The dev server runs from its own environment (``<repo>/.venv-dev``, made by ``make``;
``LANGMEM_DEV_VENV`` points elsewhere) because langgraph-api needs sse-starlette>=2 and
LangServe pins <2. It is started once for the module, on an embedded PostgreSQL of its
own, with the repository's ``langgraph.json``: our store, checkpointer, auth handler,
the memory agent, the job graph and the memory REST API (``http.app``). Offline: no
tracing, no analytics, no OpenAI.
"""

from __future__ import annotations

import ast
import asyncio
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from langmem_layer.server.keys import create_key
from langmem_layer.store.embedded import stop_embedded
from langmem_layer.store.sync import PostgresMemoryStore

REPO = Path(__file__).resolve().parents[2]
#: Bounds on waiting for the server (not assertions on speed: a loaded machine is slow).
START_TIMEOUT = 120.0
EXTRACTION_TIMEOUT = 60.0
#: A cron fires on the next minute boundary, then the server's scheduler picks it up.
CRON_TIMEOUT = 150.0
STOP_TIMEOUT = 60.0
SERVER_PAGE = (REPO / "docs" / "langgraph-server.md").read_text(encoding="utf-8")


@dataclass
class DevServer:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    data_dir: Path
    keys: dict[str, str]

    def client(self, user: str | None) -> SyncLangGraphClient:
        headers = {"Authorization": f"Bearer {self.keys[user]}"} if user else {}
        return get_sync_client(url=self.url, headers=headers)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _langgraph_cli() -> Path:
    venv = Path(os.environ.get("LANGMEM_DEV_VENV") or REPO / ".venv-dev")
    cli = venv / "bin" / "langgraph"
    assert cli.exists(), (
        f"{cli} is missing: run `make test` (it creates {REPO / '.venv-dev'} with the "
        "dev-server extra), or set LANGMEM_DEV_VENV to a venv with langgraph-cli[inmem].")
    return cli


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LANGMEM_DATABASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                        "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY")}
    env.update(
        PYTHONPATH=str(REPO),  # this checkout's code, whatever the venv has installed
        LANGMEM_DATA_DIR=str(data_dir),
        HF_HUB_OFFLINE="1",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        # The in-memory runtime would otherwise pickle its threads into ./.langgraph_api.
        LANGGRAPH_DISABLE_FILE_PERSISTENCE="true",
    )
    return env


def _make_keys(data_dir: Path) -> dict[str, str]:
    # Before the server starts, then this process lets go of the embedded server, so
    # the server is its only user and stops it when it exits.
    try:
        with PostgresMemoryStore.embedded(data_dir, index=None) as store:
            store.setup()
            keys = {user: create_key(store, user) for user in ("alice", "bob")}
            keys["ops"] = create_key(store, "ops", admin=True)
            return keys
    finally:
        stop_embedded(data_dir)


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"langgraph dev exited:\n{log.read_text()[-4000:]}"
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"langgraph dev not healthy in {START_TIMEOUT} s:\n"
                         f"{log.read_text()[-4000:]}")


def _postgres_of(data_dir: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(p.info.get("cmdline") or [])
        if "postgres" in (p.info.get("name") or "") and str(data_dir) in cmdline:
            found.append(p)
    return found


def _stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"langgraph dev did not stop in {STOP_TIMEOUT} s") from None
    return proc.returncode


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("langgraph-dev")
    data_dir = (root / "data").resolve()
    keys = _make_keys(data_dir)
    port = _free_port()
    log = root / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(_langgraph_cli()), "dev", "--no-browser", "--no-reload",
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO, env=_server_env(data_dir), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
    srv = DevServer(f"http://127.0.0.1:{port}", proc, log, data_dir, keys)
    try:
        _wait_healthy(srv.url, proc, log)
        yield srv
    finally:
        if proc.poll() is None:
            _stop(proc)


def _wait_for(what: str, probe: Callable[[], Any], timeout: float = EXTRACTION_TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := probe():
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what}: not seen within {timeout} s")


def _say(client: SyncLangGraphClient, thread_id: str | None, text: str, **kw: Any
         ) -> dict[str, Any]:
    """One turn; the thread's state after it (``messages``, ``memory_context`` ...)."""
    state = client.runs.wait(thread_id, "memory_agent",
                             input={"messages": [{"role": "user", "content": text}]}, **kw)
    assert isinstance(state, dict), state
    return state


def _reply(state: dict[str, Any]) -> str:
    return str(state["messages"][-1]["content"])


def _contents(client: SyncLangGraphClient, namespace: tuple[str, ...]) -> list[str]:
    items = client.store.search_items(namespace, limit=100)["items"]
    return [str(item["value"].get("content")) for item in items]


def _memory_about(client: SyncLangGraphClient, user: str, word: str) -> Callable[[], Any]:
    return lambda: [c for c in _contents(client, ("memories", user)) if word in c.lower()]


def test_a_fact_said_in_one_thread_is_recalled_in_another(server: DevServer) -> None:
    alice = server.client("alice")
    first = alice.threads.create()["thread_id"]
    _say(alice, first, "My name is Alice and I am allergic to peanuts.")
    # Background extraction: the worker outlives the run (the store is the server's).
    _wait_for("alice's peanut allergy in the store", _memory_about(alice, "alice", "peanut"))

    second = alice.threads.create()["thread_id"]
    # The block the model is given on the new thread holds the fact; the offline
    # model answers the name question from it.
    state = _say(alice, second, "What am I allergic to?")
    assert "peanut" in state["memory_context"].lower()
    assert "alice" in _reply(_say(alice, second, "What is my name?")).lower()


def test_a_second_user_sees_nothing_of_the_first(server: DevServer) -> None:
    alice, bob = server.client("alice"), server.client("bob")
    _wait_for("alice's memory", _memory_about(alice, "alice", "peanut"))
    thread = bob.threads.create()["thread_id"]
    state = _say(bob, thread, "What am I allergic to? What is my name?")
    assert "peanut" not in state["memory_context"].lower()
    assert "alice" not in (state["memory_context"] + _reply(state)).lower()
    assert _contents(bob, ("memories", "bob")) == []
    assert bob.store.list_namespaces(prefix=["memories"])["namespaces"] == []
    for call in (lambda: bob.store.search_items(("memories", "alice")),
                 lambda: bob.store.list_namespaces(prefix=["memories", "alice"])):
        with pytest.raises(httpx.HTTPStatusError) as refused:
            call()
        assert refused.value.response.status_code == 403
    alice_threads = alice.threads.search(limit=100)
    assert alice_threads
    with pytest.raises(httpx.HTTPStatusError) as hidden:
        bob.threads.get(alice_threads[0]["thread_id"])
    assert hidden.value.response.status_code == 404


def test_the_store_endpoints_list_the_users_memories(server: DevServer) -> None:
    alice = server.client("alice")
    _wait_for("alice's memory", _memory_about(alice, "alice", "peanut"))
    namespaces = alice.store.list_namespaces()["namespaces"]  # no prefix: scoped to alice
    assert namespaces and all(ns[:2] == ["memories", "alice"] for ns in namespaces)
    items = alice.store.search_items(("memories",), limit=100)["items"]  # scoped too
    peanut = next(i for i in items if "peanut" in str(i["value"].get("content")).lower())
    assert peanut["namespace"][:2] == ["memories", "alice"]
    got = alice.store.get_item(tuple(peanut["namespace"]), peanut["key"])
    assert got is not None and got["value"]["content"] == peanut["value"]["content"]
    hits = alice.store.search_items(("memories", "alice"), query="allergy", limit=5)["items"]
    assert any("peanut" in str(h["value"].get("content")).lower() for h in hits)
    # An admin key (a support tool, a developer in Studio) is not confined.
    admin = server.client("ops")
    assert any("peanut" in c.lower() for c in _contents(admin, ("memories", "alice")))


def test_a_client_cannot_choose_another_user(server: DevServer) -> None:
    alice, bob = server.client("alice"), server.client("bob")
    thread = alice.threads.create()["thread_id"]
    _say(alice, thread, "I live in Lisbon.", config={"configurable": {"user_id": "bob"}})
    _wait_for("the fact under alice", _memory_about(alice, "alice", "lisbon"))
    assert not any("lisbon" in c.lower() for c in _contents(bob, ("memories", "bob")))
    # The same through `context`, the newer way to pass run settings.
    thread = alice.threads.create()["thread_id"]
    _say(alice, thread, "I work at Acme.", context={"user_id": "bob"})
    _wait_for("the fact under alice", _memory_about(alice, "alice", "acme"))
    assert not any("acme" in c.lower() for c in _contents(bob, ("memories", "bob")))

    # `x-auth-scheme: langsmith` is how Studio skips custom auth in `langgraph dev`
    # unless `disable_studio_auth` is set: a header must not stand in for a key.
    for headers in ({}, {"Authorization": "Bearer not-a-key"},
                    {"Authorization": f"Basic {server.keys['alice']}"},
                    {"x-auth-scheme": "langsmith"}):
        response = httpx.post(f"{server.url}/store/items/search", headers=headers,
                              json={"namespace_prefix": ["memories", "alice"]}, timeout=10)
        assert response.status_code == 401, (headers, response.text)


def _refused(call: Callable[[], Any], status: int = 403) -> httpx.Response:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        call()
    assert refused.value.response.status_code == status, refused.value.response.text
    return refused.value.response


def test_the_job_graph_is_an_admins(server: DevServer) -> None:
    # The jobs graph takes `now`, `user` and `force`: a run of it ages, rescores or purges
    # any user's memory. A non-admin key is refused before a run is created, on every
    # way of naming the graph; an admin key runs it.
    admin = server.client("ops")
    graph_assistant = next(a for a in admin.assistants.search(graph_id="jobs", limit=10)
                           if a["graph_id"] == "jobs")["assistant_id"]
    attack = {"job": "lifecycle", "user": "alice", "force": True,
              "now": "2035-01-01T00:00:00+00:00"}
    before = {u: sorted(_contents(admin, ("memories", u))) for u in ("alice", "bob")}
    for user in ("alice", "bob"):
        client = server.client(user)
        for assistant in ("jobs", graph_assistant):
            _refused(lambda c=client, a=assistant: c.runs.wait(None, a, input=attack))
            thread = client.threads.create()["thread_id"]
            _refused(lambda c=client, a=assistant, t=thread: c.runs.create(t, a, input=attack))
            _refused(lambda c=client, a=assistant: c.crons.create(
                a, schedule="* * * * *", input=attack))
            _refused(lambda c=client, a=assistant, t=thread: c.crons.create_for_thread(
                t, a, schedule="* * * * *", input=attack))
            assert client.runs.list(thread) == []
        _refused(lambda c=client: c.assistants.create("jobs", name="mine"))
        mine = client.assistants.create("memory_agent", name=f"{user}'s agent")
        _refused(lambda c=client, a=mine["assistant_id"]: c.assistants.update(
            a, graph_id="jobs"))
        assert client.crons.search() == []
    # Nothing ran: the memories are as they were, and no job run was recorded.
    assert {u: sorted(_contents(admin, ("memories", u))) for u in ("alice", "bob")} == before
    jobs = {j["job"]: j for j in _api(server, "ops", "GET", "/v1/jobs").json()}
    assert jobs["lifecycle"]["period"] is None, jobs["lifecycle"]

    done = admin.runs.wait(None, "jobs", input={"job": "sweep-ttl"})
    assert isinstance(done, dict)
    assert done["job"] == "sweep-ttl" and done["status"] == "done", done
    assert done["error"] is None


def test_an_admins_cron_runs_the_job_graph(server: DevServer) -> None:
    # A cron's runs are made by the server later, as the cron's user: the admin's
    # permission goes with them (a user's cron never gets more than its user).
    admin = server.client("ops")
    thread = admin.threads.create()["thread_id"]
    cron = admin.crons.create_for_thread(thread, "jobs", schedule="* * * * *",
                                         input={"job": "sweep-ttl", "force": True})
    try:
        values = _wait_for("a run of the admin's cron", lambda: admin.threads.get_state(
            thread)["values"].get("status"), timeout=CRON_TIMEOUT)
        assert values == "done", admin.threads.get_state(thread)["values"]
    finally:
        admin.crons.delete(cron["cron_id"])


def _api(server: DevServer, user: str, method: str, path: str, **kw: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {server.keys[user]}"}
    return httpx.request(method, f"{server.url}{path}", headers=headers, timeout=30, **kw)


def test_the_memory_api_is_mounted_beside_the_graphs(server: DevServer) -> None:
    # langgraph.json's "http": the /v1 routes, on the server's own store.
    _wait_for("alice's memory", _memory_about(server.client("alice"), "alice", "peanut"))
    me = _api(server, "alice", "GET", "/v1/me")
    assert me.status_code == 200, me.text
    assert me.json() == {"user_id": "alice", "admin": False}
    items = _api(server, "alice", "GET", "/v1/memories", params={"limit": 500}).json()["items"]
    peanut = next(i for i in items if "peanut" in i["content"].lower())
    written = _api(server, "bob", "POST", "/v1/memories",
                   json={"content": "Bob's locker code is 4711."})
    assert written.status_code == 201, written.text
    # The store the graphs use is the one the app wrote to (no second database).
    assert any("4711" in c for c in _contents(server.client("bob"), ("memories", "bob")))

    # Never another user's memory: not listed, not by id, not by asking for it.
    bobs = _api(server, "bob", "GET", "/v1/memories", params={"limit": 500}).json()["items"]
    assert any("4711" in i["content"] for i in bobs)
    assert not any("peanut" in i["content"].lower() or "alice" in i["content"].lower()
                   for i in bobs)
    assert _api(server, "bob", "GET", f"/v1/memories/{peanut['id']}").status_code == 404
    assert _api(server, "bob", "GET", "/v1/memories",
                params={"user_id": "alice"}).status_code == 403
    alices = _api(server, "alice", "GET", "/v1/memories", params={"limit": 500}).json()
    assert not any("4711" in i["content"] for i in alices["items"])
    admin = _api(server, "ops", "GET", "/v1/memories", params={"user_id": "alice"})
    assert any("peanut" in i["content"].lower() for i in admin.json()["items"])

    # No credentials, wrong ones, or Studio's header: refused before any route runs.
    for headers in ({}, {"Authorization": "Bearer not-a-key"},
                    {"Authorization": f"Basic {server.keys['alice']}"},
                    {"x-auth-scheme": "langsmith"}):
        for path in ("/v1/me", "/v1/memories", f"/v1/memories/{peanut['id']}"):
            response = httpx.get(f"{server.url}{path}", headers=headers, timeout=10)
            assert response.status_code == 401, (path, headers, response.text)
            assert "peanut" not in response.text.lower()

    # The server's OpenAPI document lists the mounted routes beside its own.
    spec = httpx.get(f"{server.url}/openapi.json", timeout=30)
    assert spec.status_code == 200
    assert {"/v1/me", "/v1/memories", "/threads"} <= set(spec.json()["paths"])


def test_the_docs_recipe_runs_against_the_server(server: DevServer) -> None:
    # The recipe of docs/langgraph-server.md, as written, on this server with its keys.
    (recipe,) = re.findall(r"```python\n(.*?)```", SERVER_PAGE, re.S)
    code = compile(recipe.replace("http://127.0.0.1:2024", server.url),
                   "docs/langgraph-server.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    asyncio.run(eval(code, {"key": server.keys["bob"], "admin_key": server.keys["ops"]}))
    _wait_for("bob's Lisbon in the store", _memory_about(server.client("bob"), "bob", "lisbon"))


def test_the_server_stops_cleanly_with_its_database(server: DevServer) -> None:
    assert _postgres_of(server.data_dir), "the embedded PostgreSQL should run meanwhile"
    before = len(server.log_text())
    code = _stop(server.proc)
    shutdown = server.log_text()[before:]
    assert code == 0, shutdown[-4000:]
    assert "Traceback" not in shutdown, shutdown[-4000:]
    whole = server.log_text()
    for failure in ("Background extraction pass failed", "went away", "connection is closed"):
        assert failure not in whole, failure
    deadline = time.monotonic() + 10  # pg_ctl stop waits for the postmaster; be lenient
    while _postgres_of(server.data_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _postgres_of(server.data_dir) == []
