"""``langmem-layer serve`` end to end: the CLI's server in a subprocess on loopback.

A key made with ``keys create``; a turn through ``/agent/invoke`` with LangServe's
``RemoteRunnable`` and the bearer key; the memory it leaves visible in ``/v1/memories``
once extracted (polled, bounded); another user's key sees nothing of it; SIGTERM stops
the server with exit 0, no traceback and the queue drained.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langserve import RemoteRunnable

from langmem_layer.cli import main

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 180.0  # seconds: a bound on waiting, not a performance assertion
HTTP_PAGE = (ROOT / "docs" / "http.md").read_text(encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _key(pg_uri: str, user: str, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["--database-url", pg_uri, "keys", "create", "--user", user]) == 0
    return capsys.readouterr().out.strip()


def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def test_serve_runs_the_agent_and_the_rest_api_and_stops_cleanly(
        pg_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    alice, bob = (f"u-{uuid.uuid4().hex[:10]}" for _ in range(2))
    key_a, key_b = _key(pg_uri, alice, capsys), _key(pg_uri, bob, capsys)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "langmem_layer.cli", "--database-url", pg_uri, "serve",
         "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            def ready() -> bool:
                assert proc.poll() is None, f"the server exited: {proc.communicate()[1]}"
                try:
                    return http.get("/healthz").status_code == 200
                except httpx.TransportError:
                    return False

            _until(ready, "the server to start")
            # The first turn is the recipe of docs/http.md, as written, on this server.
            (recipe,) = re.findall(r"```python\n(from langchain_core.*?)```", HTTP_PAGE, re.S)
            recipe = recipe.replace("http://127.0.0.1:8000", url).replace(
                "Bearer KEY", f"Bearer {key_a}")
            exec(compile(recipe, "docs/http.md", "exec"), {})
            agent = RemoteRunnable(f"{url}/agent", timeout=120,
                                   headers={"Authorization": f"Bearer {key_a}"})
            assert http.get("/agent/input_schema").status_code == 401  # no key

            ha, hb = ({"Authorization": f"Bearer {k}"} for k in (key_a, key_b))
            found: list[dict[str, object]] = []

            def extracted() -> bool:
                found[:] = http.get("/v1/memories", headers=ha).json()["items"]
                return any("peanuts" in str(m["content"]) for m in found)

            _until(extracted, "the turn's memory in /v1/memories")
            assert http.get("/v1/memories", headers=hb).json()["items"] == []
            for m in found:
                assert http.get(f"/v1/memories/{m['id']}", headers=hb).status_code == 404
            # Bob's key cannot run the agent as Alice either.
            r = http.post("/agent/invoke", headers=hb, json={
                "input": {"messages": [{"type": "human", "content": "hi"}]},
                "config": {"configurable": {"user_id": alice}}})
            assert r.status_code == 403
            out = agent.invoke({"messages": [HumanMessage("I work at Acme")]},
                               config={"configurable": {"thread_id": "t2"}})
            assert isinstance(out["messages"][-1], AIMessage)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=LIMIT)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        left = conn.execute(
            "SELECT count(*) FROM langmem_extraction_queue WHERE user_id = %s AND "
            "done_at IS NULL AND locked_until > now()", (alice,)).fetchone()
        rows = conn.execute("SELECT count(*) FROM langmem_items WHERE user_id = %s",
                            (bob,)).fetchone()
    assert left == (0,)  # drained: nothing left leased by the stopped server
    assert rows == (0,)


def test_uvicorn_parses_http_with_the_compiled_parser_the_server_extra_installs() -> None:
    # uvicorn's "auto" protocol is httptools' when httptools can be imported, else h11's.
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert AutoHTTPProtocol is HttpToolsProtocol
