"""A finished turn's writes (queue, message log, reinforcement) are one statement, and
so are a turn's start on its thread (the activity stamp) and its recent-history read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.errors import ConfigurationError, InvalidInputError, InvalidNamespaceError
from langmem_layer.sql import renamed, with_writes
from langmem_layer.store.ops import (
    EnqueueOp,
    IdleThreadsOp,
    LogMessagesOp,
    PendingOp,
    RecentMessagesOp,
    RecordTurnOp,
    SummaryCandidatesOp,
    TouchOp,
    TouchThreadOp,
    TrustCountOp,
    TrustOp,
    TurnReadsOp,
    TurnStartOp,
)
from langmem_layer.types import memory_namespace
from tests import audit
from tests.fakes import Clock

#: The turns stay queued: no background pass takes them while a test looks.
_NO_WAKE = MemorySettings(extract_every_n_turns=1000)

#: How a binding statement starts (sql/rls.py ``bind``; setup's own before migration 33).
BINDING = ("SELECT langmem_bind", "SELECT set_config")


def test_renamed_renames_every_placeholder_and_nothing_else() -> None:
    text, params = renamed(("SELECT %(a)s, %(b)s, '%%(c)s', %(a)s", {"a": 1, "b": 2}), "x_")
    assert text == "SELECT %(x_a)s, %(x_b)s, '%%(c)s', %(x_a)s"
    assert params == {"x_a": 1, "x_b": 2}


def test_with_writes_makes_ctes_whose_names_cannot_clash() -> None:
    main = ("INSERT INTO q (u, t) VALUES (%(user)s, %(thread)s) RETURNING id",
            {"user": "alice", "thread": None})
    log = ("INSERT INTO m (u, t) VALUES (%(user)s, %(thread)s)", {"user": "alice", "thread": ""})
    text, params = with_writes(main, log)
    assert text.startswith("WITH w0 AS (INSERT INTO m (u, t) VALUES (%(w0_user)s, "
                           "%(w0_thread)s))")
    assert text.endswith("VALUES (%(m_user)s, %(m_thread)s) RETURNING id")
    assert params == {"m_user": "alice", "m_thread": None, "w0_user": "alice",
                      "w0_thread": ""}
    assert with_writes(main) == main


def test_a_turns_writes_go_in_one_statement(store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, settings=_NO_WAKE)
    fact = layer.remember("alice", "Alice lives in Lisbon.")
    turn = [HumanMessage("Where do I live?", id="h1"), AIMessage("In Lisbon.", id="a1")]
    with audit.RECORDER.capture() as seen:
        entry = layer.threads.record_turn("alice", turn, thread_id="t1", reinforce=[fact.key])
    statements = [" ".join(s.split()) for s in seen.elements()]
    binding = [s for s in statements if s.startswith(BINDING)]
    # On Citus its parts (Query.parts: the message log, the access stamps, the queue),
    # sent together, each routed to the user's shard.
    assert len(statements) - len(binding) == (3 if store.distributed else 1), statements
    assert entry is not None
    (pending,) = store.batch([PendingOp("alice")])
    assert [p["id"] for p in pending] == [entry]
    (logged,) = store.batch([RecentMessagesOp("alice", "work", clock() - timedelta(hours=1),
                                              10, "elsewhere")])
    assert [m.text for m in logged] == ["Where do I live?", "In Lisbon."]
    assert layer.get("alice", fact.key).record.access_count == fact.record.access_count + 1
    # The same turn again: queued before, nothing new logged, reinforced again.
    assert layer.threads.record_turn("alice", turn, thread_id="t1", reinforce=[fact.key]) is None
    (logged,) = store.batch([RecentMessagesOp("alice", "work", clock() - timedelta(hours=1),
                                              10, "elsewhere")])
    assert len(logged) == 2
    layer.close()


def test_a_part_of_another_user_is_refused_and_nothing_is_written(store, clock: Clock
                                                                  ) -> None:
    layer = MemoryLayer(store, clock=clock, settings=_NO_WAKE)
    theirs = layer.remember("bob", "Bob lives in Porto.")
    now = clock()
    enqueue = EnqueueOp("alice", "k1", "work", [], now, "t1", None, now)
    for op in (RecordTurnOp("alice", enqueue, touch=TouchOp("bob", (theirs.key,), now)),
               RecordTurnOp("alice", enqueue, log=LogMessagesOp(
                   "bob", "t1", "work", [{"message_id": "m", "role": "human",
                                             "text": "hi"}], now)),
               RecordTurnOp("bob", enqueue)):
        with pytest.raises(InvalidInputError, match="another user"):
            store.batch([op])
    assert store.batch([PendingOp("alice")]) == [[]]
    assert layer.get("bob", theirs.key).record.access_count == theirs.record.access_count
    layer.close()


def test_with_writes_joins_the_main_statements_own_ctes() -> None:
    main = ("WITH r AS (SELECT %(x)s AS v) SELECT v FROM r", {"x": 1})
    text, _ = with_writes(main, ("DELETE FROM t WHERE a = %(x)s", {"x": 2}))
    assert " ".join(text.split()) == (
        "WITH w0 AS (DELETE FROM t WHERE a = %(w0_x)s), r AS (SELECT %(m_x)s AS v) "
        "SELECT v FROM r")
    text, _ = with_writes(("with recursive r(n) AS (SELECT 1) SELECT n FROM r", {}),
                          ("DELETE FROM t", {}))
    assert " ".join(text.split()) == ("with recursive w0 AS (DELETE FROM t), "
                                      "r(n) AS (SELECT 1) SELECT n FROM r")


def test_a_turns_start_stamps_the_thread_and_reads_the_history_in_one_statement(
        store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, settings=_NO_WAKE)
    layer.threads.record_turn("alice", [HumanMessage("I like tea.", id="h1")], thread_id="t0")
    clock.advance(minutes=5)
    now = clock()
    stamp = TouchThreadOp("alice", "t1", "work", None, now)
    recent = RecentMessagesOp("alice", "work", now - timedelta(hours=1), 10, "t1")
    with audit.RECORDER.capture() as seen:
        (history,) = store.batch([TurnStartOp("alice", stamp, recent)])
    statements = [" ".join(s.split()) for s in seen.elements()]
    sent = [s for s in statements if not s.startswith(BINDING)]
    # On Citus the stamp, then the read as a call on the user's worker (the audit
    # records the call and the statement it runs).
    assert len(sent) == (3 if store.distributed else 1), sent
    assert len([s for s in sent if "FROM langmem_on_shard(" in s]) == store.distributed
    assert [m.text for m in history] == ["I like tea."]
    # The stamp was written: the thread is idle from now on, not before.
    (idle,) = store.batch([IdleThreadsOp(now + timedelta(seconds=1), 10)])
    assert ("alice", "t1") in {(t.user_id, t.thread_id) for t in idle}
    (idle,) = store.batch([IdleThreadsOp(now, 10)])
    assert ("alice", "t1") not in {(t.user_id, t.thread_id) for t in idle}
    with pytest.raises(InvalidInputError, match="another user"):
        store.batch([TurnStartOp("alice", stamp._replace(user_id="bob"), recent)])
    layer.close()


def test_a_turns_trust_and_summaries_are_one_read(store, clock: Clock) -> None:
    now = clock()
    summaries = SummaryCandidatesOp("alice", memory_namespace("alice", "work"),
                                    "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z", 12, now)
    (reads,) = store.batch([TurnReadsOp("alice", summaries)])  # nothing yet: one NULL row
    assert reads.summaries == [] and reads.learned.by_agent == {}
    store.batch([TrustCountOp("alice", "planner", "", 1, now, 2),
                 TrustCountOp("bob", "planner", "", 0, now, 2)])
    with audit.RECORDER.capture() as seen:
        (reads,) = store.batch([TurnReadsOp("alice", summaries)])
    statements = [" ".join(s.split()) for s in seen.elements()]
    # On Citus one call of it; the audit records the call and the statement it runs.
    assert len([s for s in statements if not s.startswith(BINDING)]) == (
        2 if store.distributed else 1)
    (alone,) = store.batch([TrustOp("alice")])
    assert reads.learned == alone and reads.learned.by_agent == {"planner": 0.5}
    with pytest.raises(InvalidNamespaceError):
        store.batch([TurnReadsOp("alice", summaries._replace(user_id="bob"))])


def test_an_unknown_extraction_mode_is_a_configuration_error(store) -> None:
    with pytest.raises(ConfigurationError, match="'background' or 'inline'"):
        MemoryLayer(store, extraction="manual")  # type: ignore[arg-type]
