"""The HTTP app's API keys, in one place: their ops, SQL and handlers; used through
``langmem_layer.server.keys``.

Builders return ``(sql, params)`` and do no I/O. A key row holds the SHA-256 of its
token, never the token; every statement binds ``user_id`` by equality, which the
token itself names, so a key is found without reading any other user's rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from langmem_layer.sql import Sql
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.plan import Handler, Query

__all__ = ["ApiKey", "CreateKeyOp", "DeleteKeyOp", "FindKeyOp", "ListKeysOp", "delete_key",
           "find_key", "insert_key", "list_keys"]


# -- SQL ----------------------------------------------------------------------------------


def insert_key(user_id: str, key_hash: str, key_id: str, admin: bool, now: datetime) -> Sql:
    """Store a new key (its hash, short id and role)."""
    return (
        """INSERT INTO langmem_api_keys (user_id, key_hash, key_id, admin, created_at)
        VALUES (%(user_id)s, %(key_hash)s, %(key_id)s, %(admin)s, %(now)s)""",
        {"user_id": user_id, "key_hash": key_hash, "key_id": key_id, "admin": admin,
         "now": now},
    )


def find_key(user_id: str, key_hash: str) -> Sql:
    """The user's key with this hash: rows of ``key_hash``, ``admin`` (none: no such key)."""
    return (
        """SELECT key_hash, admin FROM langmem_api_keys
        WHERE user_id = %(user_id)s AND key_hash = %(key_hash)s""",
        {"user_id": user_id, "key_hash": key_hash},
    )


def delete_key(user_id: str, key_hash: str) -> Sql:
    """Delete the user's key with this hash; returns its row when there was one."""
    return (
        """DELETE FROM langmem_api_keys WHERE user_id = %(user_id)s AND key_hash = %(key_hash)s
        RETURNING key_id""",
        {"user_id": user_id, "key_hash": key_hash},
    )


def list_keys(user_id: str) -> Sql:
    """The user's keys, oldest first: ``key_id``, ``admin``, ``created_at`` (no hashes)."""
    return (
        """SELECT key_id, admin, created_at FROM langmem_api_keys
        WHERE user_id = %(user_id)s ORDER BY created_at, key_id""",
        {"user_id": user_id},
    )


# -- handlers -----------------------------------------------------------------------------


def _create_key(ctx: Context, op: CreateKeyOp) -> Handler:
    yield Query(*insert_key(op.user_id, op.key_hash, op.key_id, op.admin,
                            op.now or ctx.now()))


def _find_key(ctx: Context, op: FindKeyOp) -> Handler:
    rows = yield Query(*find_key(op.user_id, op.key_hash))
    return (rows[0]["key_hash"], bool(rows[0]["admin"])) if rows else None


def _delete_key(ctx: Context, op: DeleteKeyOp) -> Handler:
    rows = yield Query(*delete_key(op.user_id, op.key_hash))
    return bool(rows)


def _list_keys(ctx: Context, op: ListKeysOp) -> Handler:
    rows = yield Query(*list_keys(op.user_id))
    return [ApiKey(r["key_id"], bool(r["admin"]), r["created_at"]) for r in rows]


# -- ops ----------------------------------------------------------------------------------


@operation(_create_key)
class CreateKeyOp(NamedTuple):
    """Store a key's hash for a user (result: None)."""

    user_id: str
    key_hash: str
    key_id: str
    admin: bool
    now: datetime | None = None


@operation(_find_key)
class FindKeyOp(NamedTuple):
    """Look up a user's key by hash (result: ``(key_hash, admin)``, or None)."""

    user_id: str
    key_hash: str


@operation(_delete_key)
class DeleteKeyOp(NamedTuple):
    """Delete a user's key by hash (result: whether there was one)."""

    user_id: str
    key_hash: str


@operation(_list_keys)
class ListKeysOp(NamedTuple):
    """A user's keys, oldest first (result: ``list[ApiKey]``)."""

    user_id: str


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored key as listed: never its token or hash.

    Attributes:
        key_id: A short public id of the key (the first characters of its hash).
        admin: Whether the key acts as an admin.
        created_at: When it was created.
    """

    key_id: str
    admin: bool
    created_at: datetime
