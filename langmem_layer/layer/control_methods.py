"""The memory-panel half of ``MemoryLayer``'s control API: browse a
user's memories page by page, and pin them or change how they surface.

A mixin, like ``langmem_layer.layer.working_methods``: every method is a one-line call into
the layer's ``Runner`` over a flow built once.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any, Unpack

from langmem_layer import checks, control
from langmem_layer.errors import InvalidInputError
from langmem_layer.flow import Flow
from langmem_layer.layer.base import LayerBase
from langmem_layer.layer.params import BrowseArgs, SurfaceArgs
from langmem_layer.types import Kind, Layer, Policy, Recalled

__all__ = ["ControlMethods"]


def _choices(values: Any, enum: Any, name: str) -> tuple[str, ...]:
    return tuple(checks.check_choice(v, enum, name).value
                 for v in checks.check_strings(values, name))


class ControlMethods(LayerBase):
    """Browse and surface-policy methods of ``MemoryLayer``."""

    def browse(self, user_id: str, **kw: Unpack[BrowseArgs]) -> builtins.list[Recalled]:
        """One page of the user's memories, filtered; for a memory panel or an export UI.

        Unlike ``recall`` it sees every status and
        scope, and it changes nothing (no reinforcement).

        Args:
            user_id: The user.
            **kw: See ``BrowseArgs``.
        """
        return self._runner.run(self._browse(user_id, **kw))

    async def abrowse(self, user_id: str, **kw: Unpack[BrowseArgs]
                      ) -> builtins.list[Recalled]:
        """Async twin of ``browse``."""
        return await self._runner.arun(self._browse(user_id, **kw))

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
        return self._runner.run(self._set_surface(user_id, memory_id, **kw))

    async def aset_surface(self, user_id: str, memory_id: str, **kw: Unpack[SurfaceArgs]
                           ) -> Recalled:
        """Async twin of ``set_surface``."""
        return await self._runner.arun(self._set_surface(user_id, memory_id, **kw))

    # -- the flows behind the methods --------------------------------------------------

    def _browse(self, user_id: str, *, query: str | None = None, profile: str | None = None,
                layers: Any = None, kinds: Any = None, statuses: Any = None,
                limit: int = 50, offset: int = 0) -> Flow[builtins.list[Recalled]]:
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
            offset=offset, floors=(self.settings.search_similarity_floor,
                                   self.settings.search_similarity_floor))

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
