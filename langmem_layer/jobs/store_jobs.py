"""Store-level jobs: one call to a ``PostgresMemoryStore`` maintenance method."""

from __future__ import annotations

from datetime import datetime

from langmem_layer.jobs.registry import JobContext, JobOption, JobResult, register

__all__: list[str] = []


@register(
    "index-large-users",
    "give every user with many vectors an HNSW and a full-text index of their own",
    schedule="daily",
    # The per-user index is built for the store's embedding model and dimensions.
    needs_embeddings=True,
    options=(JobOption("threshold", int,
                       "vectors a user needs to get an index (default: the store's, 5000)"),),
)
def index_large_users(ctx: JobContext, *, now: datetime | None = None,
                      threshold: int | None = None) -> JobResult:
    """``store.index_large_users``; ``now`` is not used (indexes are not time-bound)."""
    # Without a threshold the store's own default applies: one number, kept there.
    users = (ctx.store.index_large_users() if threshold is None
             else ctx.store.index_large_users(threshold=threshold))
    return JobResult("index-large-users", {"indexed": len(users)},
                     "indexed {indexed} large users", detail=users)


@register("sweep-ttl", "delete items whose TTL has passed", schedule="daily")
def sweep_ttl(ctx: JobContext, *, now: datetime | None = None) -> JobResult:
    """``store.sweep_ttl``."""
    deleted = ctx.store.sweep_ttl(now=now)
    return JobResult("sweep-ttl", {"deleted": deleted}, "deleted {deleted} expired items")


@register("purge-embedding-cache", "delete cached embeddings over 30 days old",
          schedule="weekly")
def purge_embedding_cache(ctx: JobContext, *, now: datetime | None = None) -> JobResult:
    """``store.purge_embedding_cache``."""
    deleted = ctx.store.purge_embedding_cache(now=now)
    return JobResult("purge-embedding-cache", {"deleted": deleted},
                     "deleted {deleted} stale cached embeddings")
