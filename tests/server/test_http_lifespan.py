"""The server's lifetime: extraction in the background, and a clean stop on SIGTERM.

The SIGTERM test runs uvicorn in a subprocess on a loopback port, sends turns, stops it
right after the last one and checks that it exited 0 without a traceback and that no
turn was lost: each is extracted, or still queued and claimable (never left leased).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import psycopg
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.facade import MemoryLayer
from langmem_layer.server.http.lifespan import memory_lifespan
from langmem_layer.settings import MemorySettings
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings
from tests.langserve_app import offline_agent

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 120.0  # seconds: a bound on waiting for the server, not a performance assertion

TURNS = ("I live in Lisbon", "I am allergic to peanuts", "I work at Acme",
         "My sister is called Ana", "I love jazz")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _queue(uri: str, user: str) -> list[tuple[int, bool, bool]]:
    """(id, done, leased now) for each of the user's queue entries."""
    with psycopg.connect(uri, autocommit=True) as conn:
        return conn.execute(
            "SELECT id, done_at IS NOT NULL, coalesce(locked_until > now(), false) "
            "FROM langmem_extraction_queue WHERE user_id = %s ORDER BY id",
            (user,)).fetchall()


def _wait_ready(client: httpx.Client, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + LIMIT
    while True:
        assert proc.poll() is None, f"the server exited: {proc.communicate()[1]}"
        assert time.monotonic() < deadline, "the server did not start in time"
        try:
            if client.get("/agent/input_schema").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)


def test_sigterm_after_the_last_turn_exits_cleanly_and_loses_no_turn(pg_uri: str) -> None:
    user, port = f"sig-{uuid.uuid4().hex[:8]}", _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "LANGMEM_DATABASE_URL": pg_uri,
           # Every third turn of a thread wakes extraction: the last turns are still
           # queued when the signal comes, for the shutdown to deal with.
           "LANGMEM_EXTRACT_EVERY_N_TURNS": "3"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "langmem_layer.server.http.serve", "tests.langserve_app:app",
         "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=LIMIT,
                          headers={"x-test-user": user}) as client:
            _wait_ready(client, proc)
            for text in TURNS:
                r = client.post("/agent/invoke", json={
                    "input": {"messages": [{"type": "human", "content": text}]},
                    "config": {"configurable": {"thread_id": "s"}}})
                assert r.status_code == 200, r.text
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=LIMIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert "Application shutdown complete" in err

    entries = _queue(pg_uri, user)
    assert len(entries) == len(TURNS)
    assert not [e for e in entries if not e[1] and e[2]], "a turn was left leased"
    # This lifespan drains before it closes the store: the turns the signal caught
    # queued were extracted on the way out.
    assert all(done for _, done, _ in entries)
    # Whatever is not extracted yet is claimable now, by the next worker.
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        layer = MemoryLayer(store, extractor=RuleExtractor())
        layer.admin.process_pending(user_id=user)
        layer.close()
        contents = {r.record.content for r in layer.list(user)}
    assert all(done for _, done, _ in _queue(pg_uri, user))
    assert {"Lives in Lisbon.", "Is allergic to peanuts."} <= contents


async def test_the_worker_extracts_turns_queued_before_the_server_started(
        astore: AsyncPostgresMemoryStore) -> None:
    user = f"pre-{uuid.uuid4().hex[:8]}"
    quiet = MemoryLayer(astore, extractor=RuleExtractor(),
                        settings=MemorySettings(extract_every_n_turns=100))
    await quiet.admin.asubmit(user, [HumanMessage("I live in Lisbon"), AIMessage("Noted.")],
                        thread_id="t")

    async with memory_lifespan(store=astore, graph_factory=offline_agent, poll_seconds=0.05,
                               layer_options={"extractor": RuleExtractor()}) as service:
        assert service.worker.running
        for _ in range(int(LIMIT / 0.05)):  # the worker's first pass, without a drain
            if await service.layer.alist(user):
                break
            await asyncio.sleep(0.05)
        assert [r.record.content for r in await service.layer.alist(user)] == [
            "Lives in Lisbon."]
    assert not service.worker.running
    # A store passed in is left open for its owner.
    assert await astore.aget(("probe",), "k") is None


async def test_leaving_the_lifespan_extracts_every_queued_turn(
        astore: AsyncPostgresMemoryStore, pg_uri: str) -> None:
    user = f"exit-{uuid.uuid4().hex[:8]}"
    settings = MemorySettings(extract_every_n_turns=100)  # the nodes never wake it
    async with memory_lifespan(store=astore, graph_factory=offline_agent, settings=settings,
                               poll_seconds=3600,
                               layer_options={"extractor": RuleExtractor()}) as service:
        config = {"configurable": {"user_id": user, "thread_id": "t"}}
        for text in TURNS[:3]:
            await service.graph.ainvoke({"messages": [HumanMessage(text)]}, config)
    entries = _queue(pg_uri, user)
    assert len(entries) == 3
    assert all(done for _, done, _ in entries)


async def test_the_lifespan_freezes_the_start_up_heap_until_its_exit(
        astore: AsyncPostgresMemoryStore) -> None:
    import gc

    assert gc.get_freeze_count() == 0
    async with memory_lifespan(store=astore, graph_factory=offline_agent, poll_seconds=3600,
                               layer_options={"extractor": RuleExtractor()}):
        assert gc.get_freeze_count() > 0  # the full passes skip the start-up objects
    assert gc.get_freeze_count() == 0
    async with memory_lifespan(store=astore, graph_factory=offline_agent, poll_seconds=3600,
                               layer_options={"extractor": RuleExtractor()}, freeze_gc=False):
        assert gc.get_freeze_count() == 0
    # Something froze first: the exit leaves that as it found it.
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        async with memory_lifespan(store=astore, graph_factory=offline_agent,
                                   poll_seconds=3600,
                                   layer_options={"extractor": RuleExtractor()}):
            pass
        assert gc.get_freeze_count() >= frozen
    finally:
        gc.unfreeze()
