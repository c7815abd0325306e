"""Rounds: the statements a plan sends together, in one round trip.

A round is the next statement and the pending statements of the steps after it, as
long as no op can see another's statements out of the batch's order: free ops
(``Operation.free``, ``FREE_OPS``) share rounds, an op that is not free joins only
after every earlier statement of the round was its handler's last, and a round holds
one statement that sets transaction settings (``langmem_layer.store.plan``). Bindings
may differ within a round. :class:`~langmem_layer.store.driver.Rounds` lays each round
out as the store sends it: BEGIN, bindings, COMMIT with the last round when the plan
can tell, and neither for a batch done in one round. With a vector index, the read a turn makes goes
out in two rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from psycopg.pq import TransactionStatus

from langmem_layer import MemoryLayer
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.sql import numbered
from langmem_layer.store.driver import BEGIN, COMMIT, RELEASE, ROLLBACK_TO, SAVEPOINT, Rounds
from langmem_layer.store.plan import Binding, Handler, Plan, Query, Step
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import Clock


class A:
    """An op type."""


class B:
    """Another."""


def _handler(name: str, n: int, seen: list[str], *, marked: bool = False,
             sets: bool = False) -> Handler:
    """``n`` statements; ``marked``: the last says so; ``sets``: the first sets settings."""
    for i in range(n):
        rows = yield Query(f"{name}{i}", {}, last=marked and i == n - 1, sets=sets and i == 0)
        seen.append(f"{name}{i}:{rows[0]['r'] if rows else '-'}")
    return name


def _drain(next_round: Callable[[], list[Query]],
           deliver: Callable[[list[list[dict[str, Any]]]], None]) -> list[list[str]]:
    """Send rounds until none is left, with fake rows; the statements of each round."""
    rounds = []
    while queries := next_round():
        rounds.append([q.sql for q in queries])
        deliver([[{"r": q.sql}] for q in queries])
    return rounds


def _run(plan: Plan) -> list[list[str]]:
    """Execute ``plan`` with fake rows; the statements of each round."""
    return _drain(plan.next_round, plan.deliver_round)


def _plan(*steps: tuple[Any, ...]) -> tuple[Plan, list[str]]:
    """Steps of ``(name, statements, free, kind, user[, marked[, sets]])``."""
    seen: list[str] = []
    built = [Step([i], _handler(name, n, seen, marked=bool(rest[:1] and rest[0]),
                                sets=bool(rest[1:2] and rest[1])),
                  free=free, kind=kind, bind=Binding(user))
             for i, (name, n, free, kind, user, *rest) in enumerate(steps)]
    return Plan(built, len(built), None, None), seen


def test_consecutive_free_ops_share_a_round_and_each_gets_its_own_rows() -> None:
    plan, seen = _plan(("r", 2, True, A, "u"), ("t", 1, True, B, "u"))
    assert _run(plan) == [["r0", "t0"], ["r1"]]
    assert sorted(seen) == ["r0:r0", "r1:r1", "t0:t0"]
    assert plan.results() == ["r", "t"]


def test_free_ops_of_one_type_share_a_round() -> None:
    plan, _ = _plan(("r", 1, True, A, "u"), ("s", 1, True, A, "v"), ("t", 1, True, A, "w"))
    assert _run(plan) == [["r0", "s0", "t0"]]


def test_a_round_holds_one_statement_that_sets_settings() -> None:
    # A second HNSW walk's settings would overwrite the first one's before it runs.
    plan, _ = _plan(("r", 2, True, A, "u", False, True), ("s", 2, True, A, "u", False, True),
                    ("t", 1, True, B, "u"))
    assert _run(plan) == [["r0"], ["r1", "s0", "t0"], ["s1"]]


def test_an_op_that_is_not_free_waits_for_the_statements_before_it() -> None:
    # Unmarked statements may have more to come: the write runs alone, and nothing
    # runs before its second statement.
    plan, seen = _plan(("a", 1, True, A, "u"), ("w", 2, False, B, "u"), ("b", 1, True, B, "u"))
    assert _run(plan) == [["a0"], ["w0"], ["w1"], ["b0"]]
    assert seen == ["a0:a0", "w0:w0", "w1:w1", "b0:b0"]


def test_ops_after_last_statements_join_their_round_in_order() -> None:
    plan, seen = _plan(("a", 1, True, A, "u", True), ("w", 2, False, B, "u", True),
                       ("x", 1, False, B, "v", True), ("b", 1, True, B, "u", True))
    assert _run(plan) == [["a0", "w0"], ["w1", "x0", "b0"]]
    assert seen == ["a0:a0", "w0:w0", "w1:w1", "x0:x0", "b0:b0"]


def test_a_round_may_span_bindings_and_each_statement_carries_its_own() -> None:
    plan, _ = _plan(("a", 1, True, A, "u"), ("b", 1, True, B, "v"))
    queries = plan.next_round()
    assert [(q.sql, q.bind) for q in queries] == [("a0", Binding("u")), ("b0", Binding("v"))]


def test_an_owner_plan_runs_a_statement_a_round() -> None:
    seen: list[str] = []
    steps = [Step([0], _handler("d", 2, seen), free=True, kind=A, bind=Binding(None, owner=True)),
             Step([1], _handler("e", 1, seen), free=True, kind=B, bind=Binding(None, owner=True))]
    plan = Plan(steps, 2, None, None)
    assert not plan.pipelined
    assert _run(plan) == [["d0"], ["d1"], ["e0"]]


def test_a_handler_sending_a_statement_after_its_last_fails_loudly() -> None:
    def liar() -> Handler:
        yield Query("x", {}, last=True)
        yield Query("y", {})

    plan = Plan([Step([0], liar(), free=True, kind=A, bind=Binding("u"))], 1, None, None)
    plan.next_round()
    with pytest.raises(RuntimeError, match="after the one it marked last"):
        plan.deliver_round([[]])


def test_only_a_first_statement_may_set_settings() -> None:
    def late() -> Handler:
        yield Query("x", {})
        yield Query("y", {}, sets=True)

    plan = Plan([Step([0], late(), free=True, kind=A, bind=Binding("u"))], 1, None, None)
    plan.next_round()
    with pytest.raises(RuntimeError, match="only a first statement"):
        plan.deliver_round([[]])


def _bind(bind: Binding, *, commit_async: bool = False) -> Query:
    return Query(f"bind {bind.user}" + (" async" if commit_async else ""), {})


def _send(rounds: Rounds) -> list[list[str]]:
    return _drain(rounds.next, rounds.deliver)


def test_a_batch_done_in_one_round_sends_no_begin_or_commit() -> None:
    plan, seen = _plan(("a", 1, True, A, "u", True), ("b", 1, True, B, "v", True))
    assert _send(Rounds(plan, _bind)) == [["bind u", "a0", "bind v", "b0"]]
    assert seen == ["a0:a0", "b0:b0"]


def test_commit_goes_with_the_last_round_when_the_plan_can_tell() -> None:
    plan, _ = _plan(("a", 2, True, A, "u", True), ("b", 1, True, B, "u", True))
    assert _send(Rounds(plan, _bind)) == [
        [BEGIN.sql, "bind u", "a0", "b0"], ["a1", COMMIT.sql]]


def test_commit_has_a_round_of_its_own_when_the_plan_cannot_tell() -> None:
    plan, _ = _plan(("a", 1, True, A, "u"))
    assert _send(Rounds(plan, _bind)) == [[BEGIN.sql, "bind u", "a0"], [COMMIT.sql]]


def test_inside_the_callers_transaction_a_batch_runs_under_a_savepoint() -> None:
    # Neither BEGIN nor COMMIT: the caller's transaction (a pinned store's) goes on.
    plan, _ = _plan(("a", 1, True, A, "u", True))
    assert _send(Rounds(plan, _bind, nested=True)) == [
        [SAVEPOINT.sql, "bind u", "a0", RELEASE.sql]]
    plan, _ = _plan(("a", 2, True, A, "u"))
    rounds = Rounds(plan, _bind, nested=True)
    assert rounds.recovery() == []
    rounds.next()
    assert rounds.recovery() == [ROLLBACK_TO, RELEASE]


def test_a_plan_that_may_commit_asynchronously_says_so_in_its_first_binding() -> None:
    plan, _ = _plan(("a", 2, True, A, "u", True), ("b", 1, True, B, "v", True))
    plan.commit_async = True
    assert _send(Rounds(plan, _bind)) == [
        [BEGIN.sql, "bind u async", "a0", "bind v", "b0"], ["bind u", "a1", COMMIT.sql]]
    # Not inside a caller's transaction: the setting would hold for all of it.
    plan, _ = _plan(("a", 1, True, A, "u", True))
    plan.commit_async = True
    assert _send(Rounds(plan, _bind, nested=True)) == [
        [SAVEPOINT.sql, "bind u", "a0", RELEASE.sql]]


def test_on_a_connection_that_begins_by_itself_a_batch_always_commits() -> None:
    # Not autocommit: psycopg sends BEGIN before the first statement, so the batch
    # sends none, and commits even when done in one round.
    plan, _ = _plan(("a", 1, True, A, "u", True))
    assert _send(Rounds(plan, _bind, begun=True)) == [["bind u", "a0", COMMIT.sql]]


def test_a_store_that_splits_sends_a_statements_parts_in_its_place() -> None:
    # On Citus: the parts go in the same round, under the same binding, and the
    # handler gets the last part's rows, as it would the whole statement's.
    def one() -> Handler:
        rows = yield Query("whole", {}, last=True, parts=(("w0", {}), ("main", {})))
        return rows

    def plan() -> Plan:
        return Plan([Step([0], one(), free=True, kind=A, bind=Binding("u"))], 1, None, None)

    whole = plan()
    assert _send(Rounds(whole, _bind)) == [["bind u", "whole"]]
    assert whole.results() == [[{"r": "whole"}]]
    split = plan()
    assert _send(Rounds(split, _bind, split=True)) == [["bind u", "w0", "main"]]
    assert split.results() == [[{"r": "main"}]]


def test_a_store_on_a_connection_without_autocommit_commits_its_writes(pg_uri: str) -> None:
    with psycopg.connect(pg_uri) as conn:  # autocommit off
        store = PostgresMemoryStore(conn, index=None)
        store.put(("notes", "x"), "k", {"v": 1})
        assert conn.info.transaction_status == TransactionStatus.IDLE
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as other:
        item = other.get(("notes", "x"), "k")
        assert item is not None and item.value == {"v": 1}


def test_numbered_placeholders_are_postgresqls_own() -> None:
    assert numbered("SELECT %(a)s, %(b)s, %(a)s, 5 %% 2", {"a": 1, "b": 2}) == (
        "SELECT $1, $2, $1, 5 % 2", [1, 2])
    assert numbered("SELECT 5 % 2", None) == ("SELECT 5 % 2", None)  # sent as is
    for bad in [("SELECT %s", {"a": 1}), ("SELECT 5 % 2", {}), ("SELECT %(a)s", {})]:
        with pytest.raises(ValueError):
            numbered(*bad)


@pytest.fixture
def rounds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The size of every round the stores send."""
    sizes: list[int] = []
    real = Plan.next_round

    def counted(self: Plan) -> list[Any]:
        queries = real(self)
        if queries:
            sizes.append(len(queries))
        return queries

    monkeypatch.setattr(Plan, "next_round", counted)
    yield sizes


def test_the_read_of_a_turn_is_one_round_once_the_store_knows_the_user(
        store: PostgresMemoryStore, clock: Clock, rounds: list[int]) -> None:
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)
    for user in ("alice", "bob"):
        layer.ingest(user, [HumanMessage("I live in Lisbon and I work at Acme.")],
                     thread_id="t1")
    store.forget_index("bob")  # as if this process had never read bob's memories
    rounds.clear()
    layer.threads.load_thread("bob", [HumanMessage("Where do I live?")], "Where do I live?",
                      thread_id="t1", reinforce=False)
    # The index lookup, learned trust with the summaries (one statement), and the
    # thread's stamp with the recent history (one statement); then the candidates,
    # shaped by what the lookup found.
    assert rounds == [3, 1]
    rounds.clear()
    for user in ("alice", "bob"):
        found = layer.threads.load_thread(user, [HumanMessage("Where do I live?")],
                                  "Where do I live?", thread_id="t1", reinforce=False)
        assert any("Lisbon" in r.record.content for r in found.recalled)
    # Known users: the candidates go with the other two, the lookup in front of them.
    assert rounds == [3, 3]
