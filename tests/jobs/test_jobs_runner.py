"""The job runner on the real database: recorded, idempotent per period, resumable,
sharded, scheduled once per period however many workers run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta

import psycopg
import pytest

from langmem_layer import ConfigurationError, DatabaseUnavailableError, MemorySettings
from langmem_layer.jobs import JOBS, JobContext, register
from langmem_layer.jobs import schedule as sched
from langmem_layer.jobs.runs import ALL, Shard, run, run_due, run_users
from langmem_layer.jobs.status import status
from langmem_layer.sql.jobs import shard_of
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, MemoryRecord

JOB = "touch-test"
NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
USERS = [f"user-{n:02d}" for n in range(12)]


class Touch:
    """A per-user job that marks each user once per call, and can stop midway as a run
    stops when the database goes away (a user's own failure does not stop a run)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail_after: int | None = None

    def __call__(self, ctx: JobContext, user_id: str, *, now: datetime,
                 dry_run: bool = False) -> dict[str, int]:
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise DatabaseUnavailableError(f"stopped at {user_id}")
        self.calls.append(user_id)
        (n,) = (r["n"] for r in ctx.execute((
            "SELECT count(*) AS n FROM langmem_items WHERE user_id = %s", [user_id])))
        if not dry_run:
            ctx.execute(("""INSERT INTO job_test_marks (user_id, day, touched)
                VALUES (%s, %s, 1) ON CONFLICT (user_id, day)
                DO UPDATE SET touched = job_test_marks.touched + 1""",
                         [user_id, now.date()]))
        return {"touched": 1, "items": n}


@pytest.fixture
def touch(pg_uri: str) -> Iterator[Touch]:
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("""CREATE TABLE IF NOT EXISTS job_test_marks (
            user_id text, day date, touched int, PRIMARY KEY (user_id, day))""")
        conn.execute("TRUNCATE job_test_marks")
        # With rls=True a job's own SQL runs as the app role, like the store's.
        conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON job_test_marks TO langmem_app")
    job = Touch()
    register(JOB, "mark each user", schedule="daily", per_user=True)(job)
    try:
        yield job
    finally:
        del JOBS[JOB]


def marks(pg_uri: str) -> dict[str, int]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute("SELECT user_id, sum(touched) FROM job_test_marks GROUP BY 1")
        return {u: int(n) for u, n in rows}


def runs(pg_uri: str) -> list[tuple]:
    with psycopg.connect(pg_uri) as conn:
        return conn.execute("""SELECT job, period, shard, cursor, users,
            finished_at IS NOT NULL, error FROM langmem_job_runs ORDER BY 1, 2, 3""").fetchall()


@pytest.fixture
def people(store: PostgresMemoryStore) -> list[str]:
    """Every user of USERS with one memory (and the shared tenant '' with an item)."""
    for user in USERS:
        rec = MemoryRecord(content=f"{user} likes tea.", kind=Kind.PROFILE_FACT,
                           layer=Layer.SEMANTIC, occurred_at=NOW, last_accessed_at=NOW)
        store.put(("memories", user, "work"), "tea", rec.to_value())
    store.put(("docs",), "shared", {"text": "not a user's"})
    return USERS


def ctx_of(store: PostgresMemoryStore, **settings) -> JobContext:
    return JobContext(store, settings=MemorySettings(**settings))


def test_a_period_runs_once_and_again_only_when_forced(store, people, touch, pg_uri) -> None:
    ctx = ctx_of(store)
    first = run(ctx, JOB, now=NOW)
    assert (first.status, first.period, first.shard, first.users) == (
        "done", "2026-11-23", "0/1", 12)
    assert first.counts == {"touched": 12, "items": 12}
    assert touch.calls == sorted(people)  # stable order; the shared tenant is no user
    again = run(ctx, JOB, now=NOW + timedelta(hours=5))
    assert (again.status, again.users, again.counts) == ("skipped", 12, first.counts)
    assert "already ran" in again.summary()
    assert marks(pg_uri) == dict.fromkeys(people, 1)
    forced = run(ctx, JOB, now=NOW, force=True)
    assert (forced.status, forced.users) == ("done", 12)
    assert marks(pg_uri) == dict.fromkeys(people, 2)
    assert run(ctx, JOB, now=NOW + timedelta(days=1)).period == "2026-11-24"
    assert [r[1] for r in runs(pg_uri)] == ["2026-11-23", "2026-11-24"]


def test_a_run_killed_midway_resumes_after_its_cursor(store, people, touch, pg_uri) -> None:
    ctx = ctx_of(store)
    touch.fail_after = 5
    with pytest.raises(DatabaseUnavailableError, match="stopped at user-05"):
        run(ctx, JOB, now=NOW)
    (row,) = runs(pg_uri)
    assert row == (JOB, "2026-11-23", "0/1", "user-04", 5, False,
                   "DatabaseUnavailableError: stopped at user-05")
    assert marks(pg_uri) == dict.fromkeys(people[:5], 1)
    touch.fail_after = None
    resumed = run(ctx, JOB, now=NOW)
    assert (resumed.status, resumed.resumed_after, resumed.users) == ("done", "user-04", 12)
    assert resumed.counts == {"touched": 12, "items": 12}
    assert touch.calls == people  # user-05 failed before it was called; none twice
    assert marks(pg_uri) == dict.fromkeys(people, 1)
    assert runs(pg_uri)[0][5:] == (True, None)


def test_a_user_whose_work_fails_is_rolled_back_and_the_others_go_on(
        store, people, pg_uri, touch) -> None:
    def half_then_fail(ctx, user_id, *, now, dry_run=False):
        touch(ctx, user_id, now=now)
        if user_id in ("user-03", "user-07"):
            raise ValueError(f"bad data of {user_id}")
        return {"touched": 1}

    register("half-fails", "fails on two users", per_user=True,
             schedule="daily")(half_then_fail)
    try:
        done = run(ctx_of(store), "half-fails", now=NOW)
        again = run(ctx_of(store), "half-fails", now=NOW)
        shown = {s.job: s for s in status(ctx_of(store), now=NOW)}["half-fails"]
    finally:
        del JOBS["half-fails"]
    # Their marks were rolled back; every other user's work is done and kept.
    assert marks(pg_uri) == {u: 1 for u in people if u not in ("user-03", "user-07")}
    assert (done.status, done.users, done.counts) == ("done", 10, {"touched": 10, "failed": 2})
    assert done.failures == {"user-03": "ValueError: bad data of user-03",
                             "user-07": "ValueError: bad data of user-07"}
    assert done.error is not None and done.error.startswith("2 user(s) failed")
    assert "user-03: ValueError: bad data of user-03" in done.error
    assert "2 user(s) failed" in done.summary()
    # The period is finished: the failures are recorded, not retried forever.
    assert again.status == "skipped"
    (row,) = [r for r in runs(pg_uri) if r[0] == "half-fails"]
    assert row[5:] == (True, done.error)
    assert shown.error == done.error


def test_a_job_misconfigured_for_every_user_stops_the_run(store, people, pg_uri) -> None:
    # A job that returns no counts is a bug of the job, not of one user's data.
    register("no-counts", "returns nothing", per_user=True, schedule="daily")(
        lambda ctx, user_id, *, now, dry_run=False: None)
    try:
        with pytest.raises(ConfigurationError, match="must return a dict"):
            run(ctx_of(store), "no-counts", now=NOW)
    finally:
        del JOBS["no-counts"]


def test_two_workers_run_each_period_once(pg_uri, index, people, touch) -> None:
    barrier = threading.Barrier(2)
    results: list[list] = [[], []]
    errors: list[BaseException] = []

    def worker(slot: int) -> None:
        try:
            with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
                ctx = ctx_of(store)
                for day in range(3):
                    barrier.wait()
                    at = NOW + timedelta(days=day)
                    results[slot] += [r.period for r in run_due(ctx, now=at, jobs=[JOB])]
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(results[0] + results[1]) == ["2026-11-23", "2026-11-24", "2026-11-25"]
    assert len(touch.calls) == 36
    with psycopg.connect(pg_uri) as conn:
        per_day = conn.execute("SELECT day, count(*), max(touched) FROM job_test_marks "
                               "GROUP BY 1 ORDER BY 1").fetchall()
    assert [(n, top) for _, n, top in per_day] == [(12, 1)] * 3


def test_a_period_missed_while_down_runs_once_when_back(store, people, touch, pg_uri) -> None:
    ctx = ctx_of(store, jobs_time_of_day="03:00")
    early = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)
    assert [r.period for r in run_due(ctx, now=early, jobs=[JOB])] == ["2026-11-22"]
    assert run_due(ctx, now=early + timedelta(minutes=59), jobs=[JOB]) == []  # not due yet
    assert [r.period for r in run_due(ctx, now=early + timedelta(hours=1), jobs=[JOB])] == [
        "2026-11-23"]
    # Down from the 23rd until the 26th at noon: the 26th's period runs, once.
    back = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    assert [r.period for r in run_due(ctx, now=back, jobs=[JOB])] == ["2026-11-26"]
    assert run_due(ctx, now=back + timedelta(hours=1), jobs=[JOB]) == []
    assert [r[1] for r in runs(pg_uri)] == ["2026-11-22", "2026-11-23", "2026-11-26"]
    # Back at 01:00 on the 28th having missed the 27th: the 27th runs (its period).
    late = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)
    assert [r.period for r in run_due(ctx, now=late, jobs=[JOB])] == ["2026-11-27"]


