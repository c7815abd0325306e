"""The prebuilt-agent half of ``MemoryLayer``: memory for
``create_react_agent`` and ``create_agent``, memory tools, and LangMem's stored items.

A mixin, as ``langmem_layer.layer.working_methods`` is: the façade stays one class while each
half stays one concept.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar, Unpack

from langchain_core.tools import BaseTool

from langmem_layer import checks
from langmem_layer import compat_langmem as langmem
from langmem_layer.compat_langmem import LangmemImport
from langmem_layer.flow import Flow
from langmem_layer.layer.base import LayerBase
from langmem_layer.layer.params import LangmemImportArgs
from langmem_layer.layer.prebuilt import MemoryMiddleware, ReactHooks, react_hooks
from langmem_layer.layer.tools import create_memory_tools
from langmem_layer.types import Kind

__all__ = ["AgentMethods"]

T = TypeVar("T")


class AgentMethods(LayerBase):
    """Prebuilt-agent methods of ``MemoryLayer``."""

    def react_hooks(self, prompt: str = "") -> ReactHooks:
        """Keyword arguments giving ``create_react_agent`` long-term memory.

        ``create_react_agent(model, tools, checkpointer=saver, **memory.react_hooks(
        "Be brief."))``: the block is loaded before the turn's first model call and
        the turn queued for extraction when it ends (see
        ``langmem_layer.layer.prebuilt.react_hooks``).

        Args:
            prompt: Instructions placed before the memory block in the system message.
        """
        return react_hooks(self, prompt)

    def middleware(self) -> MemoryMiddleware:
        """A ``langchain.agents.create_agent`` middleware giving the agent long-term memory.

        ``create_agent(model, tools, middleware=[memory.middleware()])`` (see
        ``langmem_layer.layer.prebuilt.MemoryMiddleware``).
        """
        return MemoryMiddleware(self)

    def tools(self) -> list[BaseTool]:
        """The memory tools ``remember``, ``recall``, ``correct`` / ``update`` and
        ``forget``, bound to the run's user (see
        ``langmem_layer.layer.tools.create_memory_tools``)."""
        return create_memory_tools(self)

    def import_langmem(self, user_id: str, **kw: Unpack[LangmemImportArgs]) -> LangmemImport:
        """Write the memories LangMem stored for ``user_id`` as typed memories, once.

        Reads ``("memories", user_id)`` (LangMem's default namespace) and proposes each
        item to the write path: the gate deduplicates, the decision log records it,
        and importing again changes nothing (see ``langmem_layer.compat_langmem``).

        Args:
            user_id: The user.
            **kw: See ``LangmemImportArgs``.
        """
        return self._runner.run(self._import_langmem(user_id, **kw))

    async def aimport_langmem(self, user_id: str, **kw: Unpack[LangmemImportArgs]
                              ) -> LangmemImport:
        """Async twin of ``import_langmem``."""
        return await self._runner.arun(self._import_langmem(user_id, **kw))

    def _import_langmem(self, user_id: str, *, namespace: Any = None,
                        profile: str | None = None, kind: Kind = Kind.PROFILE_FACT,
                        now: datetime | None = None) -> Flow[LangmemImport]:
        kind = checks.check_choice(kind, Kind, "kind")
        checks.check_time(now, "now")
        if namespace is not None:
            namespace = checks.check_strings(namespace, "namespace")
        return langmem.import_langmem(self.env, user_id, namespace=namespace,
                                      profile=profile, kind=kind, now=now or self.now())
