"""The durable extraction queue's side of the write path: leasing entries, ingesting
each (``langmem_layer.write.apply.ingest``), retrying, parking and releasing them.

A worker leases queue entries (``process_queue``, or as they are queued:
``ingest_leased``) and ingests each user's in order, the users side by side. A
failed entry keeps its messages and is retried with exponential backoff, up to
``extraction_max_attempts``; past that, or when its input is invalid, it is parked. An
outage (the database, the pool, the embedder) uses no attempt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from langchain_core.messages import messages_from_dict

from langmem_layer.errors import (
    DatabaseUnavailableError,
    EmbeddingError,
    InvalidInputError,
    PoolTimeoutError,
)
from langmem_layer.flow import Concurrently, Env, Flow, StoreCall
from langmem_layer.sanitize import clean
from langmem_layer.store import ops as mops
from langmem_layer.write.apply import IngestResult, ingest

__all__ = [
    "OUTAGES",
    "Leases",
    "ProcessResult",
    "ingest_leased",
    "is_outage",
    "process_queue",
    "release_leased",
]


@dataclass
class ProcessResult:
    """What one pass over the queue did.

    ``failed`` holds every entry that failed this pass; ``parked``, those of them that
    will not be retried (see ``process_queue``). ``drained``: the pass's claim took
    fewer entries than it asked for, so nothing else was ready then (a turn queued
    later wakes the worker again).
    """

    done: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    results: list[IngestResult] = field(default_factory=list)
    parked: list[int] = field(default_factory=list)
    drained: bool = False

    def add(self, other: ProcessResult) -> None:
        """Count ``other``'s entries and results in this one (``drained`` stays)."""
        self.done += other.done
        self.failed += other.failed
        self.results += other.results
        self.parked += other.parked


def process_queue(env: Env, *, now: datetime, limit: int, lease_seconds: float,
                  retry_base_seconds: float, user_id: str | None = None,
                  users: Sequence[str] = (), leases: Leases | None = None
                  ) -> Flow[ProcessResult]:
    """Lease ready entries and ingest each; a failure keeps the entry for a later retry.

    Whose entries: ``user_id``'s, else those of ``users``, else every user's with work
    ready (found by a statement spanning users first).

    An entry is parked instead (kept with its messages and error, listed by
    ``PendingOp`` and
    ``ParkedEntriesOp``, never retried) when its attempt
    was the ``extraction_max_attempts``-th, or when the database refused its input
    (``InvalidInputError``): a retry would fail the same way.

    With ``leases`` (the worker's), the pass records what it holds, renews its leases
    between turns once a third of the lease has gone by (a heartbeat: a long batch keeps
    its turns, a dead worker's come back within one short lease), leaves alone a turn
    another worker took over meanwhile, and, when the worker is stopping (its store is
    closing), releases the turns it has not started and returns.
    """
    (entries,) = yield StoreCall([mops.ClaimOp(limit, lease_seconds, user_id, now,
                                               tuple(users))])
    outcome = yield from _ingest_held(env, entries, now, lease_seconds, retry_base_seconds,
                                      leases)
    outcome.drained = len(entries) < limit
    return outcome


def ingest_leased(env: Env, entries: Sequence[mops.QueueEntry], *, now: datetime,
                  leased_at: datetime, lease_seconds: float, retry_base_seconds: float,
                  leases: Leases | None = None) -> Flow[ProcessResult]:
    """Ingest entries this process leased as it queued them (no claim), as
    ``process_queue`` ingests what it claims.

    ``leased_at``: when the oldest was leased. Past a third of the lease the pass
    renews the leases before the first turn (a turn taken over meanwhile by another
    worker is left to it).
    """
    outcome = yield from _ingest_held(env, entries, now, lease_seconds, retry_base_seconds,
                                      leases, renewed_at=leased_at)
    outcome.drained = True
    return outcome


