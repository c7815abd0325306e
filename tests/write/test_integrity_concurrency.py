"""Concurrent writers on the real database: no lost reinforcement, no duplicate add, no
forked thread chain. Every count is exact: a lost update shows as a wrong number."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage, HumanMessage

from langmem_layer import MemoryLayer
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.store.ops import ApplyOnceOp, MarkAppliedOp, TouchOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Recalled
from tests.fakes import Clock


@pytest.fixture
def pooled(store: PostgresMemoryStore, pg_uri: str, index: dict,
           clock: Clock) -> Iterator[PostgresMemoryStore]:
    """A pooled store on the emptied database (``store`` empties it)."""
    with PostgresMemoryStore.from_conn_string(pg_uri, pool_size=8, index=index,
                                              clock=clock) as s:
        yield s


def _parallel(n: int, work: Callable[[int], Any]) -> list[Any]:
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(work, range(n)))


class Scripted:
    """An extractor proposing fixed operations; ``wait`` runs before it answers."""

    def __init__(self, ops: Sequence[MemoryOperation],
                 wait: Callable[[], Any] | None = None) -> None:
        self.ops, self.wait = list(ops), wait

    def extract(self, messages: Sequence[BaseMessage], *, existing: Sequence[Recalled] = (),
                now: datetime) -> list[MemoryOperation]:
        if self.wait is not None:
            self.wait()
        return [op.model_copy() for op in self.ops]

    async def aextract(self, messages: Sequence[BaseMessage], *,
                       existing: Sequence[Recalled] = (), now: datetime
                       ) -> list[MemoryOperation]:
        return self.extract(messages, existing=existing, now=now)


def test_concurrent_reinforcement_loses_no_update(pooled: PostgresMemoryStore,
                                                  clock: Clock) -> None:
    layer = MemoryLayer(pooled, extraction="inline", clock=clock)
    (seed,) = layer.ingest("u1", [HumanMessage("I prefer green tea.", id="seed")]).written
    threads, rounds = 16, 25

    def work(t: int) -> int:
        accepted = 0
        for i in range(rounds):
            result = layer.ingest("u1", [HumanMessage("I prefer green tea.", id=f"m{t}-{i}")])
            assert result.changed == [seed] and not result.written
            accepted += len(result.accepted)
        return accepted

    assert sum(_parallel(threads, work)) == threads * rounds
    record = layer.get("u1", seed).record
    assert record.reinforcement_count == threads * rounds
    assert record.confidence == 1.0
    assert len(layer.list("u1")) == 1


def test_reinforcement_and_touch_race_keeps_both_counts(pooled: PostgresMemoryStore,
                                                        clock: Clock) -> None:
    layer = MemoryLayer(pooled, extraction="inline", clock=clock)
    (seed,) = layer.ingest("u1", [HumanMessage("I prefer green tea.", id="seed")]).written
    rounds = 20

    def work(t: int) -> None:
        for i in range(rounds):
            if t % 2:  # what extract_after_turn does for the memories load_memory recalled
                pooled.batch([TouchOp("u1", (seed,), clock.now)])
            else:
                layer.ingest("u1", [HumanMessage("I prefer green tea.", id=f"m{t}-{i}")])

    _parallel(8, work)
    record = layer.get("u1", seed).record
    assert (record.reinforcement_count, record.access_count) == (4 * rounds, 4 * rounds)


def test_concurrent_writers_of_distinct_memories_keep_all(pooled: PostgresMemoryStore,
                                                          clock: Clock) -> None:
    def content(n: int) -> str:
        return " ".join(f"w{n}x{j}" for j in range(6)) + "."

    def work(n: int) -> list[str]:
        extractor = Scripted([MemoryOperation(op=OpType.ADD, content=content(n))])
        layer = MemoryLayer(pooled, extractor=extractor, extraction="inline", clock=clock)
        return layer.ingest("u1", [HumanMessage(f"turn {n}", id=f"m{n}")]).written

    written = _parallel(16, work)
    assert all(len(w) == 1 for w in written)
    layer = MemoryLayer(pooled, extraction="inline", clock=clock)
    assert sorted(m.record.content for m in layer.list("u1", limit=100)) == sorted(
        content(n) for n in range(16))


class _AtApply(PostgresMemoryStore):
    """A store that waits at a barrier before applying an ingest's operations, so two
    workers have both read (and found nothing) before either writes."""

    barrier: threading.Barrier

    def batch(self, ops: Any) -> list[Any]:
        ops = list(ops)
        if any(isinstance(op, ApplyOnceOp | MarkAppliedOp) for op in ops):
            self.barrier.wait(timeout=30)
        return super().batch(ops)


def test_two_workers_adding_the_same_fact_write_one_memory(store: PostgresMemoryStore,
                                                           pg_uri: str, index: dict,
                                                           clock: Clock) -> None:
    barrier = threading.Barrier(2)
    fact = MemoryOperation(op=OpType.ADD, content="Prefers green tea with honey.")

    def work(n: int) -> list[str]:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            worker_store = _AtApply(conn, index=index, clock=clock)
            worker_store.barrier = barrier
            layer = MemoryLayer(worker_store, extractor=Scripted([fact]),
                                extraction="inline", clock=clock)
            # The same turn seen by two workers (two threads of the same user).
            result = layer.ingest(
                "u1", [HumanMessage("I like green tea with honey.", id=f"m{n}")],
                thread_id=f"t{n}")
            return result.written + result.changed

    keys = _parallel(2, work)
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    (memory,) = layer.list("u1")
    assert memory.record.content == "Prefers green tea with honey."
    assert memory.record.reinforcement_count == 1  # the second add became a reinforce
    assert keys[0] == keys[1] == [memory.key]


def test_concurrent_remembers_on_one_thread_form_a_simple_chain(
        pooled: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    layer = MemoryLayer(pooled, extraction="inline", clock=clock)
    writers, each = 8, 10

    def work(n: int) -> None:
        for i in range(each):
            layer.remember("u1", f"Step {n}-{i} of the plan.", thread_id="t")

    _parallel(writers, work)
    with psycopg.connect(pg_uri) as conn:
        links = conn.execute(
            "SELECT src_key, dst_key FROM langmem_links WHERE user_id = 'u1'"
            " AND link_type = 'elaborates'").fetchall()
    total = writers * each
    successors = Counter(dst for _, dst in links)
    predecessors = Counter(src for src, _ in links)
    assert max(successors.values()) == 1, "a memory is elaborated by two memories"
    assert max(predecessors.values()) == 1
    assert len(links) == total - 1  # one path through every memory
