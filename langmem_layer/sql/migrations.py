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
    "index_functions",
    "index_state",
    "lock_setup",
    "migration",
    "migration_statements",
    "online_indexes",
    "record_version",
    "set_lock_timeout",
    "split_statements",
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


def split_statements(text: str) -> list[str]:
    """``text``'s SQL statements, one per item, without the comments between them.

    Splits at the semicolons outside quotes ('...', "..."), dollar quotes (``$fn$``,
    ``$$``) and comments (``--``, nested ``/* */``).
    """
    out: list[str] = []
    start = i = 0
    n = len(text)
    dollar = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")
    while i < n:
        ch = text[i]
        if ch == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif ch == "/" and text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif ch in "'\"":
            i += 1
            while i < n:
                if text[i] == ch:
                    if text.startswith(ch * 2, i):  # a doubled quote inside
                        i += 2
                        continue
                    break
                i += 1
            i += 1
        elif ch == "$" and (m := dollar.match(text, i)) and not (
                i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(m.group(0), m.end())
            i = n if end < 0 else end + len(m.group(0))
        elif ch == ";":
            out.append(text[start:i])
            start = i = i + 1
        else:
            i += 1
    out.append(text[start:])
    return [s.strip() for s in out if _code(s)]


def _code(statement: str) -> bool:
    """Whether ``statement`` holds more than whitespace and comments."""
    return bool(re.sub(r"--[^\n]*|/\*.*?\*/", "", statement, flags=re.DOTALL).strip())


def migration_statements(version: int) -> list[Ddl]:
    """The statements of migration ``version``, each sent on its own.

    One command per statement: Citus sends a command on a distributed table to its
    workers with the statement's text, and refuses a text of several commands
    ('cannot insert multiple commands into a prepared statement'); a migration run
    again on tables already distributed (after the version table was lost) or a new
    migration on a cluster sends its commands one by one, in the migration's transaction.
    """
    return [(s, None) for s in split_statements(MIGRATIONS[version])]


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


_CREATE_INDEX = re.compile(  # after the comment lines split_statements leaves before it
    r"^(?:\s*--[^\n]*\n)*\s*CREATE\s+(UNIQUE\s+)?INDEX\s+IF\s+NOT\s+EXISTS\s+(\w+)\s+ON\s+(\w+)\b(.*)$",
    re.IGNORECASE | re.DOTALL)


def online_indexes(version: int) -> list[OnlineIndex]:
    """The indexes migration ``version`` creates, each as a ``CREATE INDEX CONCURRENTLY``
    statement: ``setup()`` builds those on tables that already exist before it runs the
    migration, whose own ``CREATE INDEX IF NOT EXISTS`` then finds them (an index build
    in the migration's transaction would block the table's writes until it commits)."""
    found = []
    for statement in split_statements(MIGRATIONS[version]):
        if (m := _CREATE_INDEX.match(statement)) is not None:
            unique, name, table, rest = m.groups()
            found.append(OnlineIndex(name, table, (
                f"CREATE {'UNIQUE ' if unique else ''}INDEX CONCURRENTLY IF NOT EXISTS "
                f"{name} ON {table}{rest}")))
    return found


_CREATE_FUNCTION = re.compile(
    r"^(?:\s*--[^\n]*\n)*\s*CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+(\w+)\s*\(",
    re.IGNORECASE)


def index_functions(version: int) -> list[str]:
    """The functions migration ``version`` creates that its online indexes use (an
    expression index over a function of the migration's own): created first, so the
    index can be built concurrently too. ``CREATE OR REPLACE``, no table's lock."""
    indexes = " ".join(i.concurrently for i in online_indexes(version))
    return [statement for statement in split_statements(MIGRATIONS[version])
            if (m := _CREATE_FUNCTION.match(statement)) is not None
            and re.search(rf"\b{m.group(1)}\s*\(", indexes)]


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
