"""An async pass woken by a turn takes that user's queue; every ``poll_seconds`` one
takes everyone's (retries that came due, turns queued elsewhere)."""

from __future__ import annotations

import asyncio

from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.store.ops import PendingOp
from tests import audit
from tests.fakes import Clock

_SCAN = "SELECT DISTINCT q.user_id FROM langmem_extraction_queue"


def test_the_scope_of_a_woken_pass(store, clock: Clock) -> None:
    worker = MemoryLayer(store, clock=clock)._worker
    assert worker.pass_scope("u1") is None  # nothing scanned yet: everyone
    assert worker.pass_scope("u1") == "u1"
    assert worker.pass_scope(None) is None  # a wake without a user scans
    clock.advance(seconds=worker.poll_seconds - 1)
    assert worker.pass_scope("u2") == "u2"
    clock.advance(seconds=1)
    assert worker.pass_scope("u2") is None
    assert worker.pass_scope("u2") == "u2"


async def _passes(layer: MemoryLayer) -> None:
    tasks = list(layer._worker._tasks)
    if tasks:
        await asyncio.gather(*tasks)


async def test_a_turn_wakes_its_users_pass_and_the_scan_comes_back(astore, clock: Clock
                                                                   ) -> None:
    layer = MemoryLayer(astore, clock=clock)
    # Another process's turn: queued, not announced to this process's worker.
    elsewhere = MemoryLayer(astore, clock=clock,
                            settings=MemorySettings(extract_every_n_turns=1000))
    await layer.asubmit("ua", [HumanMessage("I live in Lisbon.", id="a1")], thread_id="t")
    await _passes(layer)  # the first pass scanned every user
    await elsewhere.asubmit("ub", [HumanMessage("I work at Acme.", id="b1")], thread_id="t")
    with audit.RECORDER.capture() as seen:
        await layer.asubmit("ua", [HumanMessage("I like tea.", id="a2")], thread_id="t")
        await _passes(layer)
    assert not [s for s in seen if _SCAN in " ".join(s.split())]  # no scan of every user
    assert (await astore.abatch([PendingOp("ua")]))[0] == []
    assert len((await astore.abatch([PendingOp("ub")]))[0]) == 1  # not this pass's user
    clock.advance(seconds=layer._worker.poll_seconds)
    await layer.asubmit("ua", [HumanMessage("I play chess.", id="a3")], thread_id="t")
    await _passes(layer)
    assert (await astore.abatch([PendingOp("ub")]))[0] == []  # the scan took it
    await layer.aclose()
    await elsewhere.aclose()
