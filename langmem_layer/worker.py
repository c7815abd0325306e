"""The background extraction worker: a thread in sync code, tasks in async code.

Turns are queued durably (``langmem_layer.write.apply.enqueue_turn``); the worker
extracts what is queued. Flows ask for it with two requests the ``Worker``
registers on the runner: ``ProcessPending`` (extract now, before the flow goes
on) and ``WakeWorker`` (extract in the background). The sync runner wakes the
worker thread, the async one starts a task on the running loop; the decision of
which to ask for is written once, in ``Worker.after_enqueue`` and the flows that
yield these requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langmem_layer.errors import DatabaseUnavailableError
from langmem_layer.flow import Call, Flow, Runner
from langmem_layer.settings import MemorySettings
from langmem_layer.store.ops import QueueEntry, TurnRecorded
from langmem_layer.write.apply import IngestResult
from langmem_layer.write.extraction_queue import Leases, ProcessResult, release_leased

__all__ = ["ExtractionLoop", "ProcessPending", "WakeWorker", "Worker"]

logger = logging.getLogger("langmem_layer")


@dataclass(frozen=True)
class ProcessPending(Call):
    """Request: extract every queue entry ready now (all users, or one) before going on.

    Its reply is the ``ProcessResult``.
    """

    user_id: str | None = None


@dataclass(frozen=True)
class WakeWorker(Call):
    """Request: let the background worker extract what is queued; returns at once.

    ``user_id``: the user whose turn was queued (the pass may take that user's queue
    alone, see ``Worker.next_scope``); ``None``: look at every user's. ``entry``:
    the turn, leased as it was queued, for the pass to extract without claiming it;
    ``claim``: whether the user's queue must be claimed too (it held other entries
    ready, or the turn was not leased).
    """

    user_id: str | None = None
    entry: QueueEntry | None = None
    claim: bool = True


class _Held:
    """The turns this worker's passes hold leased and have not finished (a
    ``Leases``), and whether they must stop."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now
        self._held: dict[int, str] = {}  # entry id -> its user
        self._lock = threading.Lock()
        self.stop = threading.Event()

    def hold(self, entries: Sequence[QueueEntry]) -> None:
        with self._lock:
            self._held.update((e.id, e.user_id) for e in entries)

    def drop(self, ids: Iterable[int]) -> None:
        with self._lock:
            for i in ids:
                self._held.pop(i, None)

    def take(self) -> list[tuple[str, int]]:
        """Everything held, no longer held (the caller releases it)."""
        with self._lock:
            held, self._held = self._held, {}
        return [(user, entry_id) for entry_id, user in held.items()]

    def stopping(self) -> bool:
        return self.stop.is_set()

    def now(self) -> datetime:
        return self._now()


