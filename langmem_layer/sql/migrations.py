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

from langmem_layer.sql import Ddl, Sql
from langmem_layer.sql.ddl_features import FEATURES
from langmem_layer.sql.ddl_schema import SCHEMA, VERSION_TABLE

__all__ = [
    "MIGRATIONS",
    "VERSION_TABLE",
    "applied_versions",
    "create_version_table",
    "lock_setup",
    "migration",
    "record_version",
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
