"""The ``context-vectors`` job: the context vectors that memories written into a thread
lack, made.

A memory written into a thread gets its context vector after its write's transaction
(``langmem_layer.write.new_memory.put_context_vectors``): memories written before
context vectors existed (migration 35) have none, nor has one whose vector was not kept
because the model failed or the process stopped between the two. This job finds them
(``missing_context_vectors``), reads each one's chain as the write path does
(``ContextBeforeOp``) and keeps the vectors in one store batch, which the runner embeds
with other users' (``defers_writes``, ``langmem_layer.jobs.batching``). A user whose
memories did not change since the job last ran for them is passed over.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langmem_layer.flow import require_user
from langmem_layer.jobs.evidence import namespace
from langmem_layer.jobs.registry import JobContext, JobOption, register
from langmem_layer.jobs.turns import run_settings
from langmem_layer.store import ops as mops
from langmem_layer.store.ops.context import missing_context_vectors
from langmem_layer.types import to_utc
from langmem_layer.write.new_memory import context_vector_ops

__all__ = ["context_vectors"]


@register(
    "context-vectors",
    "make the context vectors that memories written into a thread lack (written before "
    "they existed, or not kept after the write)",
    schedule="daily", per_user=True, needs_embeddings=True, defers_writes=True,
    # Nothing but a write makes a memory lack one.
    unchanged=lambda last_now, now, options: True,
    options=(JobOption("limit", int, "memories per user and run at most (default 5000)"),),
)
def context_vectors(ctx: JobContext, user_id: str, *, now: datetime, dry_run: bool = False,
                    limit: int = 5000) -> dict[str, int]:
    """Make ``user_id``'s missing context vectors, at most ``limit`` (oldest first).

    Args:
        ctx: The store to run against (with its embedding model).
        user_id: The tenant.
        now: The time the vectors are stamped with.
        dry_run: Count what is missing; embed and write nothing.
        limit: Memories taken in this run; the next run takes the rest.

    Returns:
        ``missing`` (memories found without one), ``made`` (vectors written; 0 in a dry
        run or with ``context_turns=0``).
    """
    user_id = require_user(user_id)
    now = to_utc(now)
    turns = run_settings(ctx).context_turns
    model_id = ctx.store.model_id
    if not model_id or turns < 1:
        return {"missing": 0, "made": 0}
    missing = ctx.execute(missing_context_vectors(user_id, model_id, limit))
    if dry_run:
        return {"missing": len(missing), "made": 0}
    # The write path's reads of each chain, in one round trip (they share it).
    reads: list[Any] = [mops.ContextBeforeOp(user_id, namespace(row["prefix"]), row["key"],
                                             row["thread_id"], turns) for row in missing]
    befores: list[Any] = ctx.store.batch(reads) if reads else []
    ops: list[Any] = context_vector_ops(
        user_id, [(namespace(row["prefix"]), row["key"], row["content"] or "")
                  for row in missing], befores, now=now)
    if ops and ctx.deferred is not None:
        ctx.deferred.extend(ops)  # the runner embeds them with other users' texts
    elif ops:
        ctx.store.batch(ops)
    return {"missing": len(missing), "made": len(ops)}
