"""The job runner: records runs, makes them idempotent per period, resumable, sharded.

``run`` runs one job for one period (derived from ``now`` and the job's
schedule, see ``langmem_layer.jobs.schedule``) and one shard, and records it in
``langmem_job_runs``:

- **Once per period.** The run's row is unique on (job, period, shard); a finished
  row makes the next run of that period a no-op (``skipped``) unless ``force``.
- **One runner at a time.** The run holds a session advisory lock on its connection
  while it works; another runner (thread, process, machine) that finds it held
  returns ``busy`` at once. The row says *whether* a period ran; the lock says
  *whether it is running now*. A run whose process died loses its lock with its
  connection, so it can be resumed at once, with no lease to wait out.
- **Resumable, never twice.** A per-user job's function runs for each user in a
  transaction that also moves the row's cursor to that user (and adds the user's
  counts); the cursor only moves forward, so a user's work commits exactly once. A
  run that stopped (an error, a crash) resumes after its cursor.
- **Sharded.** Users are split by a stable hash of ``user_id`` (``shard``, e.g.
  ``Shard(1, 4)``): four workers with ``--shard 0/4`` ... ``3/4`` share the users,
  each recording its own row.
- **Batched embedding.** A job that defers its writes (``defers_writes``) is run a
  chunk of users at a time by ``langmem_layer.jobs.batching.per_user``: the
  chunk's texts embedded in one model call, each user's writes still committed with
  the cursor in the user's own transaction, and users with nothing new skipped.

Whole-store jobs are recorded the same way (shard ``0/1``); their work is one call,
so "resume" means running them again, which they tolerate (each is idempotent).
``run_due`` is the scheduler's pass: each scheduled job's latest due period.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

import psycopg

from langmem_layer.errors import (
    ConfigurationError,
)
from langmem_layer.jobs import batching
from langmem_layer.jobs import schedule as sched
from langmem_layer.jobs.registry import JOBS, Job, JobContext, JobResult, _execute
from langmem_layer.jobs.turns import FAILED, TOKENS
from langmem_layer.jobs.turns import STOPS_THE_RUN as _STOPS_THE_RUN
from langmem_layer.jobs.turns import advance as _advance
from langmem_layer.jobs.turns import counts_of as _counts
from langmem_layer.jobs.turns import progress_bar as _progress
from langmem_layer.jobs.turns import run_settings as _settings
from langmem_layer.jobs.turns import user_failed as _user_failed
from langmem_layer.settings import MemorySettings
from langmem_layer.sql import citus as citussql
from langmem_layer.sql import jobs as sql
from langmem_layer.sql import rls

logger = logging.getLogger("langmem_layer.jobs")

__all__ = ["ALL", "JobRun", "Shard", "run", "run_due", "run_users"]

#: Users fetched per page of the walk (the cursor moves per user, not per page).
PAGE = 500
Status = Literal["done", "skipped", "busy", "dry-run"]


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count``: the users whose hash modulo ``count`` is ``index``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"1/4"`` as ``Shard(1, 4)``.

        Raises:
            ConfigurationError: Not ``i/n`` with 0 <= i < n.
        """
        index, sep, count = text.partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            shard = None
        if not sep or shard is None or not 0 <= shard.index < shard.count:
            raise ConfigurationError(
                f"A shard is i/n with 0 <= i < n, e.g. 0/4; got {text!r}.")
        return shard

    @property
    def label(self) -> str:
        """``"1/4"``: the shard column of the run's row."""
        return f"{self.index}/{self.count}"


#: Every user: the shard of an unsharded run.
ALL = Shard(0, 1)


