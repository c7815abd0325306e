"""The knowledge half of ``MemoryLayer``: documents retrieved beside
memory on each turn, and the memory as a LangChain retriever.

A mixin, as ``langmem_layer.layer.agent_methods`` is: the façade stays one class while each
half stays one concept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from langchain_core.documents import Document

from langmem_layer import checks
from langmem_layer.flow import require_user
from langmem_layer.knowledge import MemoryRetriever
from langmem_layer.layer.base import LayerBase
from langmem_layer.layer.params import ContextBlockArgs
from langmem_layer.read import recall as read
from langmem_layer.read.block import ContextBlock

__all__ = ["KnowledgeMethods"]

T = TypeVar("T")
log = logging.getLogger(__name__)


class KnowledgeMethods(LayerBase):
    """Knowledge-retrieval methods of ``MemoryLayer``."""

    def as_retriever(self, *, user_id: str, profile: str | None = None, k: int = 10
                     ) -> MemoryRetriever:
        """The user's memories as a LangChain ``BaseRetriever`` (sync and async).

        ``memory.as_retriever(user_id="alice") | format_docs`` in an LCEL chain: each
        query recalls the user's memories (best first); a document's ``page_content`` is
        the memory and its metadata the id, kind, layer, policy, score and dates.

        Args:
            user_id: Whose memories (bound here: the chain's input never chooses it).
            profile: The profile searched besides identity (default: the settings').
            k: At most this many documents, at least 1.
        """
        require_user(user_id)
        k = checks.check_limit(k) or 10
        return MemoryRetriever(layer=self, user_id=user_id, profile=profile, k=k)

    def retrieve_knowledge(self, query: str | None) -> list[Document]:
        """Documents the knowledge source returns for ``query`` (``[]`` without one).

        At most ``settings.knowledge_k`` of them, best first (``knowledge_k=0`` turns
        retrieval off). Never raises: a failing source is logged and the turn goes on
        without documents.
        """
        if self.knowledge is None or not query or not self.env.settings.knowledge_k:
            return []
        try:
            return self.knowledge.invoke(query)[: self.env.settings.knowledge_k]
        except Exception:  # the source is the user's code: any failure must spare the turn
            log.exception("knowledge source failed; the block is built without documents")
            return []

    async def aretrieve_knowledge(self, query: str | None) -> list[Document]:
        """Async twin of ``retrieve_knowledge``."""
        if self.knowledge is None or not query or not self.env.settings.knowledge_k:
            return []
        try:
            return (await self.knowledge.ainvoke(query))[: self.env.settings.knowledge_k]
        except Exception:  # the source is the user's code: any failure must spare the turn
            log.exception("knowledge source failed; the block is built without documents")
            return []

    def _beside_knowledge(self, query: str | None, work: Callable[[], T]
                         ) -> tuple[T, list[Document]]:
        """Run ``work`` (the memory read) while the knowledge source is queried.

        The sync path queries the source on a worker thread: the memory read holds the
        calling thread on its database round trip, and a LangChain retriever's sync
        ``invoke`` is blocking I/O too, so a thread is what overlaps them. Without a
        source (or a query) ``work`` simply runs.
        """
        if self.knowledge is None or not query:
            return work(), []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="langmem-knowledge") as pool:
            found = pool.submit(self.retrieve_knowledge, query)
            done = work()
            return done, found.result()

    async def _abeside_knowledge(self, query: str | None, work: Awaitable[T]
                                ) -> tuple[T, list[Document]]:
        """Async twin of ``_beside_knowledge``: both awaited with ``asyncio.gather``."""
        if self.knowledge is None or not query:
            return await work, []
        done, found = await asyncio.gather(work, self.aretrieve_knowledge(query))
        return done, found

    def _block_beside_knowledge(self, user_id: str, query: str | None,
                                kw: ContextBlockArgs) -> ContextBlock:
        """``context_block``: the memory read and the knowledge query at once, rendered."""
        args, spoken, now = _split(kw, self.now())
        inputs, documents = self._beside_knowledge(
            query, lambda: self._runner.run(self._block_inputs(user_id, query, now=now, **args)))
        return self._render(inputs, documents, spoken, now)

    async def _ablock_beside_knowledge(self, user_id: str, query: str | None,
                                       kw: ContextBlockArgs) -> ContextBlock:
        """Async twin of ``_block_beside_knowledge``."""
        args, spoken, now = _split(kw, self.now())
        inputs, documents = await self._abeside_knowledge(
            query, self._runner.arun(self._block_inputs(user_id, query, now=now, **args)))
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
