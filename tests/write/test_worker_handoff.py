"""A turn that wakes the background worker is leased as it is queued and handed to this
process's pass, which extracts it without claiming it: after the user's older ready
turns, and not at all once another worker took it over."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.ops import ClaimOp, PendingOp
from langmem_layer.types import Status
from tests import audit
from tests.fakes import Clock

_SCAN = "SELECT DISTINCT q.user_id FROM langmem_extraction_queue"
_CLAIM = "WITH picked AS MATERIALIZED"


def _count(seen: dict[str, int], text: str) -> int:
    return sum(n for s, n in seen.items() if text in " ".join(s.split()))


async def _passes(layer: MemoryLayer) -> None:
    while tasks := list(layer.worker._tasks):
        await asyncio.gather(*tasks)


def _turn(text: str, n: int) -> list[HumanMessage | AIMessage]:
    return [HumanMessage(text, id=f"h{n}"), AIMessage("Noted.", id=f"a{n}")]


async def test_a_handed_turn_is_extracted_without_a_claim(astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, clock=clock, extractor=RuleExtractor())
    await layer.threads.arecord_turn("ua", _turn("I work at Acme.", 1), thread_id="t")
    await _passes(layer)  # the first pass also looks at every user's queue
    with audit.RECORDER.capture() as seen:
        await layer.threads.arecord_turn("ua", _turn("I live in Lisbon.", 2), thread_id="t")
        await _passes(layer)
    assert _count(seen, _CLAIM) == 0 and _count(seen, _SCAN) == 0
    assert (await astore.abatch([PendingOp("ua")]))[0] == []
    assert any(r.written for r in layer.ingest_log)
    await layer.aclose()


async def test_the_users_older_ready_turns_are_claimed_and_extracted_first(
        astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, clock=clock, extractor=RuleExtractor())
    # Another process's turn for the same user, queued and not announced here.
    elsewhere = MemoryLayer(astore, clock=clock, extractor=RuleExtractor(),
                            settings=MemorySettings(extract_every_n_turns=1000))
    await layer.threads.arecord_turn("ub", _turn("I work at Acme.", 1), thread_id="t")
    await _passes(layer)
    await elsewhere.threads.arecord_turn("ub", _turn("I live in Lisbon.", 2), thread_id="t")
    clock.advance(minutes=1)
    with audit.RECORDER.capture() as seen:
        await layer.threads.arecord_turn("ub", _turn("I live in Porto.", 3), thread_id="t")
        await _passes(layer)
    assert _count(seen, _CLAIM) == 1  # the older turn was ready: the user is claimed
    assert (await astore.abatch([PendingOp("ub")]))[0] == []
    homes = {r.record.content: r.record.status for r in await layer.alist("ub")
             if "Lisbon" in r.record.content or "Porto" in r.record.content}
    # In turn order: Porto, the newer, supersedes Lisbon (not the other way round).
    active = [c for c, s in homes.items() if s == Status.ACTIVE]
    assert len(active) == 1 and "Porto" in active[0], homes
    await layer.aclose()
    await elsewhere.aclose()


async def test_a_handed_turn_is_released_when_the_store_closes_first(astore, clock: Clock
                                                                     ) -> None:
    layer = MemoryLayer(astore, clock=clock, extractor=RuleExtractor())
    await layer.threads.arecord_turn("uc", _turn("I work at Acme.", 1), thread_id="t")
    await _passes(layer)
    await layer.threads.arecord_turn("uc", _turn("I live in Lisbon.", 2), thread_id="t")
    # Closing before the pass ran: the turn goes back to the queue, claimable at once.
    await layer.worker.astore_closing()
    await _passes(layer)
    (pending,) = await astore.abatch([PendingOp("uc")])
    assert len(pending) == 1 and pending[0]["locked_until"] is None
    await layer.aclose()


async def test_a_handed_turn_another_worker_took_over_is_left_to_it(astore, clock: Clock
                                                                    ) -> None:
    settings = MemorySettings(extraction_lease_seconds=60)
    layer = MemoryLayer(astore, clock=clock, extractor=RuleExtractor(), settings=settings)
    await layer.threads.arecord_turn("ud", _turn("I work at Acme.", 1), thread_id="t")
    await _passes(layer)
    before = len(layer.ingest_log)
    # The pass is late: the lease ran out and another worker claimed the turn.
    worker = layer.worker
    await layer.threads.arecord_turn("ud", _turn("I live in Lisbon.", 2), thread_id="t")
    task = worker._consumer
    assert task is not None and not task.done()
    clock.advance(seconds=61)
    (taken,) = await astore.abatch([ClaimOp(10, 60, "ud", clock())])
    assert len(taken) == 1 and taken[0].attempts == 2
    await _passes(layer)
    assert len(layer.ingest_log) == before  # not extracted here
    (pending,) = await astore.abatch([PendingOp("ud")])
    assert len(pending) == 1 and pending[0]["attempts"] == 2  # still the rival's
    await layer.aclose()


def test_inline_extraction_leases_nothing_at_enqueue(store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extractor=RuleExtractor(), extraction="inline")
    with audit.RECORDER.capture() as seen:
        layer.threads.record_turn("ue", _turn("I live in Lisbon.", 1), thread_id="t")
    assert _count(seen, _CLAIM) == 1  # extracted inline, claimed as before
    assert store.batch([PendingOp("ue")]) == [[]]
    layer.close()


def test_a_sync_graphs_handed_turn_is_extracted_by_the_thread(store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extractor=RuleExtractor())
    layer.threads.record_turn("uf", _turn("I live in Lisbon.", 1), thread_id="t")
    layer.drain(timeout=30)
    assert store.batch([PendingOp("uf")]) == [[]]
    assert any(r.user_id == "uf" and r.written for r in layer.ingest_log)
    layer.close()


@pytest.mark.parametrize("concurrency", [4, 1])
async def test_several_users_turns_are_extracted_side_by_side_each_in_order(
        astore, clock: Clock, monkeypatch: pytest.MonkeyPatch, concurrency: int) -> None:
    # Queued without waking the worker, then drained: one pass over every user.
    settings = MemorySettings(extract_every_n_turns=1000, extraction_concurrency=concurrency)
    layer = MemoryLayer(astore, clock=clock, extractor=RuleExtractor(), settings=settings)
    users = [f"u{n}" for n in range(6)]
    for n, user in enumerate(users):
        await layer.threads.arecord_turn(user, _turn("I live in Lisbon.", 2 * n), thread_id="t")
        clock.advance(seconds=1)
        await layer.threads.arecord_turn(user, _turn("I live in Porto.", 2 * n + 1), thread_id="t")
    batches: list[list[str]] = []
    run = AsyncPostgresMemoryStore._run_coalesced

    async def recorded(self: AsyncPostgresMemoryStore, calls: list[Any]) -> None:
        batches.append([type(op).__name__ for call in calls for op in call.op_list()])
        await run(self, calls)

    monkeypatch.setattr(AsyncPostgresMemoryStore, "_run_coalesced", recorded)
    done = await layer.adrain(timeout=60)
    assert len(done.done) == 12 and not done.failed
    # The users' recalls of existing memories went out together (at most
    # extraction_concurrency at a time), not one per turn.
    recalls = [b.count("RecallOp") for b in batches if "RecallOp" in b]
    assert sum(recalls) >= 12 and max(recalls) <= concurrency
    assert (max(recalls) > 1) == (concurrency > 1)
    for user in users:  # each user's turns in order: the later city replaced the first
        (memory,) = await layer.alist(user)
        assert "Porto" in memory.record.content
    await layer.aclose()
