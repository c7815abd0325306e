"""The user's memories as a LangChain retriever, for LCEL chains.

``memory.agents.as_retriever(user_id=...)`` builds one; each query is a recall. Here,
not in ``langmem_layer.knowledge``, because LangChain's ``BaseRetriever`` brings
LangSmith's tracing types with it: imported only by those who build a retriever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from langmem_layer.knowledge import memory_document
from langmem_layer.types import Recalled

__all__ = ["MemoryRetriever"]


class MemoryRetriever(BaseRetriever):
    """A user's memories as a LangChain retriever (``memory.agents.as_retriever(user_id=...)``).

    Each query is a ``MemoryLayer.recall`` (hybrid retrieval and ranking); the
    documents are the recalled memories, best first (``memory_document``).
    ``avoid`` memories are left out: a chain has no section telling its model not to
    bring them up.

    Attributes:
        layer: The ``MemoryLayer``.
        user_id: Whose memories.
        profile: The profile searched besides identity (default: the settings').
        k: At most this many documents.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    layer: Any
    user_id: str
    profile: str | None = None
    k: int = 10

    def _documents(self, recalled: Sequence[Recalled]) -> list[Document]:
        return [memory_document(r) for r in recalled if r.record.policy.value != "avoid"]

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self._documents(self.layer.recall(self.user_id, query, profile=self.profile,
                                                 limit=self.k))

    async def _aget_relevant_documents(
            self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(await self.layer.arecall(
            self.user_id, query, profile=self.profile, limit=self.k))