@dataclass(slots=True)
class JobRun:
    """What ``run`` did.

    Attributes:
        job: The job's name.
        period: The period run for (``2026-11-23``, ``2026-W48``, ``2026-11``).
        shard: ``"0/1"`` for every user, ``"1/4"`` for a shard, ``"user:U"`` for one user.
        status: ``done`` (ran to the end now), ``skipped`` (the period had finished;
            nothing done), ``busy`` (another runner holds it; nothing done) or
            ``dry-run`` (ran with ``dry_run=True``, rolled back, nothing recorded).
        users: Users done in this period so far (a resumed run counts its earlier ones).
        counts: Outcomes summed over those users (or the whole-store job's counts).
        resumed_after: The cursor this run started after, when it resumed.
        finished_at: When the period's run finished (for ``skipped``: that earlier run).
        error: The recorded error of a run with failures: a whole-store job's failed
            count, or the users whose part failed (their work rolled back, the others
            done).
        result: A whole-store job's own ``JobResult`` (None per user).
        tokens: Tokens the run's users' work sent to a chat model so far.
        failures: A per-user run's failed users and each one's error (the first
            ``KEPT_FAILURES``).
    """

    job: str
    period: str
    shard: str
    status: Status
    users: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    resumed_after: str | None = None
    finished_at: datetime | None = None
    error: str | None = None
    result: JobResult | None = None
    tokens: int = 0
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        """How many things failed (the ``failed`` count)."""
        return self.counts.get("failed", 0)

    def summary(self) -> str:
        """One line for a log: what ran and how it ended."""
        head = f"{self.job} [{self.period}, shard {self.shard}]"
        if self.status == "skipped":
            at = self.finished_at.isoformat(timespec="seconds") if self.finished_at else "?"
            return f"{head}: already ran (finished {at}); force to run it again"
        if self.status == "busy":
            return f"{head}: running elsewhere; nothing done here"
        if self.result is not None:
            return f"{head}: {self.result.summary()}"
        outcomes = ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items()))
        if self.tokens:
            outcomes += f"{', ' if outcomes else ''}{self.tokens} tokens sent to a model"
        dry = " (dry run, nothing written)" if self.status == "dry-run" else ""
        failed = f"; {self.error}" if self.failures and self.error else ""
        return f"{head}: {self.users} users{', ' + outcomes if outcomes else ''}{dry}{failed}"

    def table(self) -> str:
        """A per-user run's summary table: users and each outcome's count."""
        rows = [("job", self.job), ("period", self.period), ("shard", self.shard),
                ("status", self.status)]
        if self.resumed_after is not None:
            rows.append(("resumed after", self.resumed_after))
        rows.append(("users", str(self.users)))
        rows += [(k, str(n)) for k, n in sorted(self.counts.items())]
        if self.tokens:
            rows.append(("tokens", str(self.tokens)))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


# -- running ---------------------------------------------------------------------------


@contextmanager
def _session(ctx: JobContext) -> Iterator[tuple[psycopg.Connection[Any], JobContext]]:
    """One connection for the whole run, and a context whose store works on it.

    The advisory lock belongs to this connection's session, and each user's
    transaction is on it. The store is a copy on this connection (its own lock), so
    that a job calling the store while the run holds a single-connection store's
    connection does not wait on itself; a layer is rebuilt on it on first use.
    """
    with ctx.store.pinned() as store:
        if store.embeddings is not None:
            # The copy's model only: each distinct text embedded once in this run.
            # A chunk closes once its texts reach the limit, so it may pass it by one
            # user's texts: twice the limit keeps a chunk's texts in one call.
            store.embeddings = batching.RunEmbeddings(
                store.embeddings,
                batch_size=2 * max(store.embedding_batch_size, batching.CHUNK_TEXTS))
        bound = JobContext(store, database_url=ctx.database_url, data_dir=ctx.data_dir,
                           settings=ctx.settings, synthesizer=ctx.synthesizer)
        bound.conn = store.conn
        yield store.conn, bound


def _one(conn: psycopg.Connection[Any], query: tuple[str, Any]) -> dict[str, Any] | None:
    found = _rows(conn, query)
    return found[0] if found else None


def _rows(conn: psycopg.Connection[Any], query: tuple[str, Any]) -> list[dict[str, Any]]:
    return _execute(conn, *query)


def _listing(conn: psycopg.Connection[Any], query: tuple[str, Any]) -> list[dict[str, Any]]:
    """A statement listing users, in a transaction of its own under the maintenance
    bypass of row-level security (the tables force RLS, even on their owner)."""
    with conn.transaction():
        _rows(conn, rls.bind(None, role=None, switch_role=False))
        return _rows(conn, query)


def _resolve(job: Job | str) -> Job:
    if isinstance(job, Job):
        return job
    try:
        return JOBS[job]
    except KeyError:
        raise ConfigurationError(
            f"No job {job!r}; registered: {', '.join(sorted(JOBS))}.") from None


def _wall() -> datetime:
    """The runner's clock: when a run starts and finishes (its row's times)."""
    return datetime.now(UTC)


def _distributed(conn: psycopg.Connection[Any]) -> bool:
    """Whether the database is on Citus (the walk's form: ``sql.users``)."""
    with conn.transaction():
        return bool(_rows(conn, citussql.has_citus())[0]["citus"])


