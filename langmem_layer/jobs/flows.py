"""Flow-level jobs: calls to a ``MemoryLayer`` (the session sweep, extraction)."""

from __future__ import annotations

from datetime import datetime

from langmem_layer.jobs.registry import JobContext, JobOption, JobResult, register

__all__: list[str] = []


@register(
    "sweep-sessions",
    "close threads idle past the session TTL (their turns go to extraction) "
    "and purge the message log past its retention",
    schedule="daily",
    options=(
        JobOption("ttl_hours", float,
                  "idle time before a thread closes (default: the setting, 24)"),
        JobOption("prune", str, "what happens to a closed thread's checkpoints (default: "
                  "the setting, off)", choices=("off", "keep_latest", "delete")),
        JobOption("extract", bool,
                  "extract the queued turns now instead of leaving them to a worker",
                  needs_embeddings=True),
    ),
)
def sweep_sessions(ctx: JobContext, *, now: datetime | None = None,
                   ttl_hours: float | None = None, prune: str | None = None,
                   extract: bool = False) -> JobResult:
    """``layer.threads.sweep_sessions`` with LangGraph's ``PostgresSaver`` on the same database.

    Without ``extract`` the queued turns are left to a worker (``extract`` job), so a
    sweep never loads an embedding model or calls an LLM.
    """
    with ctx.checkpointer() as saver:
        sweep = ctx.layer.threads.sweep_sessions(
            saver, now=now, prune=prune, extract=extract,  # type: ignore[arg-type]
            ttl_seconds=None if ttl_hours is None else ttl_hours * 3600)
    counts = {"closed": len(sweep.closed), "enqueued": sweep.enqueued,
              "pruned": len(sweep.pruned), "failed": len(sweep.failed),
              "purged": sweep.purged_messages}
    return JobResult(
        "sweep-sessions", counts,
        "closed {closed} idle threads, queued {enqueued} turns for extraction, "
        "pruned {pruned}, failed {failed}; purged {purged} logged messages past retention",
        detail=sweep)


@register("extract", "extract every queued turn that is ready (one pass of the worker)",
          needs_embeddings=True)
def extract(ctx: JobContext, *, now: datetime | None = None) -> JobResult:
    """``layer.admin.process_pending``; ``now`` is not used (the queue is due by the layer's clock).

    Failed entries stay queued with a backoff, to be retried by a later pass.
    """
    result = ctx.layer.admin.process_pending()
    return JobResult("extract", {"extracted": len(result.done), "failed": len(result.failed)},
                     "extracted {extracted} turns, {failed} failed (kept for retry)",
                     detail=result)
