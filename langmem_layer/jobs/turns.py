"""A user's turn in a per-user job's run: its outcomes checked, the run's cursor moved
past it, its failure recorded; and what the runners share (settings, progress bar).

Used by ``langmem_layer.jobs.runs`` (one user per transaction) and
``langmem_layer.jobs.batching`` (users prepared a chunk at a time); it imports
neither.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import psycopg

from langmem_layer.errors import (
    ConcurrencyError,
    ConfigurationError,
    DatabaseUnavailableError,
    PoolTimeoutError,
    SchemaNotReadyError,
)
from langmem_layer.jobs.registry import Job, JobContext, _execute
from langmem_layer.settings import MemorySettings
from langmem_layer.sql import jobs as sql

__all__ = ["FAILED", "STOPS_THE_RUN", "TOKENS", "advance", "counts_of", "progress_bar",
           "run_settings", "user_failed"]

logger = logging.getLogger("langmem_layer.jobs")

#: The outcome a per-user job reports tokens sent to a chat model under; the runner
#: sums it into the run's ``tokens`` column instead of its counts.
TOKENS = "tokens"
#: The outcome counting users whose part failed.
FAILED = "failed"
#: Errors that stop a whole run rather than one user's part of it: the database is
#: gone or busy, another runner took the period, the job itself is misconfigured.
STOPS_THE_RUN = (ConcurrencyError, ConfigurationError, DatabaseUnavailableError,
                 PoolTimeoutError, SchemaNotReadyError, psycopg.OperationalError,
                 psycopg.InterfaceError)
#: Characters of a user's error kept in the run's row.
_ERROR_CHARS = 500


def run_settings(ctx: JobContext) -> MemorySettings:
    """The context's settings, else those of the environment."""
    if ctx.settings is not None:
        return ctx.settings
    from langmem_layer.environment import settings_from_env

    return settings_from_env()


def counts_of(raw: Any, job: Job, user_id: str) -> dict[str, int]:
    """A per-user job's result checked to be outcome -> count.

    Raises:
        ConfigurationError: It is not.
    """
    if not isinstance(raw, Mapping) or not all(
            isinstance(k, str) and isinstance(v, int) for k, v in raw.items()):
        raise ConfigurationError(
            f"Per-user job {job.name} must return a dict of outcome -> int for user "
            f"{user_id!r}; got {raw!r}.")
    return dict(raw)


def progress_bar(total: int, job: str, enabled: bool, out: TextIO | None) -> Any:
    """A progress bar over a run's users (shown only on a terminal)."""
    from tqdm import tqdm

    # disable=None: a bar only on a terminal, so logs and pipes stay clean.
    return tqdm(total=total, desc=job, unit="user", file=out or sys.stderr,
                disable=None if enabled else True, leave=False)


def advance(conn: psycopg.Connection[Any], job: Job, record: tuple[str, str, str],
            user_id: str, counts: Mapping[str, int], tokens: int) -> None:
    """Move the run's cursor to ``user_id`` in the user's transaction.

    Raises:
        ConcurrencyError: Another runner already did the user (the transaction rolls
            back, so nothing is applied twice).
    """
    if not _execute(conn, *sql.advance(*record, user_id, counts, tokens)):
        raise ConcurrencyError(
            f"Job {job.name}: user {user_id!r} was already done for "
            f"{record[1]} (shard {record[2]}) by another runner; nothing "
            "was applied twice. Run again to continue after it.")


def user_failed(conn: psycopg.Connection[Any], job: Job, user_id: str, error: Exception,
                record: tuple[str, str, str] | None) -> None:
    """Log a user's failure and, in a recorded run, move past the user keeping its error."""
    text = f"{type(error).__name__}: {error}"[:_ERROR_CHARS]
    logger.warning("job %s failed for user %r (the run goes on): %s", job.name, user_id, text)
    if record is not None:
        with conn.transaction():
            if not _execute(conn, *sql.user_failed(*record, user_id, text)):
                raise ConcurrencyError(
                    f"Job {job.name}: user {user_id!r} was already done for {record[1]} "
                    f"(shard {record[2]}) by another runner. Run again to continue after it.")
