"""The statements a served turn sends, pinned: a new statement on the hot path fails here.

Counted with the statement audit (``tests/audit.py``): every SQL statement library code
sends, pipelined or not, extraction included (the checkpointer's are LangGraph's and
not counted; nor is transaction control, BEGIN, COMMIT or a savepoint, which the
stores send in their pipelines as psycopg's ``transaction()`` used to, uncounted).
The ceilings are today's counts and only go down; the aim is 12 for a turn. Today's
read: the user binding, the vector-index lookup, the candidates (with the links between
them, which took a second transaction of two statements before), learned trust with
the summary candidates (one statement), and the thread's activity stamp with the
recent history (one statement). A turn's end (queue, message log, reinforcement) is
one statement. The extraction's new memories' context vectors add three: their chains
read in the transaction that writes them, and a transaction of their own keeping the
vectors (its binding and one insert), since the model that embeds them is not called
inside a transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from langmem_layer import MemoryLayer
from langmem_layer.errors import InvalidInputError
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.facade.agent_graph import build_agent_graph
from langmem_layer.offline_chat import OfflineChatModel
from langmem_layer.store import driver
from langmem_layer.store.ops import ApplyOnceOp, LockUserWritesOp, MarkAppliedOp
from langmem_layer.store.sync import PostgresMemoryStore
from tests import audit
from tests.fakes import Clock

#: A turn through the agent graph: load_memory, assemble_context, the model,
#: extract_after_turn, and the extraction that turn queues (inline here).
TURN_STATEMENTS = 28
#: The read ``load_memory`` makes.
READ_STATEMENTS = 5


def _count(work: Callable[[], object]) -> tuple[int, str]:
    """How many statements ``work`` sent, and a listing of them for a failure's message."""
    with audit.RECORDER.capture() as seen:
        work()
    listing = "\n".join(f"{n} x {' '.join(t.split())[:120]}" for t, n in seen.items())
    return sum(seen.values()), listing


def test_a_turn_and_its_read_send_no_more_statements_than_today(
        store: PostgresMemoryStore, clock: Clock) -> None:
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)
    graph = build_agent_graph(layer, model=OfflineChatModel()).compile(
        store=store, checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"user_id": "alice", "thread_id": "t1"}}
    graph.invoke({"messages": [HumanMessage("I work at Acme Robotics.")]}, config)
    clock.advance(minutes=1)
    turn, turn_sql = _count(lambda: graph.invoke(
        {"messages": [HumanMessage("I moved to Lisbon last year, I love it.")]}, config))
    clock.advance(minutes=1)
    read, read_sql = _count(lambda: layer.threads.load_thread(
        "alice", [HumanMessage("Where do I live?")], "Where do I live?", thread_id="t1",
        reinforce=False))
    assert turn <= TURN_STATEMENTS, f"a turn sent {turn} statements:\n{turn_sql}"
    assert read <= READ_STATEMENTS, f"load_memory's read sent {read} statements:\n{read_sql}"


def test_the_apply_takes_the_users_lock_in_its_first_check(store: PostgresMemoryStore,
                                                           clock: Clock) -> None:
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)
    with audit.RECORDER.capture() as seen:
        layer.ingest("alice", [HumanMessage("I live in Lisbon.")], thread_id="t1")
    statements = [" ".join(t.split()) for t in seen.elements()]
    locks = [s for s in statements if "pg_advisory_xact_lock" in s]
    assert len(locks) == 1 and "INSERT INTO langmem_applied_ops" in locks[0], statements
    now = clock()
    with pytest.raises(InvalidInputError, match="write lock of another user"):
        store.batch([ApplyOnceOp("alice", "op-1", (), now, LockUserWritesOp("bob"))])
    with pytest.raises(InvalidInputError, match="write lock of another user"):
        store.batch([MarkAppliedOp("alice", "op-1", now, LockUserWritesOp("bob"))])


def test_only_a_turns_reads_commit_without_waiting_for_the_disk(
        store: PostgresMemoryStore, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    # The read writes only the thread's activity stamp; every other write waits for it.
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)
    # Each transaction's statements, keyed by its Rounds, which the dict keeps alive:
    # keyed by id(), a freed Rounds' id can come back for the next transaction.
    sent: dict[driver.Rounds, list[str]] = {}
    next_round = driver.Rounds.next

    def record(self: driver.Rounds) -> list[Any]:
        statements = next_round(self)
        sent.setdefault(self, []).extend(q.sql for q in statements)
        return statements

    monkeypatch.setattr(driver.Rounds, "next", record)

    def transactions(work: Callable[[], object]) -> list[tuple[bool, str]]:
        sent.clear()
        work()
        return [(any("synchronous_commit" in q for q in t), " ".join(t)) for t in sent.values()]

    read = transactions(lambda: layer.threads.load_thread(
        "alice", [HumanMessage("Where do I live?")], "Where do I live?", thread_id="t1",
        reinforce=False))
    assert [relaxed for relaxed, _ in read] == [True]
    assert "INSERT INTO langmem_threads" in read[0][1]
    ingest = transactions(lambda: layer.ingest(
        "alice", [HumanMessage("I live in Lisbon.")], thread_id="t1"))
    (apply,) = [t for t in ingest if "langmem_applied_ops" in t[1]]
    assert not apply[0]
    reinforced = transactions(lambda: layer.threads.load_thread(
        "alice", [HumanMessage("Where do I live?")], "Where do I live?", thread_id="t1"))
    assert any("SET access" in sql for _, sql in reinforced)
    assert not any(relaxed for relaxed, sql in reinforced if "SET access" in sql)
