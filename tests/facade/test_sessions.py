"""Session close: the idle sweeper on the real database with LangGraph's own
PostgreSQL checkpointer, pruning with the checkpointer's own prune, the CLI job and
the checkpointer wiring for code and ``langgraph.json``."""

from __future__ import annotations

import importlib.util
import inspect
import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.cli import main
from tests.facade.test_working import build_graph, queue_entries
from tests.fakes import Clock

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("clean_working_tables")


def say(graph: Any, user: str, thread: str, *texts: str, clock: Clock) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for text in texts:
        clock.advance(minutes=1)
        out = graph.invoke({"messages": [HumanMessage(text)]},
                           {"configurable": {"user_id": user, "thread_id": thread}})
    return out


def thread_rows(pg_uri: str, user: str) -> dict[str, Any]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute("SELECT thread_id, closed_at FROM langmem_threads "
                            "WHERE user_id = %s", [user]).fetchall()
    return dict(rows)


def checkpoints(saver: PostgresSaver, thread: str) -> int:
    return len(list(saver.list({"configurable": {"thread_id": thread}})))


def test_idle_thread_closed_fresh_one_left_alone(store, saver, pg_uri: str,
                                                  clock: Clock) -> None:
    # No extract_after_turn and no trimming: only the sweeper hands these turns over.
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    graph = build_graph(layer, extract=False).compile(store=store, checkpointer=saver)
    user, old, fresh = "u-sweep", uuid.uuid4().hex, uuid.uuid4().hex
    say(graph, user, old, "I live in Lisbon.", "I prefer morning meetings.", clock=clock)
    clock.advance(hours=20)
    say(graph, user, fresh, "I work at Globex.", clock=clock)
    assert queue_entries(pg_uri, user) == []

    at = clock.now + timedelta(hours=4)  # old: idle 24 h and more; fresh: 4 h
    result = layer.threads.sweep_sessions(saver, now=at)
    assert result.closed == [(user, old)] and result.failed == []
    assert result.enqueued == 2 and result.pruned == []  # pruning is off by default
    assert [e["types"] for e in queue_entries(pg_uri, user)] == [["human", "ai"]] * 2
    # inline extraction: the closed thread's turns were extracted by the sweep
    assert {r.record.content for r in layer.list(user)} == {
        "Lives in Lisbon.", "Prefers morning meetings."}
    rows = thread_rows(pg_uri, user)
    assert rows[old] == at and rows[fresh] is None

    again = layer.threads.sweep_sessions(saver, now=at + timedelta(minutes=5))
    assert again.closed == [] and again.enqueued == 0

    # The user comes back to the closed thread: it opens again, and closes again later.
    clock.now = at + timedelta(hours=1)
    say(graph, user, old, "Where do I live?", clock=clock)
    assert thread_rows(pg_uri, user)[old] is None
    later = layer.threads.sweep_sessions(saver, now=clock.now + timedelta(hours=25))
    assert sorted(later.closed) == sorted([(user, old), (user, fresh)])
    assert later.enqueued == 2  # the new turn, and fresh's turn; the old ones not again


def test_turns_queued_at_their_end_are_not_queued_again(store, saver, pg_uri: str,
                                                       clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock,
                        settings=MemorySettings(extract_every_n_turns=10_000))
    graph = build_graph(layer, extract=True).compile(store=store, checkpointer=saver)
    user, thread = "u-wired", uuid.uuid4().hex
    say(graph, user, thread, "one thing", "another thing", "use the tool", clock=clock)
    assert len(queue_entries(pg_uri, user)) == 3
    result = layer.threads.sweep_sessions(saver, now=clock.now + timedelta(days=2), extract=False)
    assert result.closed == [(user, thread)] and result.enqueued == 0
    assert len(queue_entries(pg_uri, user)) == 3
    layer.close()


def test_pruning_keeps_the_latest_checkpoint_readable(store, saver, pg_uri: str,
                                                      clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock,
                        settings=MemorySettings(session_prune="keep_latest"))
    graph = build_graph(layer, extract=False).compile(store=store, checkpointer=saver)
    user, thread, other = "u-prune", uuid.uuid4().hex, uuid.uuid4().hex
    config = {"configurable": {"thread_id": thread}}
    say(graph, user, thread, "first", "second use the tool", "third", clock=clock)
    say(graph, user, other, "elsewhere", clock=clock)
    before = [m.id for m in graph.get_state(config).values["messages"]]
    assert checkpoints(saver, thread) > 5
    other_checkpoints = checkpoints(saver, other)

    clock.advance(hours=12)
    say(graph, user, other, "still here", clock=clock)  # `other` stays active
    result = layer.threads.sweep_sessions(saver, now=clock.now + timedelta(hours=13), extract=False)
    assert result.closed == result.pruned == [(user, thread)]
    assert checkpoints(saver, thread) == 1
    assert [m.id for m in graph.get_state(config).values["messages"]] == before
    assert checkpoints(saver, other) > other_checkpoints  # untouched
    # and the thread goes on from the kept checkpoint
    out = say(graph, user, thread, "back again", clock=clock)
    assert [m.id for m in out["messages"]][: len(before)] == before


