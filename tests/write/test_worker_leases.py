"""Leases that do not outlive their worker: a store closed under a pass releases the
turns the pass has not finished, a crashed worker's turns come back within the short
lease, a long pass keeps its turns by renewing their lease between turns, and a turn
another worker took over is left to it. Every turn is applied once.

Time is the :class:`~tests.fakes.Clock` of the store and the layers: the extractors
below move it, or wait on events; nothing sleeps."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from langchain_core.messages import BaseMessage, HumanMessage

from langmem_layer import MemoryLayer, MemorySettings, PostgresMemoryStore
from langmem_layer.extract.extractor import MemoryOperation
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.ops import ClaimOp
from langmem_layer.types import Recalled
from tests.fakes import Clock

TURNS = 6
WAIT = 60.0  # seconds; a bound on waiting for another thread, never a measurement


class CountingExtractor(RuleExtractor):
    """The rules, counting each turn's extractions; ``during(n, text)`` runs inside the
    n-th call (1-based), before the rules."""

    def __init__(self, calls: Counter[str], during: Callable[[int, str], None] | None = None
                 ) -> None:
        super().__init__()
        self.calls, self.during, self.n = calls, during, 0

    def extract(self, messages: Sequence[BaseMessage], *, existing: Sequence[Recalled] = (),
                now: datetime) -> list[MemoryOperation]:
        self.n += 1
        text = str(messages[-1].content)
        if self.during is not None:
            self.during(self.n, text)
        self.calls[text] += 1
        return super().extract(messages, existing=existing, now=now)


def _turns(layer: MemoryLayer, user: str, n: int = TURNS) -> list[int]:
    ids = [layer.admin.submit(user, [HumanMessage(f"My favourite band is Band{i}.")],
                        thread_id="t") for i in range(n)]
    return [i for i in ids if i is not None]


def _queue(uri: str, user: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(uri) as conn:
        return conn.execute(
            "SELECT id, done_at IS NOT NULL, locked_until, attempts FROM "
            "langmem_extraction_queue WHERE user_id = %s ORDER BY id", (user,)).fetchall()


def _applied_once(layer: MemoryLayer, user: str, n: int = TURNS) -> None:
    """One memory per turn, never reinforced by a replay, and one decision per turn."""
    memories = layer.list(user)
    assert sorted(m.record.content for m in memories) == sorted(
        f"Favourite band is Band{i}." for i in range(n)), [m.record.content for m in memories]
    assert all(m.record.reinforcement_count == 0 for m in memories)
    assert len(layer.admin.decisions(user, limit=100)) == n


def _settings(every: int = 1000) -> MemorySettings:
    return MemorySettings(extract_every_n_turns=every)


def _background(layer: MemoryLayer) -> threading.Thread:
    """The layer's worker thread, woken by the last of the turns queued."""
    thread = layer.worker._thread
    assert thread is not None
    return thread


def test_closing_the_store_mid_pass_releases_its_turns_at_once(
        pg_uri: str, index: dict, clock: Clock) -> None:
    user = f"closer-{uuid.uuid4().hex[:8]}"
    calls: Counter[str] = Counter()
    in_turn = threading.Event()
    holder: dict[str, MemoryLayer] = {}

    def block_until_closing(n: int, text: str) -> None:
        if n == 2:  # the second turn is under way when the store starts closing
            in_turn.set()
            assert holder["layer"].worker._held.stop.wait(WAIT)

    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as store:
        # Every sixth turn of a thread wakes the worker thread: one thread, all turns.
        layer = MemoryLayer(store, extractor=CountingExtractor(calls, block_until_closing),
                            settings=_settings(TURNS), clock=clock)
        holder["layer"] = layer
        ids = _turns(layer, user)
        worker = _background(layer)
        assert in_turn.wait(WAIT)
    # The `with` block ended without layer.close(): the pass finished its turn, then
    # released the four it had not started, before the connection closed.
    worker.join(WAIT)
    rows = _queue(pg_uri, user)
    assert [r[1] for r in rows] == [True, True] + [False] * (TURNS - 2)
    assert all(r[2] is None and r[3] == 0 for r in rows[2:])  # unleased, attempt given back

    # Another process takes them at once: same clock, no lease to wait out.
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as store:
        other = MemoryLayer(store, extractor=CountingExtractor(calls), extraction="inline",
                            settings=_settings(), clock=clock)
        assert other.drain().done == ids[2:]
        _applied_once(other, user)
    assert set(calls.values()) == {1}  # each turn extracted once


