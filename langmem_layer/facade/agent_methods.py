"""The prebuilt-agent methods of ``MemoryLayer``: memory for ``create_react_agent`` and
``create_agent``, and the memory tools.

A mixin, as ``langmem_layer.facade.working_methods`` is: the façade stays one class while each
half stays one concept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from langmem_layer.facade.layer_base import LayerBase

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from langmem_layer.facade.prebuilt import MemoryMiddleware, ReactHooks

__all__ = ["AgentMethods"]

T = TypeVar("T")


class AgentMethods(LayerBase):
    """Prebuilt-agent methods of ``MemoryLayer``."""

    def react_hooks(self, prompt: str = "") -> ReactHooks:
        """Keyword arguments giving ``create_react_agent`` long-term memory.

        ``create_react_agent(model, tools, checkpointer=saver, **memory.react_hooks(
        "Be brief."))``: the block is loaded before the turn's first model call and
        the turn queued for extraction when it ends (see
        ``langmem_layer.facade.prebuilt.react_hooks``).

        Args:
            prompt: Instructions placed before the memory block in the system message.
        """
        # The agent modules (langchain's middleware, LangGraph's prebuilt agent) are
        # imported by the methods that hand them out, not with the layer.
        from langmem_layer.facade.prebuilt import react_hooks

        return react_hooks(self, prompt)

    def middleware(self) -> MemoryMiddleware:
        """A ``langchain.agents.create_agent`` middleware giving the agent long-term memory.

        ``create_agent(model, tools, middleware=[memory.middleware()])`` (see
        ``langmem_layer.facade.prebuilt.MemoryMiddleware``).
        """
        from langmem_layer.facade.prebuilt import MemoryMiddleware

        return MemoryMiddleware(self)

    def tools(self) -> list[BaseTool]:
        """The memory tools ``remember``, ``recall``, ``correct`` / ``update`` and
        ``forget``, bound to the run's user (see
        ``langmem_layer.facade.tools.create_memory_tools``)."""
        from langmem_layer.facade.tools import create_memory_tools

        return create_memory_tools(self)