def test_prune_delete_drops_the_thread(store, saver, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock)
    graph = build_graph(layer, extract=False).compile(store=store, checkpointer=saver)
    thread = uuid.uuid4().hex
    say(graph, "u-del", thread, "hello there", clock=clock)
    result = layer.threads.sweep_sessions(saver, now=clock.now + timedelta(days=1, seconds=1),
                                  prune="delete", extract=False)
    assert result.pruned == [("u-del", thread)]
    assert checkpoints(saver, thread) == 0
    assert graph.get_state({"configurable": {"thread_id": thread}}).values == {}


def test_ttl_setting_and_override(store, saver, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extraction="inline",
                        settings=MemorySettings(session_ttl_seconds=3600))
    graph = build_graph(layer, extract=False).compile(store=store, checkpointer=saver)
    thread = uuid.uuid4().hex
    say(graph, "u-ttl", thread, "hi", clock=clock)
    assert layer.threads.sweep_sessions(saver, now=clock.now + timedelta(minutes=59)).closed == []
    assert layer.threads.sweep_sessions(saver, now=clock.now + timedelta(minutes=61),
                                ttl_seconds=7200).closed == []
    assert layer.threads.sweep_sessions(saver, now=clock.now + timedelta(minutes=61)).closed


async def test_async_sweep(astore, pg_uri: str, clock: Clock) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    layer = MemoryLayer(astore, clock=clock, settings=MemorySettings(session_prune="keep_latest"))
    async with AsyncPostgresSaver.from_conn_string(pg_uri) as asaver:
        await asaver.setup()
        graph = build_graph(layer, extract=False).compile(store=astore, checkpointer=asaver)
        thread = uuid.uuid4().hex
        for text in ("I live in Porto.", "I speak Portuguese."):
            clock.advance(minutes=1)
            await graph.ainvoke({"messages": [HumanMessage(text)]},
                                {"configurable": {"user_id": "u-async", "thread_id": thread}})
        result = await layer.threads.asweep_sessions(asaver, now=clock.now + timedelta(days=2),
                                             extract=False)
        assert result.closed == result.pruned == [("u-async", thread)]
        assert result.enqueued == 2
        assert len([c async for c in asaver.alist({"configurable": {"thread_id": thread}})]) == 1
    assert len(queue_entries(pg_uri, "u-async")) == 2


def test_cli_sweep_sessions(store, saver, pg_uri: str, clock: Clock,
                            capsys: pytest.CaptureFixture[str]) -> None:
    layer = MemoryLayer(store, clock=clock)  # the suite's clock is days behind real time
    graph = build_graph(layer, extract=False).compile(store=store, checkpointer=saver)
    thread = uuid.uuid4().hex
    say(graph, "u-cli", thread, "I live in Oslo.", clock=clock)
    assert main(["--database-url", pg_uri, "sweep-sessions", "--prune", "keep_latest"]) == 0
    out = capsys.readouterr().out
    assert "closed 1 idle threads, queued 1 turns for extraction, pruned 1" in out
    assert len(queue_entries(pg_uri, "u-cli")) == 1
    assert checkpoints(saver, thread) == 1


def test_checkpointer_wiring_for_code_and_langgraph_json(pg_uri: str, monkeypatch) -> None:
    monkeypatch.setenv("LANGMEM_DATABASE_URL", pg_uri)
    from checkpointers.postgres import acheckpointer, checkpointer, database_url

    assert database_url() == pg_uri
    with checkpointer() as saver:
        assert isinstance(saver, PostgresSaver)
        assert saver.get_tuple({"configurable": {"thread_id": "nope"}}) is None
    config = json.loads((ROOT / "langgraph.json").read_text())
    path, name = config["checkpointer"]["path"].split(":")
    spec = importlib.util.spec_from_file_location("lg_checkpointer", ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # importing connects to nothing
    factory = getattr(module, name)
    assert inspect.isasyncgenfunction(inspect.unwrap(factory))
    assert factory.__name__ == acheckpointer.__name__


async def test_async_checkpointer_factory(pg_uri: str, monkeypatch) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from checkpointers.postgres import acheckpointer

    monkeypatch.setenv("LANGMEM_DATABASE_URL", pg_uri)
    async with acheckpointer() as saver:
        assert isinstance(saver, AsyncPostgresSaver)
        assert await saver.aget_tuple({"configurable": {"thread_id": "nope"}}) is None
