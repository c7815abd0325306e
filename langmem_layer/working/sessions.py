"""Working-memory sessions: the checkpointer that holds threads, and the job that
closes the idle ones.

The checkpointer is LangGraph's own ``PostgresSaver`` / ``AsyncPostgresSaver``
(``langgraph-checkpoint-postgres``) on the memory database: the embedded PostgreSQL by
default, any PostgreSQL URL in production. ``postgres_checkpointer`` and
``apostgres_checkpointer`` open one; ``checkpointers/postgres.py`` exposes them
to ``langgraph.json``.

Session close: ``load_memory`` stamps each thread's activity (with its user,
profile and agent). The sweeper — ``memory.threads.sweep_sessions`` or
``langmem-layer sweep-sessions``, never implicitly — closes every thread idle longer
than ``MemorySettings.session_ttl_seconds``:

1. it loads the thread's latest checkpoint and queues each of its turns for
   extraction under the turn's own key, so turns queued before (at their end, or when
   trimmed) are not queued again;
2. it marks the thread closed (unless the user came back meanwhile);
3. with ``session_prune`` it prunes the thread's checkpoints with the checkpointer's
   own ``prune``: ``keep_latest`` keeps the latest checkpoint (the thread stays
   readable and resumable), ``delete`` drops the thread;

and finally deletes logged messages older than ``message_log_retention_days``. A
thread the user comes back to opens again. The sweep is written once, as a flow of
store and checkpointer requests that ``run_sweep`` / ``arun_sweep`` execute.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langchain_core.messages import BaseMessage

from langmem_layer.environment import database_url
from langmem_layer.flow import Call, Env, Flow, Runner, StoreCall
from langmem_layer.store import ops as mops
from langmem_layer.working.trim import gather, handoff, split_turns

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

__all__ = [
    "CheckpointCall",
    "SessionSweep",
    "apostgres_checkpointer",
    "arun_sweep",
    "database_url",
    "postgres_checkpointer",
    "run_sweep",
    "sweep",
]

logger = logging.getLogger("langmem_layer")

PruneStrategy = Literal["off", "keep_latest", "delete"]

T = TypeVar("T")


@contextmanager
def postgres_checkpointer(url: str | None = None, *, data_dir: str | Path | None = None,
                          setup: bool = True) -> Iterator[PostgresSaver]:
    """LangGraph's ``PostgresSaver`` on the memory database (see ``database_url``).

    Args:
        url: A PostgreSQL URL; default ``LANGMEM_DATABASE_URL`` or the embedded server.
        data_dir: The embedded server's directory when no URL is set.
        setup: Create or upgrade the checkpoint tables first (idempotent).
    """
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(database_url(url, data_dir=data_dir)) as saver:
        if setup:
            saver.setup()
        yield saver


@asynccontextmanager
async def apostgres_checkpointer(url: str | None = None, *,
                                 data_dir: str | Path | None = None,
                                 setup: bool = True) -> AsyncIterator[AsyncPostgresSaver]:
    """LangGraph's ``AsyncPostgresSaver`` on the memory database (see ``database_url``).

    Usable as ``langgraph.json``'s ``checkpointer.path``: an async context manager
    the server enters once and closes on shutdown.
    """
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    uri = await asyncio.to_thread(database_url, url, data_dir=data_dir)  # may start a server
    async with AsyncPostgresSaver.from_conn_string(uri) as saver:
        if setup:
            await saver.setup()
        yield saver


# -- the sweeper ------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointCall(Call):
    """Request: call ``method`` of the checkpointer (its ``a``-prefixed twin in async)."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class SessionSweep:
    """What one sweep did.

    Attributes:
        closed: ``(user_id, thread_id)`` of the threads closed.
        enqueued: Turns newly queued for extraction (turns queued before not counted).
        pruned: ``(user_id, thread_id)`` whose checkpoints were pruned or deleted.
        failed: ``(user_id, thread_id)`` that could not be closed or pruned (retried by
            the next sweep when not closed; the error is logged).
        purged_messages: Logged messages deleted for being older than the retention.
    """

    closed: list[tuple[str, str]] = field(default_factory=list)
    enqueued: int = 0
    pruned: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    purged_messages: int = 0


def sweep(env: Env, *, now: datetime, ttl_seconds: float | None = None,
          prune: PruneStrategy | None = None, limit: int = 10_000) -> Flow[SessionSweep]:
    """Close threads idle past the TTL, then purge the message log past its retention.

    ``ttl_seconds`` and ``prune`` default to the settings. A thread that fails is logged
    and left for the next sweep; the others go on.
    """
    st = env.settings
    ttl = timedelta(seconds=st.session_ttl_seconds if ttl_seconds is None else ttl_seconds)
    prune = st.session_prune if prune is None else prune
    retention = timedelta(days=st.message_log_retention_days)
    result = SessionSweep()
    idle_before = now - ttl
    (idle,) = yield StoreCall([mops.IdleThreadsOp(idle_before, limit)])
    for thread in idle:
        try:
            yield from _close(env, thread, idle_before, now, prune, result)
        except Exception:
            logger.exception("Closing thread %r of user %r failed", thread.thread_id,
                             thread.user_id)
            result.failed.append((thread.user_id, thread.thread_id))
    (result.purged_messages,) = yield StoreCall([mops.PurgeMessagesOp(now - retention)])
    return result


def _close(env: Env, thread: mops.ThreadActivity, idle_before: datetime, now: datetime,
           prune: PruneStrategy, result: SessionSweep) -> Flow[None]:
    who = (thread.user_id, thread.thread_id)
    config = {"configurable": {"thread_id": thread.thread_id, "checkpoint_ns": ""}}
    saved = yield CheckpointCall("get_tuple", (config,))
    values = (saved.checkpoint.get("channel_values") or {}) if saved is not None else {}
    messages = [m for m in values.get("messages") or () if isinstance(m, BaseMessage)]
    # Extraction first: closing must never lose a turn that was not handed over yet.
    entries = yield from gather(*handoff(
        env, thread.user_id, split_turns(messages), profile=thread.profile,
        thread_id=thread.thread_id, agent_id=thread.agent_id,
        turn_at=thread.last_active_at))
    result.enqueued += sum(1 for e in entries if e is not None)
    (closed,) = yield StoreCall([mops.CloseThreadOp(thread.user_id, thread.thread_id,
                                                    idle_before, now)])
    if not closed:  # the user came back meanwhile: leave the thread alone
        return
    result.closed.append(who)
    if prune == "off" or saved is None:
        return
    try:
        yield CheckpointCall("prune", ([thread.thread_id],), {"strategy": prune})
    except NotImplementedError:  # a checkpointer without prune (e.g. InMemorySaver)
        if prune != "delete":
            raise
        yield CheckpointCall("delete_thread", (thread.thread_id,))
    result.pruned.append(who)


def run_sweep(runner: Runner, checkpointer: Any, flow: Flow[T]) -> T:
    """Execute a sweep flow with ``runner`` (its store) and a sync checkpointer."""
    def call(request: CheckpointCall) -> Any:
        return getattr(checkpointer, request.method)(*request.args, **request.kwargs)

    return runner.run(flow, extra={CheckpointCall: call})


async def arun_sweep(runner: Runner, checkpointer: Any, flow: Flow[T]) -> T:
    """Async twin of ``run_sweep``, with an async checkpointer."""
    async def call(request: CheckpointCall) -> Any:
        method = getattr(checkpointer, "a" + request.method)
        return await method(*request.args, **request.kwargs)

    return await runner.arun(flow, extra={CheckpointCall: call})
