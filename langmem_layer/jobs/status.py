"""Each job's latest recorded run and when it is next due (``langmem-layer jobs status``,
``GET /v1/jobs``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from langmem_layer.jobs import schedule as sched
from langmem_layer.jobs.registry import JOBS, JobContext
from langmem_layer.jobs.runs import _rows, _session, _settings
from langmem_layer.sql import jobs as sql

__all__ = ["JobStatus", "counts_json", "status"]


@dataclass(slots=True)
class JobStatus:
    """A job's latest recorded run and when it is next due (``jobs status``)."""

    job: str
    schedule: str | None
    period: str | None = None
    shard: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    users: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    #: When the next period is due; None for on-demand jobs.
    next_due: datetime | None = None
    #: Whether the latest due period has not finished (the worker would run it now).
    due_now: bool = False
    #: Tokens the latest run sent to a chat model.
    tokens: int = 0
    #: The period the scheduler holds due now (None for on-demand jobs).
    due_period: str | None = None


def status(ctx: JobContext, *, now: datetime | None = None) -> list[JobStatus]:
    """Every registered job's latest recorded run, and when it is next due.

    ``due_now`` is set when the job's latest due period has no run, or a run of some
    shard not finished (shards never started are not known here).
    """
    settings = _settings(ctx)
    tz = sched.zone(settings.jobs_timezone)
    at = sched.parse_time_of_day(settings.jobs_time_of_day)
    now = now or ctx.store.now()
    with _session(ctx) as (conn, _):
        latest = {r["job"]: r for r in _rows(conn, sql.last_runs())}
        out = []
        for job in sorted(JOBS.values(), key=lambda j: j.name):
            st = JobStatus(job.name, job.schedule)
            row = latest.get(job.name)
            if row is not None:
                st.period, st.shard = row["period"], row["shard"]
                st.started_at, st.finished_at = row["started_at"], row["finished_at"]
                st.users, st.counts, st.error = row["users"], dict(row["counts"]), row["error"]
                st.tokens = row["tokens"]
            if job.schedule is not None:
                st.next_due = sched.next_due(job.schedule, now, tz, at)
                st.due_period = sched.due_period(job.schedule, now, tz, at)
                due = _rows(conn, sql.period_runs(job.name, st.due_period))
                st.due_now = not due or any(r["finished_at"] is None for r in due)
            out.append(st)
    return out


def counts_json(counts: Mapping[str, int]) -> str:
    """Counts as compact JSON, for a status line."""
    return json.dumps(dict(sorted(counts.items())), separators=(",", ":"))