def _ingest_held(env: Env, entries: Sequence[mops.QueueEntry], now: datetime,
                 lease_seconds: float, retry_base_seconds: float, leases: Leases | None,
                 renewed_at: datetime | None = None) -> Flow[ProcessResult]:
    """``_ingest_entries``, with ``entries`` recorded in ``leases`` while it runs."""
    if leases is not None:
        leases.hold(entries)
    try:
        return (yield from _ingest_entries(env, entries, now, lease_seconds,
                                           retry_base_seconds, leases, renewed_at))
    finally:
        # Finished, released, or left to whoever handles the pass's failure (the
        # outage path hands its entries over in the error's ``leased``).
        if leases is not None:
            leases.drop(e.id for e in entries)


def _ingest_entries(env: Env, entries: Sequence[mops.QueueEntry], now: datetime,
                    lease_seconds: float, retry_base_seconds: float, leases: Leases | None,
                    renewed_at: datetime | None = None) -> Flow[ProcessResult]:
    """Ingest ``entries``: each user's in order, the users side by side.

    Side by side (``Concurrently``): under an async store, the
    users' recalls go out in one round trip, then their applies in one transaction,
    instead of a round trip per turn for each; under load, a worker that took one turn
    at a time made one turn's progress per coalesced batch while every served user made
    one each. One user's turns stay in order (an extraction sees what the one before it
    wrote). Users go in id order, so two processes' merged applies take the users'
    locks in the same order.
    """
    by_user: dict[str, list[mops.QueueEntry]] = {}
    for entry in entries:
        by_user.setdefault(entry.user_id, []).append(entry)
    if len(by_user) <= 1:
        return (yield from _ingest_user(env, entries, now, lease_seconds,
                                        retry_base_seconds, leases, renewed_at))
    # Every failure, not only the first: each holds the turns its user's flow leased.
    ended = yield Concurrently([
        _ingest_user(env, by_user[user], now, lease_seconds, retry_base_seconds, leases,
                     renewed_at)
        for user in sorted(by_user)], at_once=env.settings.extraction_concurrency,
        return_exceptions=True)
    outcome = ProcessResult()
    errors = [e for e in ended if isinstance(e, Exception)]
    for part in ended:
        if isinstance(part, ProcessResult):
            outcome.add(part)
    if errors:
        # An outage ends the pass: every user's turns it could not release go to
        # whoever handles the failure (the worker releases them in its next pass).
        leased = [x for e in errors for x in getattr(e, "leased", ())]
        if leased:
            errors[0].leased = leased  # type: ignore[attr-defined]
        raise errors[0]
    return outcome


def _ingest_user(env: Env, entries: Sequence[mops.QueueEntry], now: datetime,
                 lease_seconds: float, retry_base_seconds: float, leases: Leases | None,
                 renewed_at: datetime | None = None) -> Flow[ProcessResult]:
    """Ingest one user's ``entries`` in order (see ``process_queue`` for leases)."""
    outcome = ProcessResult()
    if renewed_at is None:
        renewed_at = leases.now() if leases is not None else now
    kept = {e.id for e in entries}
    for i, entry in enumerate(entries):
        if leases is not None:
            if leases.stopping():
                rest = [(x.user_id, x.id) for x in entries[i:] if x.id in kept]
                yield from release_leased(rest, now=now, reason="released: the worker stopped")
                return outcome
            at = leases.now()
            if at - renewed_at >= timedelta(seconds=lease_seconds / 3):
                kept = yield from _renew(entries[i:], lease_seconds, at)
                renewed_at = at
            if entry.id not in kept:  # finished or taken over by another worker
                continue
        try:
            yield from _ingest_entry(env, entry, i, entries, now, retry_base_seconds, outcome)
        finally:
            if leases is not None:
                leases.drop([entry.id])
    return outcome