def test_a_turn_still_extracting_at_close_is_released_and_applied_once(
        pg_uri: str, index: dict, clock: Clock) -> None:
    user = f"stuck-{uuid.uuid4().hex[:8]}"
    calls: Counter[str] = Counter()
    in_turn, closed = threading.Event(), threading.Event()

    def stuck(n: int, text: str) -> None:
        if n == 2:  # longer than the close is willing to wait
            in_turn.set()
            assert closed.wait(WAIT)

    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as store:
        # Every sixth turn of a thread wakes the worker thread: one thread, all turns.
        layer = MemoryLayer(store, extractor=CountingExtractor(calls, stuck),
                            settings=_settings(TURNS), clock=clock)
        layer.worker.close_grace_seconds = 0
        ids = _turns(layer, user)
        worker = _background(layer)
        assert in_turn.wait(WAIT)
    rows = _queue(pg_uri, user)
    # Released without waiting for it, the stuck turn included.
    assert [r[1] for r in rows] == [True] + [False] * (TURNS - 1)
    assert all(r[2] is None for r in rows[1:])
    closed.set()  # the stuck extraction ends; its apply meets a closed store
    worker.join(WAIT)
    assert not worker.is_alive()

    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as store:
        other = MemoryLayer(store, extractor=CountingExtractor(calls), extraction="inline",
                            settings=_settings(), clock=clock)
        assert other.drain().done == ids[1:]
        _applied_once(other, user)
    # The stuck turn was extracted twice (once by the closed pass), applied once.
    assert sorted(calls.values()) == [1] * (TURNS - 1) + [2]


class GatedAsyncExtractor(CountingExtractor):
    """Async extraction whose second turn waits for ``go``."""

    def __init__(self, calls: Counter[str]) -> None:
        super().__init__(calls)
        self.in_turn, self.go = asyncio.Event(), asyncio.Event()

    async def aextract(self, messages: Sequence[BaseMessage], *,
                       existing: Sequence[Recalled] = (), now: datetime
                       ) -> list[MemoryOperation]:
        if self.n == 1:
            self.in_turn.set()
            await self.go.wait()
        return self.extract(messages, existing=existing, now=now)


async def test_closing_the_async_store_mid_task_releases_its_turns(
        pg_uri: str, index: dict, clock: Clock) -> None:
    user = f"aclose-{uuid.uuid4().hex[:8]}"
    calls: Counter[str] = Counter()
    extractor = GatedAsyncExtractor(calls)

    async def let_the_turn_finish_once_closing(layer: MemoryLayer) -> None:
        await extractor.in_turn.wait()
        while not layer.worker._held.stopping():
            await asyncio.sleep(0)  # the close hook runs on this loop: yield to it
        extractor.go.set()

    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=index,
                                                         clock=clock) as store:
        layer = MemoryLayer(store, extractor=extractor, settings=_settings(TURNS),
                            clock=clock)
        ids = [await layer.admin.asubmit(user, [HumanMessage(f"My favourite band is Band{i}.")],
                                   thread_id="t") for i in range(TURNS)]
        helper = asyncio.create_task(let_the_turn_finish_once_closing(layer))
        await extractor.in_turn.wait()
    await helper
    rows = _queue(pg_uri, user)
    assert [r[1] for r in rows] == [True, True] + [False] * (TURNS - 2)
    assert all(r[2] is None and r[3] == 0 for r in rows[2:])
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as sync:
        other = MemoryLayer(sync, extractor=CountingExtractor(calls), settings=_settings(),
                            clock=clock)
        assert other.drain().done == ids[2:]
        _applied_once(other, user)
    assert set(calls.values()) == {1}