def _walk(conn: psycopg.Connection[Any], *, after: str | None, shard: Shard,
          user: str | None) -> Iterator[str]:
    """The users of the run in order, after ``after``; fetched a page at a time."""
    if user is not None:
        if after != user:  # a one-user run's cursor is that user once done
            yield user
        return
    distributed = _distributed(conn)
    while True:
        page = [r["user_id"] for r in _listing(conn, sql.users(
            after=after, shard=shard.index, shards=shard.count, limit=PAGE,
            distributed=distributed))]
        yield from page
        if len(page) < PAGE:
            return
        after = page[-1]


def _total(conn: psycopg.Connection[Any], *, after: str | None, shard: Shard,
           user: str | None) -> int:
    if user is not None:
        return int(after != user)
    rows = _listing(conn, sql.count_users(after=after, shard=shard.index, shards=shard.count,
                                          distributed=_distributed(conn)))
    return int(rows[0]["n"]) if rows else 0


def _per_user(conn: psycopg.Connection[Any], bound: JobContext, job: Job, *, now: datetime,
              users: Iterable[str], total: int, record: tuple[str, str, str] | None,
              dry_run: bool, options: Mapping[str, Any], progress: bool,
              out: TextIO | None) -> tuple[int, dict[str, int], str | None]:
    """Run ``job`` for each user, each in its own transaction.

    ``record`` is (job, period, shard) to advance per user, or None (unrecorded).
    Returns users done, summed counts and the last user done.
    """
    if job.defers_writes and not dry_run:
        return batching.per_user(conn, bound, job, now=now, users=users, total=total,
                                 record=record, options=options, progress=progress, out=out)
    pause = _settings(bound).jobs_pause_ms / 1000
    done, totals, last = 0, dict[str, int](), None
    with _progress(total, job.name, progress, out) as bar:
        for user_id in users:
            try:
                counts = _one_user(conn, bound, job, user_id, now=now, record=record,
                                   dry_run=dry_run, options=options)
            except _STOPS_THE_RUN:
                raise
            except Exception as e:
                if conn.broken:
                    raise
                # The user's work rolled back with its transaction; the others go on.
                _user_failed(conn, job, user_id, e, record)
                counts = {FAILED: 1}
            else:
                done += 1
            last = user_id
            for k, n in counts.items():
                totals[k] = totals.get(k, 0) + n
            bar.update()
            if pause:
                # Between users, outside any transaction: nothing held while waiting.
                time.sleep(pause)
    return done, totals, last


def _one_user(conn: psycopg.Connection[Any], bound: JobContext, job: Job, user_id: str, *,
              now: datetime, record: tuple[str, str, str] | None, dry_run: bool,
              options: Mapping[str, Any]) -> dict[str, int]:
    """Run ``job`` for one user in its own transaction; returns its counts."""
    with conn.transaction():
        # The user's transaction acts for the user only (sql/rls.py), whatever
        # the job's function sends.
        _rows(conn, rls.bind(user_id, role=bound.store.rls_role, switch_role=True,
                             where_possible=bound.store.rls_where_possible))
        if record is not None:
            _rows(conn, sql.relaxed_commit())
        counts = _counts(job.function(bound, user_id, now=now, dry_run=dry_run,
                                      **options), job, user_id)
        # Tokens sent to a model have a column of their own, not an outcome.
        tokens = counts.pop(TOKENS, 0)
        if dry_run:
            # Whatever the function wrote despite dry_run is undone.
            raise psycopg.Rollback()
        if record is not None:
            _advance(conn, job, record, user_id, counts, tokens)
    return counts


def _period(job: Job, now: datetime, settings: MemorySettings) -> str:
    """The period a run at ``now`` covers: for a scheduled job, the one the scheduler
    holds due (``due_period``), so that a manual run
    and the worker's agree: before the day's ``jobs_time_of_day`` that is still the
    previous day's period, which the manual run then covers (the worker skips it)."""
    if job.schedule is None:
        return sched.ON_DEMAND
    return sched.due_period(job.schedule, now, sched.zone(settings.jobs_timezone),
                            sched.parse_time_of_day(settings.jobs_time_of_day))


