"""API keys bound to a user, for the HTTP app and any other front door.

A key is a token of the form ``lmk_<user>_<secret>``: ``<user>`` is the user id in
unpadded URL-safe base64, ``<secret>`` 64 hex digits (256 random bits). Only the
SHA-256 of the whole token is stored (``langmem_api_keys``), so the database never
holds a usable key; the token is returned once, by ``create_key``. Because the
token names its user, verifying it reads only that user's rows (``user_id = %(user_id)s
AND key_hash = %(key_hash)s``), like every other statement of the library.

Each function takes a store (``PostgresMemoryStore``); the
``a``-prefixed twins take the async store. Both build the same op and differ only in
how the batch runs.

Example:
    >>> token = create_key(store, "alice")          # doctest: +SKIP
    >>> verify_key(store, token)                    # doctest: +SKIP
    Principal(user_id='alice', admin=False)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langmem_layer.errors import MissingUserError
from langmem_layer.flow import require_user
from langmem_layer.store.ops import api_keys as kops
from langmem_layer.store.ops.api_keys import ApiKey

__all__ = [
    "ApiKey",
    "Principal",
    "acreate_key",
    "alist_keys",
    "arevoke_key",
    "averify_key",
    "create_key",
    "list_keys",
    "revoke_key",
    "token_user",
    "verify_key",
]

PREFIX = "lmk_"
_SECRET_BYTES = 32
_KEY_ID_CHARS = 12
#: Longest token accepted. The token carries its user id, and the library takes user
#: ids of any length: the bound must let every key ``create_key`` hands out verify
#: (a 1,000-character id of 3-byte characters makes a 4,069-character token), while
#: staying well inside an HTTP server's header limit (16 KB for uvicorn's h11).
MAX_TOKEN_CHARS = 8192


@dataclass(frozen=True)
class Principal:
    """Who a request acts as.

    Attributes:
        user_id: The user whose memory the request reads and changes.
        admin: Whether the caller may act on other users' memory.
    """

    user_id: str
    admin: bool = False


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_token(user_id: str) -> str:
    user = base64.urlsafe_b64encode(user_id.encode("utf-8")).decode("ascii").rstrip("=")
    return f"{PREFIX}{user}_{secrets.token_hex(_SECRET_BYTES)}"


def token_user(token: Any) -> str | None:
    """The user a token names, or None when it is not a well-formed key.

    Well-formed is not valid: only ``verify_key`` says whether the key exists.
    """
    if not isinstance(token, str) or not token.startswith(PREFIX) or len(token) > MAX_TOKEN_CHARS:
        return None
    user, sep, secret = token[len(PREFIX):].rpartition("_")
    if not sep or not user or len(secret) != 2 * _SECRET_BYTES:
        return None
    if any(c not in "0123456789abcdef" for c in secret):
        return None
    try:
        user_id = base64.urlsafe_b64decode(user + "=" * (-len(user) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    try:
        return require_user(user_id)
    except ValueError:
        return None


def _create_op(user_id: str, admin: bool, now: datetime | None) -> tuple[str, kops.CreateKeyOp]:
    token = _new_token(require_user(user_id))
    if len(token) > MAX_TOKEN_CHARS:
        # Refused here rather than handed out: a key that can never verify is lost.
        raise MissingUserError(
            f"user_id of {len(user_id.encode('utf-8'))} bytes is too long for an API key "
            f"(the key carries it and may be at most {MAX_TOKEN_CHARS} characters): "
            f"key such users by a shorter id, e.g. a hash of it.")
    digest = _hash(token)
    return token, kops.CreateKeyOp(user_id, digest, digest[:_KEY_ID_CHARS], bool(admin), now)


def _find_op(token: Any) -> kops.FindKeyOp | None:
    user_id = token_user(token)
    return None if user_id is None else kops.FindKeyOp(user_id, _hash(token))


def _principal(op: kops.FindKeyOp, found: tuple[str, bool] | None) -> Principal | None:
    # The row was found by hash equality; compare again in constant time so the
    # decision itself never depends on how many characters matched.
    if found is None or not hmac.compare_digest(found[0], op.key_hash):
        return None
    return Principal(op.user_id, admin=found[1])


def _delete_op(token: Any) -> kops.DeleteKeyOp | None:
    find = _find_op(token)
    return None if find is None else kops.DeleteKeyOp(find.user_id, find.key_hash)


def create_key(store: Any, user_id: str, *, admin: bool = False,
               now: datetime | None = None) -> str:
    """Create an API key for ``user_id``; returns its token, which is not stored.

    Args:
        store: A ``PostgresMemoryStore`` (after ``setup()``).
        user_id: The user the key acts as.
        admin: Whether the key may act on other users' memory.
        now: The creation time (default: the store's clock).

    Raises:
        MissingUserError: ``user_id`` is missing, blank, contains a dot, or is too
            long to fit in a key (over about 6,000 bytes in UTF-8).
    """
    token, op = _create_op(user_id, admin, now)
    store.batch([op])
    return token


async def acreate_key(store: Any, user_id: str, *, admin: bool = False,
                      now: datetime | None = None) -> str:
    """Async twin of ``create_key`` (``store``: the async store)."""
    token, op = _create_op(user_id, admin, now)
    await store.abatch([op])
    return token


def verify_key(store: Any, token: Any) -> Principal | None:
    """The principal a token acts as, or None when it is malformed, unknown or revoked."""
    op = _find_op(token)
    return None if op is None else _principal(op, store.batch([op])[0])


async def averify_key(store: Any, token: Any) -> Principal | None:
    """Async twin of ``verify_key`` (``store``: the async store)."""
    op = _find_op(token)
    return None if op is None else _principal(op, (await store.abatch([op]))[0])


def revoke_key(store: Any, token: str) -> bool:
    """Delete a key; returns whether it existed (a malformed token never does)."""
    op = _delete_op(token)
    return False if op is None else bool(store.batch([op])[0])


async def arevoke_key(store: Any, token: str) -> bool:
    """Async twin of ``revoke_key`` (``store``: the async store)."""
    op = _delete_op(token)
    return False if op is None else bool((await store.abatch([op]))[0])


def list_keys(store: Any, user_id: str) -> list[ApiKey]:
    """A user's keys, oldest first: short id, role and creation time (no secrets)."""
    return list(store.batch([kops.ListKeysOp(require_user(user_id))])[0])


async def alist_keys(store: Any, user_id: str) -> list[ApiKey]:
    """Async twin of ``list_keys`` (``store``: the async store)."""
    return list((await store.abatch([kops.ListKeysOp(require_user(user_id))]))[0])
