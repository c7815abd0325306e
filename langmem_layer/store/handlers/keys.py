"""Handlers of the API key ops (``langmem_layer.store.ops.keys``).

Mixed into ``StoreCore``; like every handler they are
generators that yield requests and never do I/O themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from langmem_layer.sql import keys as ksql
from langmem_layer.store.handlers.registry import Registry, handles
from langmem_layer.store.ops import keys as kops
from langmem_layer.store.plan import Handler, Query

__all__ = ["KeyHandlers"]


class KeyHandlers(Registry):
    """Create, find, delete and list API keys; expects ``now()`` from the core."""

    now: Callable[[], datetime]

    @handles(kops.CreateKeyOp)
    def _create_key(self, op: kops.CreateKeyOp) -> Handler:
        yield Query(*ksql.insert_key(op.user_id, op.key_hash, op.key_id, op.admin,
                                     op.now or self.now()))

    @handles(kops.FindKeyOp)
    def _find_key(self, op: kops.FindKeyOp) -> Handler:
        rows = yield Query(*ksql.find_key(op.user_id, op.key_hash))
        return (rows[0]["key_hash"], bool(rows[0]["admin"])) if rows else None

    @handles(kops.DeleteKeyOp)
    def _delete_key(self, op: kops.DeleteKeyOp) -> Handler:
        rows = yield Query(*ksql.delete_key(op.user_id, op.key_hash))
        return bool(rows)

    @handles(kops.ListKeysOp)
    def _list_keys(self, op: kops.ListKeysOp) -> Handler:
        rows = yield Query(*ksql.list_keys(op.user_id))
        return [kops.ApiKey(r["key_id"], bool(r["admin"]), r["created_at"]) for r in rows]