def test_two_shards_cover_every_user_once(store, people, touch, pg_uri) -> None:
    ctx = ctx_of(store)
    halves = [run(ctx, JOB, now=NOW, shard=Shard(i, 2)) for i in range(2)]
    assert [h.shard for h in halves] == ["0/2", "1/2"]
    assert sum(h.users for h in halves) == 12 and all(h.users for h in halves)
    assert sorted(touch.calls) == people
    assert marks(pg_uri) == dict.fromkeys(people, 1)
    shard0 = [u for u in people if shard_of(u, 2) == 0]
    assert touch.calls[:len(shard0)] == shard0  # SQL and Python hash alike
    assert run(ctx, JOB, now=NOW, shard=Shard(1, 2)).status == "skipped"


def test_one_user_and_dry_run(store, people, touch, pg_uri) -> None:
    ctx = ctx_of(store)
    dry = run(ctx, JOB, now=NOW, dry_run=True)
    assert (dry.status, dry.users, dry.counts) == ("dry-run", 12, {"touched": 12, "items": 12})
    assert marks(pg_uri) == {} and runs(pg_uri) == []
    one = run(ctx, JOB, now=NOW, user="user-07")
    assert (one.status, one.shard, one.users) == ("done", "user:user-07", 1)
    assert marks(pg_uri) == {"user-07": 1}
    assert run(ctx, JOB, now=NOW, user="user-07").status == "skipped"


