"""SQL for the HTTP app's API keys (``langmem_layer.server.keys``).

Builders return ``(sql, params)`` and do no I/O. A key row holds the SHA-256 of its
token, never the token; every statement binds ``user_id`` by equality, which the
token itself names, so a key is found without reading any other user's rows.
"""

from __future__ import annotations

from datetime import datetime

from langmem_layer.sql import Sql

__all__ = ["delete_key", "find_key", "insert_key", "list_keys"]


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
