"""Schema migrations: an append-only list whose index is the version (the base schema in
``ddl_schema``, then ``ddl_features``, where
new migrations are appended).

Each entry is idempotent DDL (``IF NOT EXISTS`` throughout), so running ``setup()``
again after the version table was dropped succeeds and changes nothing. Never edit
or reorder an entry that has shipped; append a new one.

The runner's own statements (``create_version_table``, ``lock_setup``,
``applied_versions``, ``record_version``) return ``(sql, params)`` like the
other modules of ``langmem_layer.sql``; the store steps them in one transaction.

Every table carries ``user_id`` and leads its keys with it: each statement on them
filters by the user, which keeps memory isolated and keeps each query routable to
one shard of a distributed PostgreSQL (e.g. Citus, distributing on ``user_id``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from langmem_layer.sql import Ddl, Sql
from langmem_layer.sql.ddl_features import FEATURES
from langmem_layer.sql.ddl_schema import SCHEMA, VERSION_TABLE

__all__ = [
    "LOCK_TIMEOUT",
    "MIGRATIONS",
    "VERSION_TABLE",
    "OnlineIndex",
    "applied_versions",
    "create_version_table",
    "drop_invalid_index",
    "index_state",
    "lock_setup",
    "migration",
    "online_indexes",
    "record_version",
    "set_lock_timeout",
]


#: Key of the advisory lock that serialises concurrent ``setup()`` calls.
SETUP_LOCK = "langmem_layer.setup"

MIGRATIONS: list[str] = [*SCHEMA, *FEATURES]


def create_version_table() -> Ddl:
    """Migration 0 (pgvector and the version table), run before anything is read."""
    return MIGRATIONS[0], None


def lock_setup() -> Sql:
    """Wait for any other ``setup()`` to commit; held until this transaction ends."""
    return "SELECT pg_advisory_xact_lock(hashtext(%(lock)s))", {"lock": SETUP_LOCK}


def applied_versions() -> Sql:
    """The versions already applied, as rows of ``v``."""
    return f"SELECT v FROM {VERSION_TABLE}", {}


def migration(version: int) -> Ddl:
    """The DDL of migration ``version``."""
    return MIGRATIONS[version], None


def record_version(version: int) -> Sql:
    """Record ``version`` as applied (a concurrent setup may have recorded it too)."""
    return (f"INSERT INTO {VERSION_TABLE} (v) VALUES (%(version)s) ON CONFLICT DO NOTHING",
            {"version": version})


#: How long a migration's statement waits for a table's lock before the migration
#: gives up and is tried again (``setup()``): a DDL statement queued behind a long
#: query would otherwise block every statement queued behind it.
LOCK_TIMEOUT = "1s"


def set_lock_timeout() -> Sql:
    """Bound the lock waits of the rest of the transaction by ``LOCK_TIMEOUT``."""
    return "SELECT set_config('lock_timeout', %(t)s, true)", {"t": LOCK_TIMEOUT}


class OnlineIndex(NamedTuple):
    """An index a migration creates, built beforehand without blocking writes."""

    name: str
    table: str
    concurrently: str  # the CREATE INDEX CONCURRENTLY IF NOT EXISTS statement


_CREATE_INDEX = re.compile(
    r"^\s*CREATE\s+(UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+ON\s+(\w+)\b(.*)$",
    re.IGNORECASE | re.DOTALL)


def _statements(ddl: str) -> list[str]:
    """``ddl``'s top-level statements: split on ``;`` outside quotes and dollar quotes
    (function bodies and DO blocks stay whole)."""
    out, start, i, quote = [], 0, 0, None
    while i < len(ddl):
        if quote is not None:
            if ddl.startswith(quote, i):
                i += len(quote)
                quote = None
                continue
        elif ddl[i] == "'":
            quote = "'"
        elif ddl[i] == "$" and (m := re.match(r"\$\w*\$", ddl[i:])):
            quote = m.group(0)
            i += len(quote)
            continue
        elif ddl.startswith("--", i):
            i = ddl.find("\n", i) if ddl.find("\n", i) != -1 else len(ddl)
            continue
        elif ddl[i] == ";":
            out.append(ddl[start:i])
            start = i + 1
        i += 1
    out.append(ddl[start:])
    return [s.strip() for s in out if s.strip()]


def online_indexes(version: int) -> list[OnlineIndex]:
    """The indexes migration ``version`` creates, each as a ``CREATE INDEX CONCURRENTLY``
    statement: ``setup()`` builds those on tables that already exist before it runs the
    migration, whose own ``CREATE INDEX IF NOT EXISTS`` then finds them (an index build
    in the migration's transaction would block the table's writes until it commits)."""
    found = []
    for statement in _statements(MIGRATIONS[version]):
        if (m := _CREATE_INDEX.match(statement)) is not None:
            unique, name, table, rest = m.groups()
            found.append(OnlineIndex(name, table, (
                f"CREATE {'UNIQUE ' if unique else ''}INDEX CONCURRENTLY IF NOT EXISTS "
                f"{name} ON {table}{rest}")))
    return found


def index_state(index: OnlineIndex) -> Sql:
    """Whether ``index``'s table exists, and whether the index exists and is valid (a
    concurrent build that failed leaves an invalid one behind)."""
    return ("SELECT to_regclass(%(table)s) IS NOT NULL AS has_table, "
            "(SELECT i.indisvalid FROM pg_index i "
            " WHERE i.indexrelid = to_regclass(%(index)s)) AS valid",
            {"table": index.table, "index": index.name})


def drop_invalid_index(index: OnlineIndex) -> str:
    """Drop the invalid leftover of a failed concurrent build (the name is the
    migration's own, never a caller's)."""
    return f"DROP INDEX CONCURRENTLY IF EXISTS {index.name}"