def test_dry_run_undoes_what_the_function_wrote_anyway(store, people, touch, pg_uri) -> None:
    def ignores_dry_run(ctx, user_id, *, now, dry_run=False):
        return touch(ctx, user_id, now=now)  # writes whatever dry_run says

    register("careless", "writes in a dry run", per_user=True)(ignores_dry_run)
    try:
        assert run(ctx_of(store), "careless", now=NOW, dry_run=True).users == 12
    finally:
        del JOBS["careless"]
    assert marks(pg_uri) == {}


def test_a_per_user_job_also_runs_unrecorded_through_job_run(store, people, touch,
                                                             pg_uri) -> None:
    result = run_users(ctx_of(store), JOBS[JOB], now=NOW)
    assert (result.counts, result.detail) == ({"touched": 12, "items": 12}, 12)
    assert runs(pg_uri) == []


def test_whole_store_jobs_are_recorded_too(store, pg_uri) -> None:
    ctx = ctx_of(store)
    first = run(ctx, "sweep-ttl", now=NOW)
    assert (first.status, first.counts, first.result.summary()) == (
        "done", {"deleted": 0}, "deleted 0 expired items")
    assert run(ctx, "sweep-ttl", now=NOW).status == "skipped"
    weekly = run(ctx, "purge-embedding-cache", now=NOW)
    assert weekly.period == "2026-W48"
    with pytest.raises(ConfigurationError, match="whole store"):
        run(ctx, "sweep-ttl", now=NOW, shard=Shard(0, 2))
    on_demand = [run(ctx, "extract", now=NOW) for _ in range(2)]
    assert [r.status for r in on_demand] == ["done", "done"]  # no period to be done for


def test_status_shows_the_last_run_and_next_due(store, people, touch) -> None:
    ctx = ctx_of(store, jobs_time_of_day="03:00", jobs_timezone="Europe/Lisbon")
    before = {s.job: s for s in status(ctx, now=NOW)}
    assert before[JOB].period is None and before[JOB].due_now
    run(ctx, JOB, now=NOW)
    after = {s.job: s for s in status(ctx, now=NOW)}[JOB]
    assert (after.period, after.shard, after.users, after.counts, after.error) == (
        "2026-11-23", "0/1", 12, {"touched": 12, "items": 12}, None)
    assert after.finished_at is not None and not after.due_now
    assert after.next_due == datetime(2026, 11, 24, 3, 0, tzinfo=sched.zone("Europe/Lisbon"))
    assert {s.job: s for s in status(ctx, now=NOW)}["extract"].next_due is None