def _ingest_entry(env: Env, entry: mops.QueueEntry, i: int,
                  entries: Sequence[mops.QueueEntry], now: datetime,
                  retry_base_seconds: float, outcome: ProcessResult) -> Flow[None]:
    """Ingest one leased entry; its outcome goes into ``outcome``."""
    max_attempts = env.settings.extraction_max_attempts
    try:
        result = yield from ingest(
            env, entry.user_id, messages_from_dict(entry.messages), profile=entry.profile,
            thread_id=entry.thread_id, agent_id=entry.agent_id, now=entry.turn_at,
            entry_id=entry.id)
    except Exception as e:
        error = clean(f"{type(e).__name__}: {e}")
        if is_outage(e) and not isinstance(e, DatabaseUnavailableError | PoolTimeoutError):
            # The embedder or model is down, not this turn's fault: retry it later
            # without using an attempt.
            retry_at = now + timedelta(seconds=retry_base_seconds)
            yield StoreCall([mops.FailEntryOp(entry.user_id, entry.id, error, retry_at,
                                              outage=True)])
            outcome.failed.append(entry.id)
            return
        if is_outage(e):
            # The database is unusable: release this entry and the rest of the batch
            # without using an attempt, and stop the pass (the next one retries them).
            rest = entries[i:]
            retry_at = now + timedelta(seconds=retry_base_seconds)
            try:
                yield StoreCall([mops.FailEntryOp(x.user_id, x.id, error, retry_at,
                                                  outage=True) for x in rest])
            except Exception as release_failed:
                # The database is gone too: whoever runs the next pass releases them.
                e.leased = [(x.user_id, x.id) for x in rest]  # type: ignore[attr-defined]
                raise e from release_failed
            raise
        if isinstance(e, InvalidInputError) or entry.attempts >= max_attempts:
            yield StoreCall([mops.ParkEntryOp(entry.user_id, entry.id, error, now)])
            outcome.failed.append(entry.id)
            outcome.parked.append(entry.id)
            return
        delay = retry_base_seconds * 2 ** max(0, entry.attempts - 1)
        retry_at = now + timedelta(seconds=min(delay, 6 * 3600))
        yield StoreCall([mops.FailEntryOp(entry.user_id, entry.id, error, retry_at)])
        outcome.failed.append(entry.id)
    else:
        outcome.done.append(entry.id)
        outcome.results.append(result)


def _renew(entries: Sequence[mops.QueueEntry], lease_seconds: float, now: datetime
           ) -> Flow[set[int]]:
    """Renew the leases of ``entries`` (one statement per user); the ids still held."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for e in entries:
        by_user.setdefault(e.user_id, []).append((e.id, e.attempts))
    renewed = yield StoreCall([mops.RenewLeaseOp(user, tuple(held), lease_seconds, now)
                               for user, held in by_user.items()])
    return {i for ids in renewed for i in ids}


class Leases(Protocol):
    """What a pass tells its worker about the turns it holds (see ``process_queue``)."""

    def hold(self, entries: Sequence[mops.QueueEntry]) -> None:
        """The pass leased ``entries``."""

    def drop(self, ids: Iterable[int]) -> None:
        """The pass is done with these entries (finished, failed, released)."""

    def stopping(self) -> bool:
        """Whether the pass must stop before its next turn."""

    def now(self) -> datetime:
        """The current time (the pass's ``now`` is when it started)."""


#: Failures of a service, not of the turn: a retry once it is back can succeed, so they
#: never use up ``extraction_max_attempts`` (kept for input that fails every time).
OUTAGES: tuple[type[BaseException], ...] = (
    DatabaseUnavailableError, PoolTimeoutError, EmbeddingError, ConnectionError, TimeoutError)


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` is a service being down (database, pool, embedder, network)."""
    return isinstance(error, OUTAGES)


def release_leased(leased: Sequence[tuple[str, int]], *, now: datetime,
                   reason: str = "released after an outage") -> Flow[None]:
    """Release entries a pass leased and will not finish (no attempt used): claimable
    again at ``now``."""
    if leased:
        yield StoreCall([mops.FailEntryOp(user, entry_id, reason, now, outage=True)
                         for user, entry_id in leased])
