"""Knowledge retrieval beside memory, and the memory as a LangChain retriever.

A ``MemoryLayer`` built with ``knowledge=`` (any LangChain
``BaseRetriever`` or ``VectorStore``) asks it for documents on each turn, at the same
time as it reads memory (memory assembly runs in parallel with retrieval),
and ``assemble_context`` renders them in their own block section,
``RELEVANT DOCUMENTS (knowledge base)``, inside the same token budget
(``langmem_layer.read.block``). ``knowledge_store`` builds langchain-postgres's
``PGVectorStore`` on the memory's own database.

The other way, the user's recalled memories as a ``BaseRetriever`` for LCEL chains
(``memory.agents.as_retriever(user_id=...)``), is ``langmem_layer.facade.retriever``.
LangChain's retriever and vector-store classes are imported where a retriever is
used, not here: they bring LangSmith's tracing types, most of a second of start-up that
a command reading memory does not need.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langmem_layer.errors import ConfigurationError
from langmem_layer.tokens import TokenCounter
from langmem_layer.types import Recalled, utc_iso

if TYPE_CHECKING:
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore

__all__ = [
    "DEFAULT_KNOWLEDGE_TABLE",
    "document_lines",
    "dump_documents",
    "knowledge_retriever",
    "knowledge_store",
    "load_documents",
    "memory_document",
]

log = logging.getLogger(__name__)

#: The table ``knowledge_store`` creates when none is named.
DEFAULT_KNOWLEDGE_TABLE = "langmem_knowledge"
_WHITESPACE = re.compile(r"\s+")
_SOURCE_KEYS = ("source", "title", "url", "path", "file_path")


def knowledge_retriever(source: BaseRetriever | VectorStore | None, *, k: int
                        ) -> BaseRetriever | None:
    """The retriever the layer queries: ``source`` itself, or a vector store's retriever.

    Args:
        source: A LangChain retriever or vector store, or None (no knowledge source).
        k: Documents a vector store returns per query (a retriever keeps its own).

    Raises:
        ConfigurationError: ``source`` is neither (a ValueError).
    """
    if source is None:
        return None
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore

    if isinstance(source, BaseRetriever):
        return source
    if isinstance(source, VectorStore):
        return source.as_retriever(search_kwargs={"k": k})
    raise ConfigurationError(
        f"knowledge= takes a LangChain BaseRetriever or VectorStore, got "
        f"{type(source).__name__}; wrap other sources in a BaseRetriever subclass")


def knowledge_store(store_or_url: Any, *, embeddings: Embeddings,
                    table: str = DEFAULT_KNOWLEDGE_TABLE, vector_size: int | None = None,
                    schema: str = "public") -> Any:
    """langchain-postgres's ``PGVectorStore`` on the memory's database, its table created.

    The store (a ``PostgresMemoryStore``, sync or async) or the URL gives the
    database; connections are opened with psycopg from the same connection string,
    so the embedded server works as is. The table is created when missing and kept
    when it exists (its documents stay).

    Args:
        store_or_url: A ``PostgresMemoryStore`` / ``AsyncPostgresMemoryStore`` or a
            PostgreSQL URI.
        embeddings: Embeds documents and queries (any LangChain ``Embeddings``).
        table: The documents table.
        vector_size: Dimensions of ``embeddings``; measured by embedding one word when
            not given.
        schema: The table's schema.

    Returns:
        A ``langchain_postgres.PGVectorStore`` (add documents with ``add_documents``).

    Raises:
        ConfigurationError: The store's connection string cannot be found (a
            ValueError); pass the URL instead.
    """
    from langchain_postgres import PGEngine, PGVectorStore
    from sqlalchemy.exc import ProgrammingError

    dsn = _conninfo(store_or_url)

    async def connect() -> Any:
        return await psycopg.AsyncConnection.connect(dsn)

    # SQLAlchemy's async engine over psycopg, connecting through our own conninfo so any
    # libpq form (the embedded server's socket URI included) works without rewriting.
    engine = PGEngine.from_connection_string("postgresql+psycopg://", async_creator=connect)
    size = vector_size or len(embeddings.embed_query("dimensions"))
    try:
        engine.init_vectorstore_table(table, size, schema_name=schema)
    except ProgrammingError as e:
        if "already exists" not in str(e):
            raise
    return PGVectorStore.create_sync(engine, embeddings, table, schema_name=schema)


def _conninfo(store_or_url: Any) -> str:
    if isinstance(store_or_url, str):
        return store_or_url
    conn = getattr(store_or_url, "conn", None)
    info = getattr(conn, "conninfo", None)  # a psycopg_pool pool
    if isinstance(info, str) and info:
        return info
    dsn = getattr(getattr(conn, "info", None), "dsn", None)  # one psycopg connection
    if isinstance(dsn, str) and dsn:
        return dsn
    raise ConfigurationError(
        f"cannot find the connection string of {type(store_or_url).__name__}; pass the "
        "database URL to knowledge_store() instead")


def _source(doc: Document, n: int) -> str:
    for key in _SOURCE_KEYS:
        value = doc.metadata.get(key)
        if value:
            return str(value)
    return str(doc.id or f"document {n + 1}")


def document_lines(documents: Sequence[Document], counter: TokenCounter, *,
                   max_tokens: int) -> list[str]:
    """Block lines ``[<source>] <text>`` for retrieved documents, each cut to ``max_tokens``.

    The source is the first of the metadata's ``source``, ``title``, ``url``, ``path``
    or ``file_path``, else the document id. Empty documents and repeats are skipped.
    """
    lines: list[str] = []
    seen: set[str] = set()
    for n, doc in enumerate(documents):
        text = _WHITESPACE.sub(" ", doc.page_content or "").strip()
        if not text or text in seen:
            continue
        seen.add(text)
        lines.append(f"[{_source(doc, n)}] {counter.truncate(text, max_tokens)}")
    return lines


def dump_documents(documents: Iterable[Document]) -> list[dict[str, Any]]:
    """Documents as plain dicts for graph state (checkpointed with the thread)."""
    return [{"id": d.id, "page_content": d.page_content, "metadata": dict(d.metadata)}
            for d in documents]


def load_documents(state: Sequence[dict[str, Any]] | None) -> list[Document]:
    """The documents ``dump_documents`` wrote."""
    return [Document(page_content=d.get("page_content") or "", id=d.get("id"),
                     metadata=d.get("metadata") or {}) for d in state or []]


def memory_document(memory: Recalled) -> Document:
    """A recalled memory as a LangChain ``Document`` (content, id, kind, layer, score...)."""
    record = memory.record
    return Document(
        id=memory.key,
        page_content=record.content,
        metadata={
            "id": memory.key,
            "kind": record.kind.value,
            "layer": record.layer.value,
            "policy": record.policy.value,
            "score": memory.score,
            "occurred_at": utc_iso(record.occurred_at),
            "last_accessed_at": utc_iso(record.last_accessed_at),
            "due_at": utc_iso(record.due_at) if record.due_at else None,
            "namespace": list(memory.namespace),
        },
    )