def run(ctx: JobContext, job: Job | str, *, now: datetime | None = None,
        period: str | None = None, user: str | None = None, shard: Shard | None = None,
        dry_run: bool = False, force: bool = False, progress: bool = False,
        options: Mapping[str, Any] | None = None, out: TextIO | None = None) -> JobRun:
    """Run ``job`` for one period and shard, recorded in ``langmem_job_runs``.

    Args:
        ctx: The store (and settings: ``jobs_timezone``) to run against.
        job: The job or its registered name.
        now: The time to run at (default: the store's clock); passed to the job.
        period: The period to record (default: the one the scheduler holds due at
            ``now``, so a manual run covers what the worker would run).
        user: Run a per-user job for this user only (recorded as shard ``user:U``).
        shard: Run a per-user job for this shard of users (default: every user).
        dry_run: Run a per-user job with ``dry_run=True``, each user's transaction
            rolled back; nothing is written or recorded.
        force: Run a finished period again from the first user.
        progress: Show a progress bar over users (on a terminal).
        options: The job's options.
        out: Where the progress bar goes (default: standard error).

    Returns:
        What happened: see ``JobRun``.

    Raises:
        ConfigurationError: An unknown job or option, ``user``/``shard``/``dry_run``
            for a whole-store job, or a per-user function returning something else
            than counts.
        Exception: What the job raised; the run's row keeps the error and its cursor,
            and the next run resumes after the last user done.
    """
    job = _resolve(job)
    given = job.given(options or {})
    if not job.per_user and (user is not None or shard not in (None, ALL) or dry_run):
        raise ConfigurationError(
            f"Job {job.name} works on the whole store: --user, --shard and --dry-run "
            "apply to per-user jobs only.")
    if user is not None and shard not in (None, ALL):
        raise ConfigurationError("Give a user or a shard, not both.")
    if user is not None and not user:
        raise ConfigurationError("The user id is empty; give the id of a user.")
    settings = _settings(ctx)
    now = now or ctx.store.now()
    period = period or _period(job, now, settings)
    shard = shard or ALL
    label = f"user:{user}" if user is not None else shard.label
    key = f"langmem_layer.job:{job.name}:{period}:{label}"
    with _session(ctx) as (conn, bound):
        if dry_run:
            total = _total(conn, after=None, shard=shard, user=user)
            users = _walk(conn, after=None, shard=shard, user=user)
            done, counts, _ = _per_user(conn, bound, job, now=now, users=users, total=total,
                                        record=None, dry_run=True, options=given,
                                        progress=progress, out=out)
            return JobRun(job.name, period, label, "dry-run", done, counts)
        locked = _one(conn, sql.lock(key))
        if not (locked and locked["locked"]):
            return JobRun(job.name, period, label, "busy")
        try:
            return _recorded(conn, bound, job, now=now, period=period, shard=shard,
                             user=user, label=label, force=force, options=given,
                             progress=progress, out=out)
        finally:
            if not conn.broken:  # a broken session's advisory lock ended with it
                _one(conn, sql.unlock(key))


def _recorded(conn: psycopg.Connection[Any], bound: JobContext, job: Job, *, now: datetime,
              period: str, shard: Shard, user: str | None, label: str, force: bool,
              options: Mapping[str, Any], progress: bool, out: TextIO | None) -> JobRun:
    """The run proper, under its lock."""
    record = (job.name, period, label)
    row = _one(conn, sql.claim(*record, at=_wall()))
    assert row is not None  # the claim returns the row, new or existing
    if row["finished_at"] is not None:
        # An on-demand job has no period to be done for: each run starts it over.
        if not force and job.schedule is not None:
            return JobRun(job.name, period, label, "skipped", row["users"],
                          dict(row["counts"]), finished_at=row["finished_at"],
                          error=row["error"])
        row = _one(conn, sql.restart(*record, at=_wall()))
    elif not row["created"]:
        row = _one(conn, sql.resume(*record))
    assert row is not None
    after = row["cursor"]
    try:
        if not job.per_user:
            result: JobResult = job.function(bound, now=now, **options)
            error = f"{result.failed} failed" if result.failed else None
            _one(conn, sql.finish(*record, at=_wall(), counts=result.counts, error=error))
            return JobRun(job.name, period, label, "done", 0, dict(result.counts),
                          error=error, result=result)
        total = _total(conn, after=after, shard=shard, user=user)
        users = _walk(conn, after=after, shard=shard, user=user)
        _per_user(conn, bound, job, now=now, users=users, total=total, record=record,
                  dry_run=False, options=options, progress=progress, out=out)
    except BaseException as e:
        _record_failure(conn, record, e)
        raise
    final = _one(conn, sql.finish(*record, at=_wall()))
    assert final is not None
    failures = dict(final["failures"] or {})
    if failures:
        final = _one(conn, sql.finish(*record, at=_wall(), error=failures_text(
            final["counts"].get(FAILED, len(failures)), failures)))
        assert final is not None
    return JobRun(job.name, period, label, "done", final["users"], dict(final["counts"]),
                  resumed_after=after, finished_at=final["finished_at"],
                  tokens=final["tokens"], error=final["error"], failures=failures)


