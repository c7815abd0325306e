"""Erasing a user, in one place: the op, its SQL and its handler.

``DeleteUserOp`` deletes every row the user has in every per-user table, and drops
the user's own ANN indexes, in one transaction. The list of per-user tables,
``USER_TABLES``, stays in ``langmem_layer.sql.users``: the ``sql`` room itself
(``sql/citus.py``) and the backups read it, and may not import from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from psycopg import sql

from langmem_layer.sql import Sql
from langmem_layer.sql.users import KEYS_TABLE, USER_TABLES
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.plan import Handler, Query

__all__ = ["DeleteUserOp", "UserDeletion", "delete_user_rows", "drop_index",
           "user_index_names"]


# -- SQL: builders return ``(sql, params)`` and do no I/O; each binds ``user_id`` ----------


def delete_user_rows(table: str, user_id: str) -> Sql:
    """Delete the user's rows of one of ``USER_TABLES``; returns a ``deleted`` count.

    Raises:
        ValueError: ``table`` is not in ``USER_TABLES`` (table names are never
            taken from input).
    """
    if table not in USER_TABLES:
        raise ValueError(f"{table!r} is not a per-user table")
    return (
        f"""WITH gone AS (DELETE FROM {table} WHERE user_id = %(user_id)s RETURNING 1)
        SELECT count(*) AS deleted FROM gone""",
        {"user_id": user_id},
    )


def user_index_names(user_id: str) -> Sql:
    """The user's own ANN indexes (their predicates name the user, so they go too)."""
    return (
        """SELECT index_name FROM langmem_vector_indexes WHERE user_id = %(user_id)s
        ORDER BY index_name""",
        {"user_id": user_id},
    )


def drop_index(name: str) -> tuple[Any, None]:
    """Drop one index by name, if it exists (a statement without parameters)."""
    return sql.SQL("DROP INDEX IF EXISTS {name}").format(name=sql.Identifier(name)), None


# -- the handler --------------------------------------------------------------------------


def _delete_user(ctx: Context, op: DeleteUserOp) -> Handler:
    # The user's own ANN indexes name the user in their predicates: dropped too.
    rows = yield Query(*user_index_names(op.user_id))
    dropped = [r["index_name"] for r in rows]
    ctx.forget_index(op.user_id)
    for name in dropped:
        yield Query(*drop_index(name))
        yield Query(*drop_index(name + "_kw"))
    counts: dict[str, int] = {}
    for table in USER_TABLES:
        if op.keep_keys and table == KEYS_TABLE:
            continue
        (row,) = yield Query(*delete_user_rows(table, op.user_id))
        counts[table] = int(row["deleted"])
    return UserDeletion(op.user_id, counts, dropped)


# -- the op -------------------------------------------------------------------------------


@operation(_delete_user, owner=True)
class DeleteUserOp(NamedTuple):
    """Delete every row the user has, in every per-user table, in one transaction
    (result: ``UserDeletion``). ``keep_keys`` keeps the user's API keys: a reset
    of their memory that leaves their access as it was."""

    user_id: str
    keep_keys: bool = False


@dataclass(frozen=True, slots=True)
class UserDeletion:
    """What ``DeleteUserOp`` deleted: rows per table (tables with none included)."""

    user_id: str
    counts: dict[str, int]
    dropped_indexes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Rows deleted in all tables."""
        return sum(self.counts.values())
