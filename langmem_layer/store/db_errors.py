"""Database errors told apart by SQLSTATE, for both drivers.

psycopg raises one class per SQLSTATE, but what a caller can do about an error depends
on its class of SQLSTATE, not on the message: a transaction that lost a deadlock is
retried, bad input is the caller's to fix, a missing table means ``setup()`` was never
run, a lost connection means nothing of the batch was written.
"""

from __future__ import annotations

import random
import re
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from langmem_layer.errors import (
    ConcurrencyError,
    DatabaseUnavailableError,
    InvalidInputError,
    LangmemError,
    OperationAppliedError,
    PoolTimeoutError,
    SchemaNotReadyError,
)
from langmem_layer.sql.queue_statements import APPLIED_KEY

__all__ = [
    "TRANSACTION_ATTEMPTS",
    "concurrency_error",
    "retry_pause",
    "retryable",
    "translate",
]

#: Attempts per transaction that loses to a concurrent one (the first included).
TRANSACTION_ATTEMPTS = 3
#: Base pause before a transaction's retry; jittered, doubled per retry.
_RETRY_BASE = 0.05

_RETRYABLE = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
_SHUTDOWN = frozenset({"57P01", "57P02", "57P03"})  # admin/crash shutdown, cannot connect now
_INPUT_TOO_LARGE = "54"  # program_limit_exceeded: stack depth, row or statement too big
_INVALID_DATA = "22"  # data_exception: NUL bytes, bad encodings, values out of range
_UNDEFINED_TABLE = "42P01"
_UNIQUE_VIOLATION = "23505"
_UNDEFINED_FUNCTION = "42883"
#: A shard's copy of ``APPLIED_KEY`` on Citus: the constraint's name and the shard's id.
#: Citus passes a worker's error on without its constraint name (only the message
#: names it), and one raised under the coordinator's INSERT ... SELECT as XX000.
_APPLIED_ON_SHARD = re.compile(
    rf'duplicate key value violates unique constraint "{APPLIED_KEY}_\d+"')
#: What each data exception means for the caller; the hint names its own cause.
_DATA_HINT = "a value does not fit its column or type: check the value's type and size."
_NUL_HINT = "text may not contain NUL (\\x00) characters."
_DATA_HINTS = {
    "": _NUL_HINT,  # psycopg's own refusal of a NUL byte, before the server sees it
    "22021": _NUL_HINT,  # character_not_in_repertoire: a NUL or invalid UTF-8
    "22P05": _NUL_HINT,  # untranslatable_character: \u0000 in jsonb
    "22003": "a number is out of range (too large, too small, or underflowing to zero).",
    "22P02": "a value is malformed for its type (a number, UUID or JSON that does not parse).",
    "22007": "a date or time is malformed.",
    "22008": "a date or time is out of range.",
    "22001": "a text is longer than its column allows.",
}


#: Characters of the driver's message an error repeats: PostgreSQL quotes the value it
#: refused (a 3 MB message in "value is too big in tsquery: ..."), which no error of
#: ours may carry whole.
_SAID = 300


def _said(exc: BaseException) -> str:
    """The driver's message for ``exc``, cut to ``_SAID`` characters."""
    text = str(exc)
    return text if len(text) <= _SAID else f"{text[:_SAID]}… ({len(text):,} characters)"


def retryable(exc: BaseException) -> bool:
    """Whether re-running the whole transaction can succeed (deadlock, serialization)."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate in _RETRYABLE


def retry_pause(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): jittered so the losers of one
    deadlock do not collide again."""
    return _RETRY_BASE * 2 ** (attempt - 1) * (0.5 + random.random())


def concurrency_error(exc: BaseException, attempts: int) -> ConcurrencyError:
    """The error raised once a transaction lost ``attempts`` times."""
    sqlstate = getattr(exc, "sqlstate", None)
    return ConcurrencyError(
        f"The transaction lost to concurrent ones {attempts} times (SQLSTATE {sqlstate}: "
        f"{_said(exc)}); it was rolled back each time and nothing was written. Run the batch "
        "again, or write each user's data from one worker at a time."
    )


def _applied_before(exc: psycopg.Error, state: str) -> bool:
    """Whether ``exc`` is a strict ``mark_applied`` meeting an operation applied before."""
    if state == _UNIQUE_VIOLATION and exc.diag.constraint_name == APPLIED_KEY:
        return True
    return state in (_UNIQUE_VIOLATION, "XX000") and bool(
        _APPLIED_ON_SHARD.fullmatch(exc.diag.message_primary or ""))


def translate(exc: BaseException, *, pool: Any = None) -> BaseException:
    """The library error for a database error ``exc`` (``exc`` itself if none fits).

    Args:
        exc: What the driver caught.
        pool: The store's connection or pool; a pool's size and timeout go into the
            message of a pool timeout.

    Returns:
        A ``LangmemError`` to raise ``from exc``, or ``exc``
        unchanged for errors that are neither the caller's nor the server's (bugs).
    """
    if isinstance(exc, LangmemError):
        return exc
    if isinstance(exc, PoolTimeout):  # before OperationalError, which it subclasses
        size = getattr(pool, "max_size", "?")
        wait = getattr(pool, "timeout", None)
        waited = f"{wait:g} s" if isinstance(wait, int | float) else "its timeout"
        return PoolTimeoutError(
            f"No connection of the pool (max_size={size}) became free within {waited}: "
            "more calls ran at once than the pool has connections. Give the store a "
            "bigger pool (from_conn_string(..., pool_size=N)) or make fewer concurrent "
            f"calls. ({_said(exc)})"
        )
    if not isinstance(exc, psycopg.Error):
        return exc
    state = exc.sqlstate or ""
    if state in _RETRYABLE:
        return concurrency_error(exc, 1)
    if state.startswith(_INPUT_TOO_LARGE):
        return InvalidInputError(
            f"The input is too large for PostgreSQL (SQLSTATE {state}: {_said(exc)}); shorten "
            "the text or query, or split the value. Nothing was written."
        )
    # Client-side data errors (psycopg refusing a NUL byte in text) carry no SQLSTATE.
    if state.startswith(_INVALID_DATA) or (not state and isinstance(exc, psycopg.DataError)):
        return InvalidInputError(
            f"PostgreSQL refused the input as invalid (SQLSTATE {state or 'n/a'}: {_said(exc)}); "
            f"{_DATA_HINTS.get(state, _DATA_HINT)} Nothing was written."
        )
    if _applied_before(exc, state):
        return OperationAppliedError(
            f"An operation of the batch was applied before ({exc.diag.message_detail}); "
            "the batch was rolled back and nothing of it was written. Run it again with "
            "its operations under ApplyOnceOp, which skips what was applied."
        )
    if state == _UNDEFINED_FUNCTION and "langmem_" in (exc.diag.message_primary or ""):
        return SchemaNotReadyError(
            f"The store's schema is older than this version of langmem_layer ({_said(exc)}):"
            " call store.setup() (or run `langmem-layer setup`) to upgrade it."
        )
    if state == _UNDEFINED_TABLE:
        return SchemaNotReadyError(
            f"The store's tables do not exist in this database ({_said(exc)}): call "
            "store.setup() (or run `langmem-layer setup`) first."
        )
    if (
        state.startswith("08")
        or state in _SHUTDOWN
        or (not state and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError))
    ):
        return DatabaseUnavailableError(
            f"PostgreSQL went away; the batch was rolled back: {_said(exc)}"
        )
    return exc
