"""SQL for the job runner: the users a per-user job walks, and the record of runs.

Builders return ``(sql, params)`` and do no I/O. ``users`` and ``count_users``
read only user ids, across users, to know whom to serve (like
``langmem_layer.sql.queue_statements.claimable_users``); the per-user work itself binds one
user per statement. ``langmem_job_runs`` is the runner's own table, not a per-user
one: one row per (job, period, shard).

A shard is ``md5(user_id)`` read as a 32-bit number, modulo the shard count: stable
across servers, PostgreSQL versions and processes (unlike ``hashtext``), and the
same in Python (``shard_of``).

On Citus (``distributed=True``) the walk is a plain ``UNION`` of the tables' user
ids in order, with a limit: Citus runs it on every shard (each shard's first users,
from its index) and merges the pages, where it refuses the recursive walk across
shards. A run's times are the runner's clock, given as ``at`` (Citus refuses a
volatile ``clock_timestamp()`` in an update of the reference table
``langmem_job_runs``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from langmem_layer.sql import Sql

__all__ = [
    "KEPT_FAILURES",
    "advance",
    "claim",
    "count_users",
    "fail",
    "finish",
    "last_runs",
    "last_successes",
    "lock",
    "period_runs",
    "relaxed_commit",
    "restart",
    "resume",
    "shard_of",
    "unlock",
    "user_failed",
    "users",
]


#: Tables whose rows make a user: memories and items, threads, queued turns. Each
#: leads its primary key with ``user_id``, which the walk of ``users`` needs.
USER_TABLES = ("langmem_items", "langmem_threads", "langmem_extraction_queue")

_SHARD = "(('x' || substr(md5({col}), 1, 8))::bit(32)::bigint %% %(shards)s)"

_RUN = "job = %(job)s AND period = %(period)s AND shard = %(shard)s"

_COLUMNS = ("job, period, shard, cursor, users, counts, started_at, finished_at, error, "
            "tokens, failures")
#: Per-user errors kept in a run's row (the ``failed`` count keeps counting past them).
KEPT_FAILURES = 100


def shard_of(user_id: str, shards: int) -> int:
    """The shard of ``user_id`` among ``shards``, as the SQL of ``users`` computes it."""
    return int(hashlib.md5(user_id.encode()).hexdigest()[:8], 16) % shards


def _next_user(after: str) -> str:
    # The least user id above ``after`` in any of the tables: one index probe per
    # table (each leads its primary key with user_id), NULL when none is left.
    probes = ",\n                ".join(
        f"(SELECT t.user_id FROM {table} t WHERE t.user_id > {after} "
        "ORDER BY t.user_id LIMIT 1)" for table in USER_TABLES)
    return f"least({probes})"


def _walk(after: str, shard: int, shards: int) -> tuple[str, dict[str, Any]]:
    # A loose index scan merged across the tables: each step finds the next user, so
    # walking costs one probe per table and user, never a read of every row. Steps are
    # strictly increasing, so the walk is in order and without duplicates, and it is
    # evaluated lazily: a LIMIT on it stops the walk. '' is the shared tenant (items
    # outside a tenant root), no user's: starting after '' skips it.
    sql = f"""WITH RECURSIVE walk(user_id) AS (
            SELECT {_next_user("%(after)s")}
            UNION ALL
            SELECT {_next_user("w.user_id")} FROM walk w WHERE w.user_id IS NOT NULL)
        SELECT user_id FROM walk
        WHERE user_id IS NOT NULL AND {_SHARD.format(col="user_id")} = %(shard)s"""
    return sql, {"after": after, "shard": shard, "shards": shards}


def _union(after: str, shard: int, shards: int) -> tuple[str, dict[str, Any]]:
    # The walk on Citus: each table's user ids after ``after``, merged without
    # duplicates. Citus runs it on each shard (by the index leading with user_id) and
    # merges the shards' rows; '' is skipped as in the walk.
    union = "\n            UNION ".join(
        f"SELECT t.user_id FROM {table} t WHERE t.user_id > %(after)s"
        for table in USER_TABLES)
    sql = f"""SELECT u.user_id FROM (
            {union}) u
        WHERE {_SHARD.format(col="u.user_id")} = %(shard)s"""
    return sql, {"after": after, "shard": shard, "shards": shards}


def users(*, after: str | None, shard: int, shards: int, limit: int,
          distributed: bool = False) -> Sql:
    """Up to ``limit`` user ids of ``shard`` (of ``shards``) after ``after``, in order.

    The cost is proportional to the users walked (``limit`` × ``shards`` or so), not
    to the users left, so paging through every user is linear. ``distributed``: the
    form Citus runs (see the module's docstring), which reads the rows of the users
    of the page instead of one index probe per user.
    """
    if distributed:
        sql, params = _union(after or "", shard, shards)
        return (f"{sql}\n        ORDER BY u.user_id LIMIT %(limit)s",
                {**params, "limit": limit})
    sql, params = _walk(after or "", shard, shards)
    return f"{sql}\n        LIMIT %(limit)s", {**params, "limit": limit}


def count_users(*, after: str | None, shard: int, shards: int,
                distributed: bool = False) -> Sql:
    """How many users of ``shard`` come after ``after`` (one row: ``n``); walks them all.
    ``distributed`` as in ``users``."""
    sql, params = (_union if distributed else _walk)(after or "", shard, shards)
    return f"SELECT count(*) AS n FROM ({sql}) s", params


def relaxed_commit() -> Sql:
    """Commit the current transaction without waiting for its WAL to reach disk.

    Safe for a user's transaction: its work and its cursor advance commit or vanish
    together, so a commit lost in a server crash is redone by the resume, never
    half-applied. It spares each user a disk flush (most of a small job's time).
    """
    return "SET LOCAL synchronous_commit = off", {}


def lock(key: str) -> Sql:
    """Try the session advisory lock of a run (one row: ``locked``); never waits.

    Held by the connection running the job until ``unlock``, and released by the
    server when that connection dies, so a crashed run can be resumed at once.
    """
    return ("SELECT pg_try_advisory_lock(hashtextextended(%(key)s, 0)) AS locked",
            {"key": key})


def unlock(key: str) -> Sql:
    """Release the lock taken by ``lock``."""
    return "SELECT pg_advisory_unlock(hashtextextended(%(key)s, 0)) AS unlocked", {"key": key}


def _run(job: str, period: str, shard: str) -> dict[str, Any]:
    return {"job": job, "period": period, "shard": shard}


def claim(job: str, period: str, shard: str, *, at: datetime) -> Sql:
    """Create the run's row, started ``at``, unless it exists; returns the row as it
    now stands."""
    return (
        f"""WITH new AS (
            INSERT INTO langmem_job_runs (job, period, shard, started_at)
            VALUES (%(job)s, %(period)s, %(shard)s, %(at)s)
            ON CONFLICT (job, period, shard) DO NOTHING
            RETURNING {_COLUMNS})
        SELECT {_COLUMNS}, true AS created FROM new
        UNION ALL
        SELECT {_COLUMNS}, false AS created FROM langmem_job_runs WHERE {_RUN}""",
        {**_run(job, period, shard), "at": at},
    )


def period_runs(job: str, period: str) -> Sql:
    """Every shard's row of one period of a job."""
    return (f"SELECT {_COLUMNS} FROM langmem_job_runs WHERE job = %(job)s "
            "AND period = %(period)s", {"job": job, "period": period})


def restart(job: str, period: str, shard: str, *, at: datetime) -> Sql:
    """Start the run over ``at`` (``--force``): no cursor, no counts, not finished."""
    return (
        f"""UPDATE langmem_job_runs SET cursor = NULL, users = 0, counts = '{{}}'::jsonb,
            tokens = 0, started_at = %(at)s, finished_at = NULL, error = NULL,
            failures = '{{}}'::jsonb
        WHERE {_RUN} RETURNING {_COLUMNS}""",
        {**_run(job, period, shard), "at": at},
    )


def resume(job: str, period: str, shard: str) -> Sql:
    """Pick up an unfinished run where its cursor stands; its last error is cleared."""
    return (f"UPDATE langmem_job_runs SET error = NULL WHERE {_RUN} RETURNING {_COLUMNS}",
            _run(job, period, shard))


def advance(job: str, period: str, shard: str, user_id: str,
            counts: Mapping[str, int], tokens: int = 0) -> Sql:
    """Move the cursor to ``user_id`` and add its counts (and the tokens its work sent
    to a model), in the user's transaction.

    Returns no row when the cursor is already at or past the user (another runner did
    it): the caller rolls the user's work back, so nothing is applied twice.
    """
    return (
        f"""UPDATE langmem_job_runs r SET cursor = %(user_id)s, users = r.users + 1,
            tokens = r.tokens + %(tokens)s,
            counts = (SELECT coalesce(jsonb_object_agg(k.key,
                          coalesce((r.counts ->> k.key)::bigint, 0)
                          + coalesce((%(counts)s::jsonb ->> k.key)::bigint, 0)), '{{}}')
                      FROM (SELECT jsonb_object_keys(r.counts) AS key
                            UNION SELECT jsonb_object_keys(%(counts)s::jsonb)) k)
        WHERE {_RUN} AND r.finished_at IS NULL
          AND (r.cursor IS NULL OR r.cursor < %(user_id)s)
        RETURNING r.cursor""",
        {**_run(job, period, shard), "user_id": user_id, "counts": json.dumps(dict(counts)),
         "tokens": tokens},
    )


def user_failed(job: str, period: str, shard: str, user_id: str, error: str) -> Sql:
    """Move the cursor past ``user_id``, whose work failed and was rolled back: count it
    as ``failed`` and keep its error (the first ``KEPT_FAILURES`` users').

    Returns no row when the cursor is already at or past the user (another runner).
    The kept errors are counted and added with IMMUTABLE functions (Citus refuses
    other functions, and subqueries, in the CASE of an update).
    """
    return (
        f"""UPDATE langmem_job_runs r SET cursor = %(user_id)s,
            counts = jsonb_set(r.counts, '{{failed}}',
                               to_jsonb(coalesce((r.counts ->> 'failed')::bigint, 0) + 1)),
            failures = r.failures || CASE
                WHEN jsonb_array_length(jsonb_path_query_array(r.failures, '$.keyvalue()'))
                     < %(kept)s
                THEN jsonb_object(ARRAY[%(user_id)s::text, %(error)s::text])
                ELSE '{{}}'::jsonb END
        WHERE {_RUN} AND r.finished_at IS NULL
          AND (r.cursor IS NULL OR r.cursor < %(user_id)s)
        RETURNING r.cursor""",
        {**_run(job, period, shard), "user_id": user_id, "error": error,
         "kept": KEPT_FAILURES},
    )


def finish(job: str, period: str, shard: str, *, at: datetime,
           counts: Mapping[str, int] | None = None, error: str | None = None) -> Sql:
    """Mark the run finished ``at``; ``counts`` replaces the row's (whole-store jobs)."""
    return (
        f"""UPDATE langmem_job_runs SET finished_at = %(at)s, error = %(error)s,
            counts = coalesce(%(counts)s::jsonb, counts)
        WHERE {_RUN} RETURNING {_COLUMNS}""",
        {**_run(job, period, shard), "error": error, "at": at,
         "counts": None if counts is None else json.dumps(dict(counts))},
    )


def fail(job: str, period: str, shard: str, error: str) -> Sql:
    """Record why an unfinished run stopped; its cursor stays for the resume."""
    return (f"UPDATE langmem_job_runs SET error = %(error)s WHERE {_RUN}",
            {**_run(job, period, shard), "error": error})


def last_runs() -> Sql:
    """The latest started run of each job."""
    return (
        f"""SELECT DISTINCT ON (job) {_COLUMNS} FROM langmem_job_runs
        ORDER BY job, started_at DESC""",
        {},
    )


def last_successes() -> Sql:
    """Each job's latest finished run without an error: when it finished and how long it
    took, in seconds (an operator's metrics)."""
    return (
        """SELECT DISTINCT ON (job) job,
               extract(epoch FROM finished_at) AS finished,
               extract(epoch FROM finished_at - started_at) AS seconds
        FROM langmem_job_runs WHERE finished_at IS NOT NULL AND error IS NULL
        ORDER BY job, finished_at DESC""",
        {},
    )