def test_a_crashed_workers_turns_come_back_after_the_short_lease(
        store: PostgresMemoryStore, clock: Clock) -> None:
    user = f"crash-{uuid.uuid4().hex[:8]}"
    calls: Counter[str] = Counter()
    layer = MemoryLayer(store, extractor=CountingExtractor(calls), settings=_settings(),
                        clock=clock)
    lease = layer.settings.extraction_lease_seconds
    assert lease <= 60  # short: the heartbeat keeps a live pass's turns
    ids = _turns(layer, user)
    # A worker claims them and dies: its lease is never renewed nor released.
    taken = store.batch([ClaimOp(limit=TURNS, lease_seconds=lease, user_id=user,
                                 now=clock.now)])[0]
    assert [e.id for e in taken] == ids
    clock.advance(seconds=lease - 1)
    assert layer.drain().done == []
    clock.advance(seconds=2)
    assert layer.drain().done == ids
    _applied_once(layer, user)
    assert set(calls.values()) == {1}


def test_the_heartbeat_keeps_a_long_pass_from_being_stolen(
        store: PostgresMemoryStore, clock: Clock) -> None:
    user = f"long-{uuid.uuid4().hex[:8]}"
    calls: Counter[str] = Counter()
    settings = _settings()
    lease = settings.extraction_lease_seconds
    rival_done: list[list[int]] = []
    rival = MemoryLayer(store, extractor=CountingExtractor(calls), extraction="inline",
                        settings=settings, clock=clock)

    def slow(n: int, text: str) -> None:
        # Each turn takes 40% of the lease: by the third, the whole pass has taken longer
        # than one lease, and a second worker tries to claim the turns.
        clock.advance(seconds=0.4 * lease)
        if n == 3:
            rival_done.append(rival.admin.process_pending().done)

    layer = MemoryLayer(store, extractor=CountingExtractor(calls, slow), settings=settings,
                        clock=clock)
    ids = _turns(layer, user)
    assert layer.drain().done == ids
    assert rival_done == [[]]  # nothing stolen: the pass renewed its leases
    _applied_once(layer, user)
    assert set(calls.values()) == {1}


def test_a_pass_leaves_alone_what_another_worker_took_over(
        store: PostgresMemoryStore, clock: Clock) -> None:
    user = f"stall-{uuid.uuid4().hex[:8]}"
    calls: Counter[str] = Counter()
    settings = _settings()
    rival = MemoryLayer(store, extractor=CountingExtractor(calls), settings=settings,
                        clock=clock)
    taken: list[list[int]] = []

    def stalls(n: int, text: str) -> None:
        if n == 1:  # the first turn outlasts the lease; meanwhile another worker takes all
            clock.advance(seconds=settings.extraction_lease_seconds * 3)
            taken.append(rival.admin.process_pending().done)

    layer = MemoryLayer(store, extractor=CountingExtractor(calls, stalls), settings=settings,
                        clock=clock)
    ids = _turns(layer, user)
    done = layer.drain().done
    assert taken == [ids]
    # The pass finished the turn it was in (a replay: its operations were applied by the
    # rival, under the same ids) and, at its next renewal, left the others alone.
    assert done == ids[:1]
    assert sorted(calls.values()) == [1] * (TURNS - 1) + [2]
    memories = layer.list(user)
    assert len(memories) == TURNS
    assert all(m.record.reinforcement_count == 0 for m in memories)


def test_the_close_hook_does_not_keep_the_layer_alive(pg_uri: str, index: dict) -> None:
    import gc
    import weakref

    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        layer = MemoryLayer(store, extractor=RuleExtractor())
        gone = weakref.ref(layer)
        del layer
        gc.collect()
        assert gone() is None
    assert store._close_hooks == []

