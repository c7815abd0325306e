"""Rounds: the statements a plan sends together, in one round trip.

A round is the next statement and, when its op is free (``FREE_OPS``), the pending
statements of the free ops after it, bound alike, at most one per op type
(``langmem_layer.store.plan``). The read a turn makes goes out in two rounds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.store.plan import Binding, Handler, Plan, Query, Step
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import Clock


class A:
    """An op type."""


class B:
    """Another."""


def _handler(name: str, n: int, seen: list[str]) -> Handler:
    for i in range(n):
        rows = yield Query(f"{name}{i}", {})
        seen.append(f"{name}{i}:{rows[0]['r'] if rows else '-'}")
    return name


def _run(plan: Plan) -> list[list[str]]:
    """Execute ``plan`` with fake rows; the statements of each round."""
    rounds = []
    while queries := plan.next_round():
        rounds.append([q.sql for q in queries])
        plan.deliver_round([[{"r": q.sql}] for q in queries])
    return rounds


def _plan(*steps: tuple[str, int, bool, type, str]) -> tuple[Plan, list[str]]:
    seen: list[str] = []
    built = [Step([i], _handler(name, n, seen), free=free, kind=kind, bind=Binding(user))
             for i, (name, n, free, kind, user) in enumerate(steps)]
    return Plan(built, len(built), None, None), seen


def test_consecutive_free_ops_share_a_round_and_each_gets_its_own_rows() -> None:
    plan, seen = _plan(("r", 2, True, A, "u"), ("t", 1, True, B, "u"))
    assert _run(plan) == [["r0", "t0"], ["r1"]]
    assert sorted(seen) == ["r0:r0", "r1:r1", "t0:t0"]
    assert plan.results() == ["r", "t"]


def test_a_round_holds_one_statement_of_each_op_type() -> None:
    # A second recall would overwrite the first one's transaction settings.
    plan, _ = _plan(("r", 2, True, A, "u"), ("s", 2, True, A, "u"), ("t", 1, True, B, "u"))
    assert _run(plan) == [["r0"], ["r1"], ["s0", "t0"], ["s1"]]


def test_an_op_that_is_not_free_is_a_barrier_and_runs_alone() -> None:
    plan, seen = _plan(("a", 1, True, A, "u"), ("w", 2, False, B, "u"), ("b", 1, True, B, "u"))
    assert _run(plan) == [["a0"], ["w0"], ["w1"], ["b0"]]
    assert seen == ["a0:a0", "w0:w0", "w1:w1", "b0:b0"]


def test_a_round_never_spans_two_bindings() -> None:
    plan, _ = _plan(("a", 1, True, A, "u"), ("b", 1, True, B, "v"))
    assert _run(plan) == [["a0"], ["b0"]]


def test_an_owner_plan_runs_a_statement_a_round() -> None:
    seen: list[str] = []
    steps = [Step([0], _handler("d", 2, seen), free=True, kind=A, bind=Binding(None, owner=True)),
             Step([1], _handler("e", 1, seen), free=True, kind=B, bind=Binding(None, owner=True))]
    plan = Plan(steps, 2, None, None)
    assert not plan.pipelined
    assert _run(plan) == [["d0"], ["d1"], ["e0"]]


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


def test_the_read_of_a_turn_is_two_rounds(store: PostgresMemoryStore, clock: Clock,
                                          rounds: list[int]) -> None:
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)
    layer.ingest("alice", [HumanMessage("I live in Lisbon and I work at Acme.")],
                 thread_id="t1")
    rounds.clear()
    layer.load_thread("alice", [HumanMessage("Where do I live?")], "Where do I live?",
                      thread_id="t1", reinforce=False)
    # The index lookup, learned trust with the summaries (one statement), and the
    # thread's stamp with the recent history (one statement); then the candidates.
    assert rounds == [3, 1]
