"""``memory.threads``: what ``load_memory`` and ``extract_after_turn`` do as direct
calls, the message log across threads, and the session sweep.

A part of the layer (``langmem_layer.facade.part``): every method is a one-line call
into the layer's ``Runner`` over a flow built once.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Unpack

from langchain_core.messages import BaseMessage

from langmem_layer import checks
from langmem_layer import message_log as history
from langmem_layer.errors import InvalidInputError
from langmem_layer.facade.params import (
    ClearHistoryArgs,
    LoadThreadArgs,
    RecentHistoryArgs,
    RecordTurnArgs,
    SweepArgs,
)
from langmem_layer.facade.part import Part
from langmem_layer.flow import Flow
from langmem_layer.store.ops import LoggedMessage
from langmem_layer.worker import ProcessPending, WakeWorker
from langmem_layer.working import sessions
from langmem_layer.working import trim as working
from langmem_layer.working.sessions import PruneStrategy, SessionSweep
from langmem_layer.working.trim import WorkingLoad

__all__ = ["Threads"]


class Threads(Part):
    """The user's threads: ``memory.threads`` (working memory and the message log)."""

    def load_thread(self, user_id: str, messages: Sequence[BaseMessage],
                    query: str | None = None, **kw: Unpack[LoadThreadArgs]) -> WorkingLoad:
        """What ``load_memory`` does, in one round trip.

        Plans the trim of ``messages`` to ``settings.history_max_tokens`` (keeping
        ``history_min_turns``), queues each dropped turn for extraction, stamps the
        thread's activity, recalls for ``query`` and reads the user's recent messages
        from other threads. Remove ``result.trim.removals`` from the thread only after
        this returns: a turn is always queued before it leaves. With
        ``reinforce=False`` the recalled memories are not reinforced here: pass their
        keys to ``record_turn`` (the nodes do).

        Args:
            user_id: The user.
            messages: The thread's messages.
            query: What to recall for.
            **kw: See ``LoadThreadArgs``.
        """
        return self.layer.runner.run(self._load_thread(user_id, messages, query, **kw))

    async def aload_thread(self, user_id: str, messages: Sequence[BaseMessage],
                           query: str | None = None, **kw: Unpack[LoadThreadArgs]
                           ) -> WorkingLoad:
        """Async twin of ``load_thread``."""
        return await self.layer.runner.arun(self._load_thread(user_id, messages, query, **kw))

    def record_turn(self, user_id: str, messages: Sequence[BaseMessage],
                    **kw: Unpack[RecordTurnArgs]) -> int | None:
        """``memory.admin.submit``, plus the turn's messages into the user's message log, plus
        the reinforcement of the memories keyed in ``reinforce``.

        All in one transaction; what ``extract_after_turn`` does. Returns the queue
        entry id (None when the turn was queued before).

        Args:
            user_id: The user.
            messages: The turn.
            **kw: See ``RecordTurnArgs``.
        """
        return self.layer.runner.run(self._record_turn(user_id, messages, **kw))

    async def arecord_turn(self, user_id: str, messages: Sequence[BaseMessage],
                           **kw: Unpack[RecordTurnArgs]) -> int | None:
        """Async twin of ``record_turn``."""
        return await self.layer.runner.arun(self._record_turn(user_id, messages, **kw))

    def recent_history(self, user_id: str, **kw: Unpack[RecentHistoryArgs]
                       ) -> builtins.list[LoggedMessage]:
        """The user's logged messages of the last ``hours`` outside ``thread_id``, oldest first.

        Defaults: ``settings.recent_history_hours`` and ``recent_history_limit``; the
        profile's messages only; turns that are the source of an ``avoid`` memory are
        left out.

        Args:
            user_id: The user.
            **kw: See ``RecentHistoryArgs``.
        """
        return self.layer.runner.run(self._recent_history(user_id, **kw))

    async def arecent_history(self, user_id: str, **kw: Unpack[RecentHistoryArgs]
                              ) -> builtins.list[LoggedMessage]:
        """Async twin of ``recent_history``."""
        return await self.layer.runner.arun(self._recent_history(user_id, **kw))

    def clear_history(self, user_id: str, **kw: Unpack[ClearHistoryArgs]) -> int:
        """Delete the user's message log (one thread's, or all); returns the count.

        Args:
            user_id: The user.
            **kw: See ``ClearHistoryArgs``.
        """
        return self.layer.runner.run(history.clear(user_id, **kw))

    async def aclear_history(self, user_id: str, **kw: Unpack[ClearHistoryArgs]) -> int:
        """Async twin of ``clear_history``."""
        return await self.layer.runner.arun(history.clear(user_id, **kw))

    def sweep_sessions(self, checkpointer: Any, **kw: Unpack[SweepArgs]) -> SessionSweep:
        """Close threads idle past the session TTL and purge the message log.

        A job: call it from a scheduler, or run ``langmem-layer sweep-sessions``.

        Args:
            checkpointer: The graph's checkpointer (sync), e.g. ``PostgresSaver``.
            **kw: See ``SweepArgs``.
        """
        return sessions.run_sweep(self.layer.runner, checkpointer, self._sweep(**kw))

    async def asweep_sessions(self, checkpointer: Any, **kw: Unpack[SweepArgs]
                              ) -> SessionSweep:
        """Async twin of ``sweep_sessions``, with an async checkpointer."""
        return await sessions.arun_sweep(self.layer.runner, checkpointer, self._sweep(**kw))

    # -- the flows behind the methods -------------------------------------------------

    def _record_turn(self, user_id: str, messages: Sequence[BaseMessage], *,
                     profile: str | None = None, thread_id: str | None = None,
                     agent_id: str | None = None, now: datetime | None = None,
                     reinforce: Sequence[str] = ()) -> Flow[int | None]:
        checks.check_messages(messages)
        reinforce = checks.check_strings(reinforce, "reinforce")
        inline = self.layer.extraction == "inline"
        # A turn that wakes the background worker is leased as it is queued: the pass
        # this process runs for it extracts it without claiming it.
        due = not inline and self.layer.worker.turn_due(thread_id)
        recorded = yield from working.record_turn(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now(), reinforce=reinforce,
            lease_seconds=self.settings.extraction_lease_seconds if due else None)
        yield from self.layer.worker.after_enqueue(inline=inline, user_id=user_id,
                                              thread_id=thread_id, due=due, recorded=recorded)
        return recorded.entry_id

    def _load_thread(self, user_id: str, messages: Sequence[BaseMessage],
                     query: str | None, *, profile: str | None = None,
                     thread_id: str | None = None, agent_id: str | None = None,
                     limit: int | None = None, now: datetime | None = None,
                     reinforce: bool = True) -> Flow[WorkingLoad]:
        limit = checks.check_limit(limit)
        return working.load_thread(
            self.env, user_id, messages, query, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now(),
            limit=limit or self.settings.block_memory_limit, reinforce=reinforce)

    def _recent_history(self, user_id: str, *, thread_id: str | None = None,
                        profile: str | None = None, hours: float | None = None,
                        limit: int | None = None, now: datetime | None = None
                        ) -> Flow[builtins.list[LoggedMessage]]:
        limit = checks.check_limit(limit)
        if hours is not None and (isinstance(hours, bool) or not isinstance(hours, (int, float))
                                  or not hours > 0):
            raise InvalidInputError(f"hours must be a positive number, got {hours!r}.")
        return history.recent_history(
            self.env, user_id, profile=profile, thread_id=thread_id, now=now or self.now(),
            hours=hours, limit=limit)

    def _sweep(self, *, now: datetime | None = None, prune: PruneStrategy | None = None,
               ttl_seconds: float | None = None, extract: bool | None = None
               ) -> Flow[SessionSweep]:
        result = yield from sessions.sweep(self.env, now=now or self.now(),
                                           ttl_seconds=ttl_seconds, prune=prune)
        if result.enqueued and extract is not False:
            inline = extract or self.layer.extraction == "inline"
            yield ProcessPending() if inline else WakeWorker()
        return result