def test_schedules_periods_and_due_times() -> None:
    tz, at = sched.zone("America/New_York"), time(3, 0)
    # 01:00 UTC on the 23rd is 20:00 on the 22nd in New York.
    late = datetime(2026, 11, 23, 1, 0, tzinfo=UTC)
    assert sched.period_of("daily", late, tz) == "2026-11-22"
    assert sched.period_of("daily", late, sched.zone("UTC")) == "2026-11-23"
    monday = datetime(2026, 11, 23, 7, 59, tzinfo=UTC)  # 02:59 local, Monday
    assert sched.due_period("weekly", monday, tz, at) == "2026-W47"
    assert sched.due_period("weekly", monday + timedelta(minutes=1), tz, at) == "2026-W48"
    assert sched.period_of("monthly", monday, tz) == "2026-11"
    assert sched.due_period("monthly", datetime(2026, 12, 1, 7, tzinfo=UTC), tz, at) == (
        "2026-11")
    assert sched.next_due("monthly", datetime(2026, 12, 1, 9, tzinfo=UTC), tz, at) == (
        datetime(2027, 1, 1, 3, 0, tzinfo=tz))
    assert sched.next_due("weekly", monday, tz, at) == datetime(2026, 11, 23, 3, tzinfo=tz)
    with pytest.raises(ConfigurationError, match="IANA"):
        sched.zone("Mars/Olympus")
    with pytest.raises(ConfigurationError, match="needs a timezone"):
        sched.period_of("daily", datetime(2026, 1, 1), tz)
    with pytest.raises(ConfigurationError, match="schedule is one of"):
        register("hourly-job", "x", schedule="hourly")


def test_shard_parsing() -> None:
    assert Shard.parse("1/4") == Shard(1, 4) and Shard.parse("0/1") == ALL
    for bad in ("4/4", "1", "a/b", "-1/2"):
        with pytest.raises(ConfigurationError, match="i/n"):
            Shard.parse(bad)


def test_workers_share_the_shards_of_a_period(pg_uri, index, people, touch) -> None:
    barrier = threading.Barrier(2)
    done: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
                barrier.wait()
                done.extend(r.shard for r in run_due(ctx_of(store), now=NOW, jobs=[JOB],
                                                     shards=4))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(done) == ["0/4", "1/4", "2/4", "3/4"]  # each shard by one worker
    assert marks(pg_uri) == dict.fromkeys(people, 1)
    assert all(r[5] for r in runs(pg_uri)) and len(runs(pg_uri)) == 4


def test_the_store_of_a_per_user_job_writes_in_the_users_transaction(store, people,
                                                                      pg_uri) -> None:
    def note(ctx: JobContext, user_id: str, *, now: datetime, dry_run: bool = False):
        rec = MemoryRecord(content=f"Checked {user_id} today.", kind=Kind.PROFILE_FACT,
                           layer=Layer.SEMANTIC, occurred_at=now, last_accessed_at=now)
        ctx.store.put(("memories", user_id, "work"), "checked", rec.to_value())
        if user_id == "user-02":
            raise RuntimeError("after the put")
        return {"noted": 1}

    register("note-test", "note each user", per_user=True, schedule="daily")(note)
    try:
        done = run(ctx_of(store), "note-test", now=NOW)
    finally:
        del JOBS["note-test"]
    assert done.failures == {"user-02": "RuntimeError: after the put"}
    # user-02's put was rolled back with its transaction; the others' are kept.
    noted = [u for u in people if store.get(("memories", u, "work"), "checked")]
    assert noted == [u for u in people if u != "user-02"]


def test_status_of_a_sharded_period(store, people, touch) -> None:
    ctx = ctx_of(store)
    run(ctx, JOB, now=NOW, shard=Shard(0, 2))
    touch.fail_after = 0
    with pytest.raises(DatabaseUnavailableError):
        run(ctx, JOB, now=NOW, shard=Shard(1, 2))
    mine = {s.job: s for s in status(ctx, now=NOW)}[JOB]
    assert (mine.shard, mine.due_now) == ("1/2", True)
    assert mine.error == "DatabaseUnavailableError: stopped at " + min(
        u for u in people if shard_of(u, 2) == 1)
    touch.fail_after = None
    run(ctx, JOB, now=NOW, shard=Shard(1, 2))
    mine = {s.job: s for s in status(ctx, now=NOW)}[JOB]
    assert (mine.error, mine.due_now) == (None, False)
