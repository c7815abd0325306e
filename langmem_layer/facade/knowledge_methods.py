"""The knowledge methods of ``MemoryLayer``: documents retrieved beside memory on each
turn, read at the same time as the memory (``memory.agents`` has the public calls).

A mixin, as ``langmem_layer.facade.agent_methods`` is: the façade stays one class while each
half stays one concept.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, TypeVar

from langchain_core.documents import Document

from langmem_layer.facade.layer_base import LayerBase
from langmem_layer.facade.params import ContextBlockArgs
from langmem_layer.read import recall as read
from langmem_layer.read.block import ContextBlock

__all__ = ["KnowledgeMethods"]

T = TypeVar("T")
log = logging.getLogger(__name__)


class KnowledgeMethods(LayerBase):
    """Knowledge-retrieval methods of ``MemoryLayer``."""

    def _block_beside_knowledge(self, user_id: str, query: str | None,
                                kw: ContextBlockArgs) -> ContextBlock:
        """``context_block``: the memory read and the knowledge query at once, rendered."""
        args, spoken, now = _split(kw, self.now())
        inputs, documents = self.agents.beside_knowledge(
            query, lambda: self.runner.run(self._block_inputs(user_id, query, now=now, **args)))
        return self._render(inputs, documents, spoken, now)

    async def _ablock_beside_knowledge(self, user_id: str, query: str | None,
                                       kw: ContextBlockArgs) -> ContextBlock:
        """Async twin of ``_block_beside_knowledge``."""
        args, spoken, now = _split(kw, self.now())
        inputs, documents = await self.agents.abeside_knowledge(
            query, self.runner.arun(self._block_inputs(user_id, query, now=now, **args)))
        return self._render(inputs, documents, spoken, now)

    def _render(self, inputs: read.BlockInputs, documents: list[Document], spoken: list[str],
                now: datetime) -> ContextBlock:
        """The block of what the read and the knowledge query found (sync and async)."""
        return read.context_block(self.env, inputs.recalled, recent=inputs.recent,
                                  short_term=inputs.short_term, recently_spoken=spoken,
                                  now=now, documents=documents)


def _split(kw: ContextBlockArgs, default_now: datetime
           ) -> tuple[dict[str, Any], list[str], datetime]:
    """The read's arguments, the render's recently spoken keys, and the turn's time."""
    args: dict[str, Any] = dict(kw)
    spoken = list(args.pop("recently_spoken", None) or ())
    now = args.pop("now", None) or default_now
    return args, spoken, now
