"""A background pass woken by turns takes those users' queues; every ``poll_seconds`` one
takes everyone's (retries that came due, turns queued elsewhere). On a loop one pass
runs at a time, and the wakes that come during it go to its next round."""

from __future__ import annotations

import asyncio

from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.store.ops import PendingOp
from langmem_layer.worker import WakeWorker
from tests import audit
from tests.fakes import Clock

_SCAN = "SELECT DISTINCT q.user_id FROM langmem_extraction_queue"
_CLAIM = "WITH picked AS MATERIALIZED"


def _scans(seen: dict[str, int]) -> int:
    return sum(n for s, n in seen.items() if _SCAN in " ".join(s.split()))


def test_the_scope_of_a_pass_comes_from_the_wakes(store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock)
    worker = layer.worker
    worker._woken.add("u1")
    assert worker.next_scope() is None  # no pass has looked at every user yet
    layer.admin.process_pending()  # one that does
    assert worker.next_scope(polled=True) is None  # a poll's pass looks at everyone
    assert worker.next_scope() == ()  # no wake named a user: none to claim
    worker._woken.update({"u2", "u1"})
    assert worker.next_scope() == ("u1", "u2")
    assert not worker._woken  # taken: the next wake goes to the next pass
    worker._woken.update({"u1", None})  # a wake for every user's queue
    assert worker.next_scope() is None
    layer.admin.process_pending()
    clock.advance(seconds=worker.poll_seconds - 1)
    worker._woken.add("u3")
    assert worker.next_scope() == ("u3",)
    clock.advance(seconds=1)
    worker._woken.add("u3")
    assert worker.next_scope() is None  # poll_seconds since the last look at everyone
    layer.close()


async def _passes(layer: MemoryLayer) -> None:
    while tasks := list(layer.worker._tasks):
        await asyncio.gather(*tasks)


async def test_a_turn_wakes_a_pass_for_its_user_and_the_scan_comes_back(astore, clock: Clock
                                                                        ) -> None:
    layer = MemoryLayer(astore, clock=clock)
    # Another process's turn: queued, not announced to this process's worker.
    elsewhere = MemoryLayer(astore, clock=clock,
                            settings=MemorySettings(extract_every_n_turns=1000))
    await layer.admin.asubmit("ua", [HumanMessage("I live in Lisbon.", id="a1")], thread_id="t")
    await _passes(layer)  # the first pass looked at every user
    await elsewhere.admin.asubmit("ub", [HumanMessage("I work at Acme.", id="b1")], thread_id="t")
    with audit.RECORDER.capture() as seen:
        await layer.admin.asubmit("ua", [HumanMessage("I like tea.", id="a2")], thread_id="t")
        await _passes(layer)
    assert _scans(seen) == 0  # no statement spanning users
    assert (await astore.abatch([PendingOp("ua")]))[0] == []
    assert len((await astore.abatch([PendingOp("ub")]))[0]) == 1  # not this pass's user
    clock.advance(seconds=layer.worker.poll_seconds)
    await layer.admin.asubmit("ua", [HumanMessage("I play chess.", id="a3")], thread_id="t")
    await _passes(layer)
    assert (await astore.abatch([PendingOp("ub")]))[0] == []  # the scan took it
    await layer.aclose()
    await elsewhere.aclose()


async def test_turns_during_a_pass_are_taken_by_its_next_round_not_new_tasks(
        astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, clock=clock)
    await layer.admin.asubmit("u0", [HumanMessage("I live in Lisbon.", id="m0")], thread_id="t")
    await _passes(layer)
    users = [f"u{n}" for n in range(1, 9)]
    with audit.RECORDER.capture() as seen:
        await asyncio.gather(*(
            layer.admin.asubmit(u, [HumanMessage(f"I work at Acme {n}.", id=f"m{n}")],
                          thread_id="t") for n, u in enumerate(users, 1)))
        assert len(layer.worker._tasks) == 1  # eight wakes, one pass
        await _passes(layer)
    for u in users:
        assert (await astore.abatch([PendingOp(u)]))[0] == []
    assert _scans(seen) == 0
    claims = sum(n for s, n in seen.items() if _CLAIM in s)
    assert len(users) <= claims < 2 * len(users)  # each user claimed about once
    await layer.aclose()


async def test_a_wake_for_no_user_looks_at_every_users_queue(astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, clock=clock)
    elsewhere = MemoryLayer(astore, clock=clock,
                            settings=MemorySettings(extract_every_n_turns=1000))
    await layer.admin.asubmit("ua", [HumanMessage("I live in Lisbon.", id="a1")], thread_id="t")
    await _passes(layer)
    await elsewhere.admin.asubmit("ub", [HumanMessage("I work at Acme.", id="b1")], thread_id="t")
    await layer.runner.arun(_wake())
    await _passes(layer)
    assert (await astore.abatch([PendingOp("ub")]))[0] == []
    await layer.aclose()
    await elsewhere.aclose()


def _wake():  # type: ignore[no-untyped-def]
    yield WakeWorker()
