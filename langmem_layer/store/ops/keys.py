"""Store operations of the HTTP app's API keys; handled by
``langmem_layer.store.handlers.keys``, used through ``langmem_layer.server.keys``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

__all__ = ["ApiKey", "CreateKeyOp", "DeleteKeyOp", "FindKeyOp", "ListKeysOp"]


class CreateKeyOp(NamedTuple):
    """Store a key's hash for a user (result: None)."""

    user_id: str
    key_hash: str
    key_id: str
    admin: bool
    now: datetime | None = None


class FindKeyOp(NamedTuple):
    """Look up a user's key by hash (result: ``(key_hash, admin)``, or None)."""

    user_id: str
    key_hash: str


class DeleteKeyOp(NamedTuple):
    """Delete a user's key by hash (result: whether there was one)."""

    user_id: str
    key_hash: str


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
