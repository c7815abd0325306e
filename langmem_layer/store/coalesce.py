"""Coalescing concurrent calls: the calls waiting for an async store, arranged as one batch.

``AsyncPostgresMemoryStore`` queues each call (an
``abatch`` or a single-op method) as a ``Call`` on its loop's ``Coalescer``;
the batch it runs is ``arrange``'s, and ``deliver`` answers each caller from the
batch's results. Free of I/O.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, cast

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp

from langmem_layer.store.ops import GetManyOp

__all__ = ["READS", "Call", "Coalescer", "Slot", "arrange", "deliver", "settle"]

#: Reads whose identical twins in one coalesced batch share one execution.
READS = (GetOp, SearchOp, ListNamespacesOp)


class Call:
    """One call waiting in a ``Coalescer``: an ``abatch`` (``ops``, answered with
    the list of their results) or a single-op method (``op``, answered with its result).

    A single op is kept without a list, and answered without one: under a ``gather`` of
    tens of thousands of calls, each container a waiting call keeps alive makes the
    garbage collector run more often, and each full pass walks every waiting call.
    """

    __slots__ = ("future", "op", "ops")

    def __init__(self, future: asyncio.Future[Any], ops: list[Op] | None = None,
                 op: Op | None = None) -> None:
        self.future = future
        self.ops = ops
        self.op = op

    def op_list(self) -> list[Op]:
        """The call's ops as a list."""
        return self.ops if self.ops is not None else [self.op]  # type: ignore[list-item]

    def answer(self, results: list[Result]) -> Any:
        """What the caller is answered with, given its ops' results in order."""
        return results if self.ops is not None else results[0]


class Coalescer:
    """The calls of one event loop waiting for the store, and the task that runs them.

    The task runs while calls wait: it takes every call queued so far as one batch,
    runs it, sets each caller's result, and takes the next lot (the calls made while the
    batch ran). It ends when none is left, so a closed store leaves no task behind.
    """

    __slots__ = ("calls", "loop", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.calls: list[Call] = []
        self.task: asyncio.Task[None] | None = None
        # Weak: a store kept past its loop must not keep the closed loop alive.
        self.loop = weakref.ref(loop)


#: Where a call's results are (see ``arrange``): one op's result index, or the
#: indices of a call of several ops (its ops run in order, side by side).
Slot = int | range


def arrange(calls: list[Call]) -> tuple[list[Any], list[Slot], list[str | None]]:
    """The ops of one coalesced batch, and where each call finds its results in theirs.

    Concurrent calls have no order among themselves, so the batch is arranged as
    LangGraph's batched stores do: plain reads first (gets of one namespace as one
    statement, identical searches and listings, e.g. the same search from many
    callers, run once), then every multi-op or memory-op call as one contiguous run in
    its own order, then single puts and deletes together, so their upserts go out in
    one statement (the last put of a key wins, as in LangGraph). Each call's own ops
    keep their order.

    Returns ``(ops, slots, keys)``, one slot and key per call: a call of one op finds
    its result at ``results[slot]``, or ``results[slot].get(key)`` for a get; a call of
    several finds its ops' results at ``results[i]`` for each ``i`` of its slot's range.
    A single op's place is one int (its section in the low two bits), not a container,
    for the reason ``Call`` gives.
    """
    gets: dict[tuple[tuple[str, ...], bool], dict[str, None]] = {}  # ordered key sets
    group_ix: dict[tuple[tuple[str, ...], bool], int] = {}
    reads: list[Op] = []
    seen: dict[Any, int] = {}
    others: list[Op] = []
    puts: list[Op] = []
    slots: list[Slot] = []  # index << 2 | section, for now
    keys_of: list[str | None] = []
    for call in calls:
        key = None
        if call.ops is not None and len(call.ops) > 1:
            slots.append(range(len(others), len(others) + len(call.ops)))
            others.extend(call.ops)
            keys_of.append(None)
            continue
        op = cast(Op, call.op if call.ops is None else call.ops[0])
        if not isinstance(op, (*READS, PutOp)):
            slots.append(len(others) << 2 | 2)
            others.append(op)
        elif isinstance(op, GetOp):
            group = (op.namespace, bool(op.refresh_ttl))
            keys = gets.setdefault(group, {})
            keys[op.key] = None
            key = op.key
            slots.append(group_ix.setdefault(group, len(group_ix)) << 2)
        elif isinstance(op, PutOp):
            slots.append(len(puts) << 2 | 3)
            puts.append(op)
        else:
            try:
                ix = seen.setdefault(op, len(reads))
            except TypeError:  # a filter dict makes the op unhashable: run it alone
                ix = len(reads)
            if ix == len(reads):
                reads.append(op)
            slots.append(ix << 2 | 1)
        keys_of.append(key)
    many = [GetManyOp(ns, tuple(keys), refresh) for (ns, refresh), keys in gets.items()]
    offset = (0, len(many), len(many) + len(reads), len(many) + len(reads) + len(others))
    flat: list[Any] = [*many, *reads, *others, *puts]
    for n, slot in enumerate(slots):
        if isinstance(slot, int):
            slots[n] = offset[slot & 3] + (slot >> 2)
        else:  # a multi-op call's ops are in the third section
            slots[n] = range(offset[2] + slot.start, offset[2] + slot.stop)
    return flat, slots, keys_of


def settle(call: Call, answer: Any = None, *, error: BaseException | None = None) -> None:
    if call.future.done():  # the caller was cancelled meanwhile
        return
    if error is not None:
        call.future.set_exception(error)
    else:
        call.future.set_result(answer)


def deliver(calls: list[Call], slots: list[Slot], keys: list[str | None],
            results: list[Any]) -> None:
    """Answer each of ``calls`` from the batch's ``results`` (see ``arrange``)."""
    for call, slot, key in zip(calls, slots, keys, strict=True):
        if isinstance(slot, int):
            found = results[slot] if key is None else results[slot].get(key)
            settle(call, call.answer([found]))
        else:
            settle(call, results[slot.start:slot.stop])