def failures_text(count: int, failures: Mapping[str, str]) -> str:
    """The run's error when some users failed: how many, and the first ones' errors."""
    shown = "; ".join(f"{user}: {error}" for user, error in list(failures.items())[:3])
    more = f" (and {count - 3} more)" if count > 3 else ""
    return f"{count} user(s) failed, the others were done: {shown}{more}"


def _record_failure(conn: psycopg.Connection[Any], record: tuple[str, str, str],
                    error: BaseException) -> None:
    text = f"{type(error).__name__}: {error}"
    # When the connection itself failed, the cursor in the row is still right.
    with contextlib.suppress(psycopg.Error):
        _one(conn, sql.fail(*record, text))


def run_users(ctx: JobContext, job: Job, *, now: datetime | None = None,
              options: Mapping[str, Any] | None = None) -> JobResult:
    """A per-user job over every user, unrecorded (``Job.run``); one transaction
    per user."""
    with _session(ctx) as (conn, bound):
        total = _total(conn, after=None, shard=ALL, user=None)
        users = _walk(conn, after=None, shard=ALL, user=None)
        done, counts, _ = _per_user(conn, bound, job, now=now or ctx.store.now(),
                                    users=users, total=total, record=None, dry_run=False,
                                    options=options or {}, progress=False, out=None)
    return JobResult(job.name, counts, detail=done)


# -- the schedule ----------------------------------------------------------------------


def _scheduled(names: Iterable[str] | None) -> list[Job]:
    jobs = [j for j in JOBS.values() if j.schedule is not None]
    if names is None:
        return jobs
    wanted = set(names)
    unknown = wanted - {j.name for j in jobs}
    if unknown:
        raise ConfigurationError(
            f"Not scheduled jobs: {', '.join(sorted(unknown))}; scheduled: "
            f"{', '.join(j.name for j in jobs)}.")
    return [j for j in jobs if j.name in wanted]


def run_due(ctx: JobContext, *, now: datetime | None = None, jobs: Iterable[str] | None = None,
            shard: Shard | None = None, shards: int = 1, progress: bool = False,
            on_error: Callable[[Job, Exception], None] | None = None) -> list[JobRun]:
    """Run each scheduled job whose latest due period has not finished (the worker's pass).

    Every worker may call this as often as it likes: a finished period is skipped, a
    running one is ``busy``, so each period runs once however many workers there are.
    A period missed while no worker ran is run when one comes back; only the latest
    due period, not each one missed.

    Args:
        ctx: The store, and settings (``jobs_time_of_day``, ``jobs_timezone``).
        now: The time of the pass (default: the store's clock).
        jobs: Only these jobs (default: every scheduled job).
        shard: Only this shard of users for per-user jobs (a worker pinned to it).
        shards: Without ``shard``: split per-user jobs into this many shards and take
            each in turn; one that another worker is running is passed over, so
            workers share the shards and any one of them finishes them all. Every
            worker must use the same count (a user's run is recorded per shard).
        progress: Show progress bars.
        on_error: ``on_error(job, exception)`` when a job fails; the pass goes on to
            the next. Default: raise.

    Returns:
        The runs that did something (``done``); skipped and busy ones are left out.
    """
    settings = _settings(ctx)
    tz = sched.zone(settings.jobs_timezone)
    at = sched.parse_time_of_day(settings.jobs_time_of_day)
    now = now or ctx.store.now()
    if shards < 1:
        raise ConfigurationError(f"shards is a count of 1 or more; got {shards}.")
    ran: list[JobRun] = []
    for job in _scheduled(jobs):
        assert job.schedule is not None
        period = sched.due_period(job.schedule, now, tz, at)
        parts = [None] if not job.per_user else (
            [shard] if shard is not None else [Shard(i, shards) for i in range(shards)])
        for part in parts:
            try:
                result = run(ctx, job, now=now, period=period, progress=progress,
                             shard=part)
            except Exception as e:
                if on_error is None:
                    raise
                on_error(job, e)
                break  # its other shards wait for the next pass
            if result.status == "done":
                ran.append(result)
    return ran
