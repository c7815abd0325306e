"""The store's housekeeping ops, in one place: the TTL sweep, the embedding cache's
purge, and the per-user ANN indexes of large users; with their handlers.

The sweeps span users: they list the users with work (ids only) under the
maintenance bypass, then bind each user's statements to that user. An index is built
as the tables' owner. Their SQL stays in the ``sql`` room (``items``, ``cache``,
``vector``), beside the other statements on those tables, which the ``sql`` room's
own builders share. The jobs that run them are ``langmem_layer.store.maintenance``'s.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from langmem_layer.errors import ConfigurationError
from langmem_layer.sql import cache as csql
from langmem_layer.sql import generic_items as isql
from langmem_layer.sql import vector as vsql
from langmem_layer.store.embedding.work import CACHE_TTL
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.ops.links import delete_links_of
from langmem_layer.store.options import hnsw_params
from langmem_layer.store.plan import Binding, Handler, Query

__all__ = [
    "IndexUserOp",
    "LargeUsersOp",
    "PurgeEmbeddingCacheOp",
    "SweepExpiredOp",
]


# -- handlers -----------------------------------------------------------------------------


def _sweep(ctx: Context, op: SweepExpiredOp) -> Handler:
    now = op.now or ctx.now()
    users = yield Query(*isql.expired_users(now))
    total = 0
    for row in users:
        user = Binding(row["user_id"])
        deleted = yield Query(*isql.sweep_expired(row["user_id"], now), bind=user)
        memories = [r["key"] for r in deleted if r["is_memory"]]
        if memories:
            yield Query(*delete_links_of(row["user_id"], memories), bind=user)
        total += len(deleted)
    return total


def _purge_cache(ctx: Context, op: PurgeEmbeddingCacheOp) -> Handler:
    before = (op.now or ctx.now()) - CACHE_TTL
    users = yield Query(*csql.stale_cache_users(before))
    total = 0
    for row in users:
        deleted = yield Query(*csql.purge_embedding_cache_sql(row["user_id"], before),
                              bind=Binding(row["user_id"]))
        total += int(deleted[0]["deleted"])
    return total


def _large_users(ctx: Context, op: LargeUsersOp) -> Handler:
    rows = yield Query(*vsql.large_users(ctx.model_id or "", op.threshold,
                                         ctx.vector_type))
    return [(r["user_id"], r["vectors"]) for r in rows]


def _index_user(ctx: Context, op: IndexUserOp) -> Handler:
    if not ctx.model_id or not ctx.dims:
        raise ConfigurationError("index_user needs a store with an embedding index")
    m, efc = hnsw_params(ctx.index_config)
    vtype = ctx.vector_type
    yield Query(*vsql.create_user_index(op.user_id, ctx.model_id, ctx.dims,
                                        m=m, ef_construction=efc, vector_type=vtype))
    yield Query(*vsql.create_user_keyword_index(op.user_id, ctx.model_id, vtype))
    yield Query(*vsql.record_user_index(op.user_id, ctx.model_id, ctx.dims,
                                        op.now or ctx.now(), vtype))
    ctx.index_seen(op.user_id, ctx.dims)


# -- ops ----------------------------------------------------------------------------------


@operation(_purge_cache, maintenance=True)
class PurgeEmbeddingCacheOp(NamedTuple):
    """Delete embedding-cache entries too old to be used, user by user (result: int)."""

    now: datetime | None = None


@operation(_large_users, maintenance=True)
class LargeUsersOp(NamedTuple):
    """Users with at least ``threshold`` vectors and no ANN index (result: [(user, n)])."""

    threshold: int


@operation(_index_user, owner=True)
class IndexUserOp(NamedTuple):
    """Build one user's HNSW index over their vectors (result: None)."""

    user_id: str
    now: datetime | None = None


@operation(_sweep, maintenance=True)
class SweepExpiredOp(NamedTuple):
    """Delete items whose TTL or expiry has passed, user by user (result: int deleted)."""

    now: datetime | None = None