class Worker:
    """Extracts queued turns: inline on request, or in a background thread or task.

    Args:
        runner: Runs the queue flows; the worker registers its requests on it.
        settings: Read for ``extract_every_n_turns`` at each turn.
        batch: Builds the flow that extracts one batch of ready entries (all users, or
            one user's), reporting what it holds to the worker's ``Leases``.
        on_results: Receives each batch's ingest results (the layer's ``ingest_log``).
        leased: Builds the flow that extracts turns handed to the worker leased as they
            were queued (``WakeWorker``), given when the oldest was handed.

    Leases: a pass renews its turns' leases between turns (a heartbeat), so the lease
    (``extraction_lease_seconds``) can be short and a crashed worker's turns come back
    within it. When the store closes under a pass (``store_closing``, a close hook
    the store calls), the pass stops at its next turn and the turns it has not
    finished are released before the connection closes: another worker or process
    takes them at once instead of after the lease. Both, because a closing store can
    still release what it holds, but a crashed process runs no code at all: only a short
    lease bounds that wait, and only a heartbeat lets a short lease cover a long pass.
    """

    #: Seconds a closing store waits for the pass to finish its current turn before
    #: releasing that turn too (its apply then fails on the closed store; a turn is
    #: applied once either way: its operations carry ids recorded in their transaction).
    close_grace_seconds = 10.0

    def __init__(self, runner: Runner, settings: MemorySettings,
                 batch: Callable[[str | None, Leases, Sequence[str]], Flow[ProcessResult]],
                 on_results: Callable[[Sequence[IngestResult]], Any],
                 leased: Callable[[Sequence[QueueEntry], datetime, Leases],
                                  Flow[ProcessResult]]) -> None:
        self.runner = runner
        self.settings = settings
        self._batch = batch
        self._ingest_leased = leased
        self._on_results = on_results
        #: Seconds the worker thread sleeps between queue polls when not woken.
        self.poll_seconds = 5.0
        #: Backoff after an outage: the first retry waits ``min_retry_seconds``, each
        #: further one twice as long, never more than ``max_retry_seconds``.
        self.min_retry_seconds = 0.5
        self.max_retry_seconds = 30.0
        self._outages = 0
        self._leased: list[tuple[str, int]] = []
        #: The current time, for releasing leases (the layer passes its clock).
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._held = _Held(lambda: self.now())
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lock = threading.Lock()
        self._busy = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._turns: dict[str | None, int] = {}
        #: Whom the wakes since the last pass began were for (None: every user).
        self._woken: set[str | None] = set()
        #: Turns leased as they were queued, for the next pass; when each was handed.
        self._handed: list[tuple[QueueEntry, datetime]] = []
        #: When a pass last looked at every user's queue (None: never).
        self._scanned_at: datetime | None = None
        #: The async pass running on a loop, which takes the wakes that come meanwhile.
        self._consumer: asyncio.Task[None] | None = None
        runner.handle(ProcessPending, self._process, self._aprocess)
        runner.handle(WakeWorker, self._wake_thread, self._start_task)
        on_close = getattr(runner.store, "on_close", None)
        if callable(on_close):
            on_close(self.store_closing, self.astore_closing)

    # -- what flows ask for -------------------------------------------------------------

    def after_enqueue(self, *, inline: bool, user_id: str, thread_id: str | None,
                      due: bool | None = None, recorded: TurnRecorded | None = None
                      ) -> Flow[None]:
        """After a turn was queued: inline, extract the user's queue now; in the
        background, wake the worker every ``extract_every_n_turns`` turns of a thread.

        ``due``: ``turn_due`` was asked already for this turn (it counts turns);
        ``recorded``: what queueing the turn did, with the entry when it was leased.
        """
        if inline:
            yield ProcessPending(user_id)
        elif self.turn_due(thread_id) if due is None else due:
            leased = recorded.leased if recorded is not None else None
            yield WakeWorker(user_id, leased,
                             claim=leased is None or recorded is None or recorded.others)

    def process_pending(self, user_id: str | None = None, *,
                        users: Sequence[str] | None = None) -> Flow[ProcessResult]:
        """Extract batches until none is left ready; returns the totals.

        Whose: ``user_id``'s, else those of ``users`` (``()``: no one's), else every
        user's. The turns handed to this worker leased (``WakeWorker``) are
        extracted too, after the claimed ones: a user's older turns first.
        """
        total = ProcessResult()
        if user_id is None and users is None:
            with self._lock:
                self._scanned_at = self.now()
        if self._leased:  # a pass the database left behind holds their leases
            leased, self._leased = self._leased, []
            try:
                yield from release_leased(leased, now=self.now())
            except Exception:
                self._leased = leased + self._leased
                raise
        while users != () and not self._held.stopping():
            result = yield from self._guarded(self._batch(user_id, self._held, users or ()))
            self._add(total, result)
            # A claim that got less than it asked for emptied what was ready: claiming
            # again would only find the nothing that is left.
            if result.drained or (not result.done and not result.failed):
                break
        with self._lock:
            handed, self._handed = self._handed, []
        if handed and not self._held.stopping():
            entries = [e for e, _ in handed]
            self._add(total, (yield from self._guarded(self._ingest_leased(
                entries, min(at for _, at in handed), self._held))))
        return total

    def _guarded(self, flow: Flow[ProcessResult]) -> Flow[ProcessResult]:
        try:
            return (yield from flow)
        except Exception as e:
            with self._lock:  # what the pass could not release, the next one will
                self._leased.extend(getattr(e, "leased", ()))
            raise

    def _add(self, total: ProcessResult, result: ProcessResult) -> None:
        total.add(result)
        self._on_results(result.results)

    def turn_due(self, thread_id: str | None) -> bool:
        """Whether this turn of ``thread_id`` wakes the worker (every
        ``extract_every_n_turns``-th of the thread); counts the turn."""
        # Every N turns per thread; the queue keeps the rest until then (or a drain).
        n = self.settings.extract_every_n_turns
        with self._lock:
            self._turns[thread_id] = self._turns.get(thread_id, 0) + 1
            return self._turns[thread_id] % n == 0

    # -- executing those requests -------------------------------------------------------

    def _process(self, request: ProcessPending) -> ProcessResult:
        return self.runner.run(self.process_pending(request.user_id))

    async def _aprocess(self, request: ProcessPending) -> ProcessResult:
        return await self.runner.arun(self.process_pending(request.user_id))

    def next_scope(self, *, polled: bool = False) -> tuple[str, ...] | None:
        """Whose queues the next background pass claims, from the wakes since the last
        one began: those users' alone (none, when every wake handed its turn leased and
        needs no claim), or every user's (``None``) after a poll's timeout
        (``polled``), when a wake named no user, or when no pass looked at every user's
        queue within ``poll_seconds``.

        A pass over every user first asks which users have work (a statement spanning
        users, under the maintenance binding); a pass for the woken users claims at
        once, two statements fewer. The look at every user's queue every
        ``poll_seconds`` still picks up what no turn of this process announces:
        retries that came due, turns another process queued. The wakes are taken:
        a wake that comes during the pass goes to the next one.
        """
        now = self.now()
        with self._lock:
            woken, self._woken = self._woken, set()
            if (polled or None in woken or self._scanned_at is None
                    or (now - self._scanned_at).total_seconds() >= self.poll_seconds):
                return None
            return tuple(sorted(u for u in woken if u is not None))

    def _has_work(self) -> bool:
        with self._lock:
            return bool(self._woken or self._handed)

    def _take_wake(self, request: WakeWorker) -> None:
        with self._lock:
            if request.entry is not None:
                self._handed.append((request.entry, self.now()))
                self._held.hold([request.entry])  # released if the store closes first
            if request.claim or request.entry is None:
                self._woken.add(request.user_id)

    def _wake_thread(self, request: WakeWorker) -> None:
        self._take_wake(request)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(
                    target=self._work, name="langmem-extract", daemon=True)
                self._thread.start()
        self._wake.set()

    async def _start_task(self, request: WakeWorker) -> None:
        # One pass at a time on a loop: a wake during a pass is taken by its next
        # round, so the turns' users are claimed together, not one task per turn
        # competing with the turns for the pool.
        self._take_wake(request)
        loop = asyncio.get_running_loop()
        running = self._consumer
        if running is not None and running.get_loop() is loop and not running.done():
            return
        task = loop.create_task(self._apasses())
        self._consumer = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def store_closed(self) -> bool:
        """Whether the store's connection (or pool) was closed: nothing more can run.

        A connection broken by the server's death is not closed: the store opens it
        again, and the worker keeps trying.
        """
        conn = getattr(self.runner.store, "conn", None)
        return bool(getattr(conn, "closed", False)) and not getattr(conn, "broken", False)

    def _failed(self, error: Exception) -> None:
        if self.store_closed():
            # The store closed under the pass (its ``with`` block ended before
            # ``layer.close()``): not an error; what was not extracted stays queued.
            logger.debug("Background extraction stopped: the store was closed",
                         exc_info=True)
        elif isinstance(error, DatabaseUnavailableError):
            # An outage, not a bug: the turns stay queued and the next pass (after a
            # bounded backoff) reconnects and extracts them.
            self._outages += 1
            logger.warning("Background extraction paused, PostgreSQL unavailable "
                           "(retrying in %.1f s): %s", self.retry_pause(), error)
        else:  # the entries stay queued; the next pass retries them
            logger.exception("Background extraction pass failed")

    def retry_pause(self) -> float:
        """Seconds before the next pass after consecutive outages: doubling, bounded."""
        if not self._outages:
            return self.poll_seconds
        return min(self.max_retry_seconds, self.min_retry_seconds * 2 ** (self._outages - 1))

    def _work(self) -> None:
        while not self._stop.is_set():
            woken = self._wake.wait(timeout=self.retry_pause())
            self._wake.clear()
            with self._busy:
                if self.store_closed():
                    return
                # After a poll's timeout: every user's queue.
                scope = self.next_scope(polled=not woken)
                try:
                    self.runner.run(self.process_pending(users=scope))
                except Exception as e:
                    self._failed(e)
                else:
                    self._outages = 0

    async def _apasses(self) -> None:
        """Passes until no wake is left; each takes the wakes since the last began."""
        while self._has_work():
            if self.store_closed():
                return
            scope = self.next_scope()
            try:
                await self.runner.arun(self.process_pending(users=scope))
            except Exception as e:
                self._failed(e)
                return  # the entries stay queued; the next wake or poll retries them
            else:
                self._outages = 0

    # -- the store closing under a pass --------------------------------------------------

    def store_closing(self) -> None:
        """The store is about to close: stop the thread's pass at its next turn, then
        release every turn still leased, while the connection is open."""
        self._held.stop.set()
        self._stop.set()
        self._wake.set()
        if self._busy.acquire(timeout=self.close_grace_seconds):
            self._busy.release()
        leased = self._unfinished()
        if leased:
            try:
                self.runner.run(release_leased(leased, now=self.now(),
                                               reason="released: the store closed"))
            except Exception:  # the database is gone: the short lease brings them back
                logger.debug("Could not release leased turns at close", exc_info=True)

    async def astore_closing(self) -> None:
        """Async twin of ``store_closing`` (the async store's close hook): waits
        for this loop's extraction tasks to reach their next turn."""
        self._held.stop.set()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=self.close_grace_seconds)
        leased = self._unfinished()
        if leased:
            try:
                await self.runner.arun(release_leased(leased, now=self.now(),
                                                      reason="released: the store closed"))
            except Exception:
                logger.debug("Could not release leased turns at close", exc_info=True)

    def _unfinished(self) -> list[tuple[str, int]]:
        with self._lock:
            leased, self._leased = self._leased + self._held.take(), []
            self._handed = []  # held too: released with the rest
        return leased

    # -- finishing ----------------------------------------------------------------------

    def drain(self, timeout: float | None = None) -> ProcessResult:
        """Wait for the thread's current pass, then extract everything ready.

        Raises:
            TimeoutError: The pass or the extraction took longer than ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._busy.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError("drain(): the background worker did not finish in time")
        try:
            result = self.runner.run(self.process_pending())
        finally:
            self._busy.release()
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("drain() took longer than its timeout")
        return result

    async def adrain(self, timeout: float | None = None) -> ProcessResult:
        """Await this loop's extraction tasks, then extract everything ready."""
        if self._tasks:
            await asyncio.wait_for(asyncio.gather(*list(self._tasks)), timeout)
        return await self.runner.arun(self.process_pending())

    def stop(self) -> None:
        """Stop the worker thread after its current pass (it restarts when woken)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class ExtractionLoop:
    """Extracts queued turns in a task on a server's loop, every ``poll_seconds``.

    The memory nodes wake extraction after each turn themselves (``Worker``); a
    server also runs this loop, which picks up what they leave: turns queued before the
    server started (or by another process), retries that came due, and turns between
    ``extract_every_n_turns``.

    Args:
        process: One pass over the queue (``memory.admin.aprocess_pending``).
        poll_seconds: Pause between passes.
    """

    def __init__(self, process: Callable[[], Awaitable[object]], *,
                 poll_seconds: float = 5.0) -> None:
        self.process = process
        self.poll_seconds = poll_seconds
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether the loop is running."""
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop on the running event loop (its first pass runs at once)."""
        if not self.running:
            self._stop.clear()
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="langmem-extraction")

    def wake(self) -> None:
        """Run a pass now instead of at the next poll."""
        self._wake.set()

    async def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()  # a wake during the pass runs another one at once
            try:
                await self.process()
            except Exception:  # the turns stay queued; the next pass retries them
                logger.exception("Background extraction pass failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wait(), self.poll_seconds)

    async def _wait(self) -> None:
        stop, wake = (asyncio.ensure_future(e.wait()) for e in (self._stop, self._wake))
        try:
            await asyncio.wait({stop, wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            wake.cancel()

    async def stop(self) -> None:
        """Stop after the current pass; it is awaited, never cancelled."""
        self._stop.set()
        if self._task is not None:
            await asyncio.shield(self._task)
            self._task = None
