"""``memory.agents``: the memory for other agents' parts: LangMem's stored items
imported as typed memories, the memory as a LangChain retriever, and the knowledge
source's documents.

A part of the layer (``langmem_layer.facade.part``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from langchain_core.documents import Document

from langmem_layer import checks
from langmem_layer import compat_langmem as langmem
from langmem_layer.compat_langmem import LangmemImport
from langmem_layer.facade.params import LangmemImportArgs
from langmem_layer.facade.part import Part
from langmem_layer.flow import Flow, require_user
from langmem_layer.types import Kind

if TYPE_CHECKING:
    from langmem_layer.facade.retriever import MemoryRetriever

__all__ = ["Agents"]

T = TypeVar("T")
log = logging.getLogger("langmem_layer.facade")


class Agents(Part):
    """The memory for other agents and chains: ``memory.agents``."""

    def import_langmem(self, user_id: str, **kw: Unpack[LangmemImportArgs]) -> LangmemImport:
        """Write the memories LangMem stored for ``user_id`` as typed memories, once.

        Reads ``("memories", user_id)`` (LangMem's default namespace) and proposes each
        item to the write path: the gate deduplicates, the decision log records it,
        and importing again changes nothing (see ``langmem_layer.compat_langmem``).

        Args:
            user_id: The user.
            **kw: See ``LangmemImportArgs``.
        """
        return self.layer.runner.run(self._import_langmem(user_id, **kw))

    async def aimport_langmem(self, user_id: str, **kw: Unpack[LangmemImportArgs]
                              ) -> LangmemImport:
        """Async twin of ``import_langmem``."""
        return await self.layer.runner.arun(self._import_langmem(user_id, **kw))

    def _import_langmem(self, user_id: str, *, namespace: Any = None,
                        profile: str | None = None, kind: Kind = Kind.PROFILE_FACT,
                        now: datetime | None = None) -> Flow[LangmemImport]:
        kind = checks.check_choice(kind, Kind, "kind")
        checks.check_time(now, "now")
        if namespace is not None:
            namespace = checks.check_strings(namespace, "namespace")
        return langmem.import_langmem(self.env, user_id, namespace=namespace,
                                      profile=profile, kind=kind, now=now or self.now())

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
        from langmem_layer.facade.retriever import MemoryRetriever

        return MemoryRetriever(layer=self.layer, user_id=user_id, profile=profile, k=k)

    def retrieve_knowledge(self, query: str | None) -> list[Document]:
        """Documents the knowledge source returns for ``query`` (``[]`` without one).

        At most ``settings.knowledge_k`` of them, best first (``knowledge_k=0`` turns
        retrieval off). Never raises: a failing source is logged and the turn goes on
        without documents.
        """
        if self.layer.knowledge is None or not query or not self.env.settings.knowledge_k:
            return []
        try:
            return self.layer.knowledge.invoke(query)[: self.env.settings.knowledge_k]
        except Exception:  # the source is the user's code: any failure must spare the turn
            log.exception("knowledge source failed; the block is built without documents")
            return []

    async def aretrieve_knowledge(self, query: str | None) -> list[Document]:
        """Async twin of ``retrieve_knowledge``."""
        if self.layer.knowledge is None or not query or not self.env.settings.knowledge_k:
            return []
        try:
            return (await self.layer.knowledge.ainvoke(query))[: self.env.settings.knowledge_k]
        except Exception:  # the source is the user's code: any failure must spare the turn
            log.exception("knowledge source failed; the block is built without documents")
            return []

    def beside_knowledge(self, query: str | None, work: Callable[[], T]
                         ) -> tuple[T, list[Document]]:
        """Run ``work`` (the memory read) while the knowledge source is queried.

        The sync path queries the source on a worker thread: the memory read holds the
        calling thread on its database round trip, and a LangChain retriever's sync
        ``invoke`` is blocking I/O too, so a thread is what overlaps them. Without a
        source (or a query) ``work`` simply runs.
        """
        if self.layer.knowledge is None or not query:
            return work(), []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="langmem-knowledge") as pool:
            found = pool.submit(self.retrieve_knowledge, query)
            done = work()
            return done, found.result()

    async def abeside_knowledge(self, query: str | None, work: Awaitable[T]
                                ) -> tuple[T, list[Document]]:
        """Async twin of ``beside_knowledge``: both awaited with ``asyncio.gather``."""
        if self.layer.knowledge is None or not query:
            return await work, []
        done, found = await asyncio.gather(work, self.aretrieve_knowledge(query))
        return done, found
