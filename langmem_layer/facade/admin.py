"""``memory.admin``: what a memory panel and an operator do besides the façade's
everyday calls: browse a user's memories page by page, pin them or change how they
surface, read a memory's history and the gate's decisions, and queue or extract turns.

A part of the layer (``langmem_layer.facade.part``): every method is a one-line call
into the layer's ``Runner`` over a flow built once.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Unpack

from langchain_core.messages import BaseMessage

from langmem_layer import checks, control
from langmem_layer.errors import InvalidInputError
from langmem_layer.facade.params import (
    BrowseArgs,
    DecisionsArgs,
    PendingArgs,
    SurfaceArgs,
    TurnArgs,
)
from langmem_layer.facade.part import Part
from langmem_layer.flow import Flow
from langmem_layer.store.ops import IngestLogEntry
from langmem_layer.types import HistoryEntry, Kind, Layer, Policy, Recalled
from langmem_layer.write import apply as write
from langmem_layer.write.extraction_queue import ProcessResult

__all__ = ["Admin"]


def _choices(values: Any, enum: Any, name: str) -> tuple[str, ...]:
    return tuple(checks.check_choice(v, enum, name).value
                 for v in checks.check_strings(values, name))


class Admin(Part):
    """A memory panel's and an operator's calls: ``memory.admin``."""

    def browse(self, user_id: str, **kw: Unpack[BrowseArgs]) -> builtins.list[Recalled]:
        """One page of the user's memories, filtered; for a memory panel or an export UI.

        Unlike ``recall`` it sees every status and
        scope, and it changes nothing (no reinforcement).

        Args:
            user_id: The user.
            **kw: See ``BrowseArgs``.
        """
        return self.layer.runner.run(self._browse(user_id, **kw))

    async def abrowse(self, user_id: str, **kw: Unpack[BrowseArgs]
                      ) -> builtins.list[Recalled]:
        """Async twin of ``browse``."""
        return await self.layer.runner.arun(self._browse(user_id, **kw))

    def set_surface(self, user_id: str, memory_id: str, **kw: Unpack[SurfaceArgs]
                    ) -> Recalled:
        """Pin or unpin a memory and/or change its surface policy; returns it.

        Args:
            user_id: The user.
            memory_id: The memory.
            **kw: See ``SurfaceArgs``.

        Raises:
            MemoryNotFoundError: No such memory for the user.
        """
        return self.layer.runner.run(self._set_surface(user_id, memory_id, **kw))

    async def aset_surface(self, user_id: str, memory_id: str, **kw: Unpack[SurfaceArgs]
                           ) -> Recalled:
        """Async twin of ``set_surface``."""
        return await self.layer.runner.arun(self._set_surface(user_id, memory_id, **kw))

    def history(self, user_id: str, memory_id: str) -> builtins.list[HistoryEntry]:
        """Every change in a memory's life, oldest first: status transitions, closed
        loops, flags and corrections, each with its time and reason.

        Raises:
            MemoryNotFoundError: No such memory for the user.
        """
        return self.layer.runner.run(control.history(user_id, memory_id))

    async def ahistory(self, user_id: str, memory_id: str) -> builtins.list[HistoryEntry]:
        """Async twin of ``history``."""
        return await self.layer.runner.arun(control.history(user_id, memory_id))

    def decisions(self, user_id: str, **kw: Unpack[DecisionsArgs]
                  ) -> builtins.list[IngestLogEntry]:
        """Why things were or were not remembered: the latest ingests' gate decisions.

        Args:
            user_id: The user.
            **kw: See ``DecisionsArgs``.
        """
        return self.layer.runner.run(self._decisions(user_id, **kw))

    async def adecisions(self, user_id: str, **kw: Unpack[DecisionsArgs]
                         ) -> builtins.list[IngestLogEntry]:
        """Async twin of ``decisions``."""
        return await self.layer.runner.arun(self._decisions(user_id, **kw))

    def submit(self, user_id: str, messages: Sequence[BaseMessage], **kw: Unpack[TurnArgs]
               ) -> int | None:
        """Queue a turn durably and let the worker extract it; returns the entry id.

        Returns at once. The turn stays in the queue until it is extracted, across
        failures and restarts; with ``extraction="inline"`` it is extracted before
        this returns.

        Args:
            user_id: The user.
            messages: The turn.
            **kw: See ``TurnArgs``.
        """
        return self.layer.runner.run(self._submit(user_id, messages, **kw))

    async def asubmit(self, user_id: str, messages: Sequence[BaseMessage],
                      **kw: Unpack[TurnArgs]) -> int | None:
        """Async twin of ``submit``: extraction runs as a task on the running loop."""
        return await self.layer.runner.arun(self._submit(user_id, messages, **kw))

    def process_pending(self, **kw: Unpack[PendingArgs]) -> ProcessResult:
        """Extract every queue entry ready now (all users, or one); returns what happened.

        Args:
            **kw: See ``PendingArgs``.
        """
        return self.layer.runner.run(self.layer.worker.process_pending(**kw))

    async def aprocess_pending(self, **kw: Unpack[PendingArgs]) -> ProcessResult:
        """Async twin of ``process_pending``."""
        return await self.layer.runner.arun(self.layer.worker.process_pending(**kw))

    # -- the flows behind the methods --------------------------------------------------

    def _decisions(self, user_id: str, *, thread_id: str | None = None, limit: int = 20
                   ) -> Flow[builtins.list[IngestLogEntry]]:
        limit = checks.check_limit(limit) or 20
        return control.decisions(user_id, thread_id=thread_id, limit=limit)

    def _submit(self, user_id: str, messages: Sequence[BaseMessage], *,
                profile: str | None = None, thread_id: str | None = None,
                agent_id: str | None = None, now: datetime | None = None
                ) -> Flow[int | None]:
        checks.check_messages(messages)
        checks.check_time(now, "now")
        entry = yield from write.enqueue_turn(
            self.env, user_id, messages, profile=profile, thread_id=thread_id,
            agent_id=agent_id, now=now or self.now())
        yield from self.layer.worker.after_enqueue(
            inline=self.layer.extraction == "inline", user_id=user_id, thread_id=thread_id)
        return entry

    def _browse(self, user_id: str, *, query: str | None = None, profile: str | None = None,
                layers: Any = None, kinds: Any = None, statuses: Any = None,
                limit: int = 50, offset: int = 0) -> Flow[builtins.list[Recalled]]:
        st = self.settings
        if query is not None:
            checks.check_content_text(query, "query")
        if profile is not None and (not isinstance(profile, str) or not profile):
            raise InvalidInputError(f"profile must be a non-empty string, got {profile!r}.")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError(f"offset must be an int of at least 0, got {offset!r}.")
        return control.browse(
            user_id, query=query, profile=profile, layers=_choices(layers, Layer, "layer"),
            kinds=_choices(kinds, Kind, "kind") or tuple(k.value for k in Kind),
            statuses=checks.check_statuses(statuses), limit=checks.check_limit(limit) or 50,
            offset=offset, floors=(st.search_similarity_floor,
                                   max(st.search_similarity_floor, st.episodic_similarity_floor)))

    def _set_surface(self, user_id: str, memory_id: str, *, pinned: bool | None = None,
                     policy: Policy | str | None = None, now: datetime | None = None
                     ) -> Flow[Recalled]:
        if pinned is not None and not isinstance(pinned, bool):
            raise InvalidInputError(f"pinned must be True or False, got {pinned!r}.")
        if pinned is None and policy is None:
            raise InvalidInputError("Nothing to change: pass pinned=True/False and/or "
                                    f"policy= one of {[p.value for p in Policy]}.")
        checks.check_time(now, "now")
        return control.set_surface(
            user_id, memory_id, pinned=pinned,
            policy=None if policy is None else checks.check_choice(policy, Policy, "policy"),
            now=now or self.now())
