"""A batch's embedding inputs: truncation, the per-user cache, the retry policy.

Free of I/O like the ``Plan`` that uses it: the plan
collects every text its handlers need embedded into an ``EmbeddingWork``, which
truncates them to the model's input limit, drops duplicates, asks for one cache
lookup, and after the model ran hands back each text's vector plus one upsert of the
new cache entries. The stores only run the queries and the model calls, each call
under a ``Retry`` (see ``langmem_layer.store.driver``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from langmem_layer.errors import EmbeddingDimensionError, EmbeddingError, LangmemError
from langmem_layer.sql import Sql
from langmem_layer.sql import cache as csql
from langmem_layer.tokens import get_token_counter

__all__ = [
    "CACHE_TTL",
    "RETRY_ATTEMPTS",
    "RETRY_BASE_DELAY",
    "EmbeddingWork",
    "Retry",
    "default_max_input_tokens",
    "document_hash",
    "parse_vector",
    "truncate_input",
]

logger = logging.getLogger("langmem_layer.embedding")

#: How long a cached vector is used.
CACHE_TTL = timedelta(days=30)
#: Attempts per embedding call: the first and two retries.
RETRY_ATTEMPTS = 3
#: Pause after the first failed attempt; it doubles after each further failure.
RETRY_BASE_DELAY = 0.5
#: OpenAI's embedding models count their input limit in this encoding.
TRUNCATION_ENCODING = "cl100k_base"
_OPENAI_LIMIT = 8191
_MINILM_LIMIT = 256


def default_max_input_tokens(model_id: str | None) -> int | None:
    """The input limit of a known model, or ``None`` (no truncation) for others.

    Args:
        model_id: The model name, possibly with a provider (``"openai:..."``) or
            organisation (``"sentence-transformers/..."``) in front.

    Returns:
        8191 for OpenAI ``text-embedding-*`` models, 256 for all-MiniLM-L6-v2 (its
        word-piece limit, counted here in cl100k tokens: an approximation, but the
        model truncates the rest itself and the cache key stays that of the text
        actually sent), otherwise ``None``.
    """
    if not model_id:
        return None
    name = model_id.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    if name.startswith("text-embedding-"):
        return _OPENAI_LIMIT
    if name == "all-MiniLM-L6-v2":
        return _MINILM_LIMIT
    return None


def truncate_input(text: str, max_tokens: int | None) -> str:
    """``text`` cut to ``max_tokens`` cl100k tokens (unchanged when ``None`` or shorter)."""
    # Byte-level BPE never makes more tokens than UTF-8 bytes, so short texts (nearly
    # all of them) skip tokenising altogether.
    if max_tokens is None or len(text.encode("utf-8")) <= max_tokens:
        return text
    cut = get_token_counter(TRUNCATION_ENCODING).truncate(text, max_tokens)
    if cut != text:
        # Lengths only: the text itself is user data and stays out of logs.
        logger.debug(
            "embedding input truncated from %d to %d characters (max_input_tokens=%d)",
            len(text), len(cut), max_tokens,
        )
    return cut


def document_hash(text: str) -> str:
    """Cache key of a document: sha256 of the exact text.

    Unlike ``langmem_layer.types.content_hash`` nothing is folded: case and
    spacing can change a vector, so only identical inputs may share one.
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_vector(text: str) -> list[float]:
    """Floats of pgvector's text form, e.g. ``"[0.1,-2,3e-05]"``."""
    body = text.strip()[1:-1]
    return [float(x) for x in body.split(",")] if body else []


class Retry:
    """The retry policy of one embedding call: 3 attempts, pauses of base, 2 x base.

    The execution job of ``langmem_layer.store.driver`` uses it for both stores::

        retry = Retry(self.embedding_retry_delay)
        while True:
            try:
                return (yield request)  # the store makes the model call
            except Exception as e:
                yield Sleep(retry.pause_after(e))

    Args:
        base_delay: Seconds to wait after the first failure (tests use 0).
        attempts: Attempts in all, the first included.
    """

    def __init__(self, base_delay: float = RETRY_BASE_DELAY, attempts: int = RETRY_ATTEMPTS):
        self.base_delay = base_delay
        self.attempts = attempts
        self.failures = 0

    def pause_after(self, exc: Exception) -> float:
        """Record a failed attempt and return the pause before the next one.

        Raises:
            EmbeddingError: Once no attempt is left (chained to ``exc``).
            LangmemError: At once, for a configuration problem (such as a missing
                local model) that no retry can fix.
        """
        self.failures += 1
        if isinstance(exc, LangmemError):
            raise exc
        if self.failures >= self.attempts:
            raise EmbeddingError(
                f"Embedding failed after {self.attempts} attempts: "
                f"{type(exc).__name__}: {exc}") from exc
        delay: float = self.base_delay * 2 ** (self.failures - 1)
        logger.warning(
            "embedding call failed (attempt %d of %d: %s: %s); retrying in %.2fs",
            self.failures, self.attempts, type(exc).__name__, exc, delay,
        )
        return delay


class _Doc(NamedTuple):
    text: str  # as sent to the model: truncated
    owner: str | None  # the user whose cache it goes to
    key: str | None  # document_hash(text) when cached, else None


class EmbeddingWork:
    """Every text of a batch to embed, and what the cache already knows of them.

    Args:
        model_id: The model; part of every cache key.
        dims: Expected vector size; checked on every vector, cached or fresh.
        max_tokens: Input limit texts are truncated to (``None``: no limit).
        now: The store clock's time for the batch; ``None`` disables the cache.
    """

    def __init__(
        self, *, model_id: str | None, dims: int | None, max_tokens: int | None,
        now: datetime | None,
    ) -> None:
        self.model_id = model_id
        self.dims = dims
        self.max_tokens = max_tokens
        self.now = now
        # The cache needs a model to key by, a size to check cached vectors against,
        # and a clock: plans built without them (nested ones) just pass texts through.
        self.caching = bool(model_id and dims and now is not None)
        self.docs: list[_Doc] = []
        self.queries: list[str] = []
        self._hits: dict[tuple[str, str], list[float]] = {}

    def add(self, documents: Sequence[str], queries: Sequence[str],
            owners: Sequence[str | None]) -> None:
        """Take one handler's texts; ``owners`` is parallel to ``documents`` or empty."""
        if owners and len(owners) != len(documents):
            raise ValueError(f"{len(owners)} owners for {len(documents)} documents")
        for i, raw in enumerate(documents):
            text = truncate_input(raw, self.max_tokens)
            # A plan that does not cache still keeps owners, to pass them on to the
            # plan around it (see Plan.embedding_request).
            owner = owners[i] if owners else None
            key = document_hash(text) if owner is not None and self.caching else None
            self.docs.append(_Doc(text, owner, key))
        self.queries.extend(truncate_input(q, self.max_tokens) for q in queries)

    def owners(self) -> set[str]:
        """The users whose cache this batch's documents go to."""
        return {d.owner for d in self.docs if d.owner is not None}

    def lookup(self) -> Sql | None:
        """The one statement reading this batch's cache entries, or ``None``."""
        keys = sorted({
            (d.owner, d.key) for d in self.docs if d.owner is not None and d.key is not None
        })
        if not keys or self.now is None:
            return None
        return csql.lookup_cached(self.model_id or "", keys, self.now - CACHE_TTL)

    def deliver_cache(self, rows: Sequence[dict[str, Any]]) -> None:
        """Take the lookup's rows; a vector of the wrong size is treated as a miss."""
        for row in rows:
            vec = parse_vector(row["embedding"])
            # Same model id, other size (e.g. a reconfigured `dimensions`): re-embed,
            # and the upsert then replaces the stale entry.
            if len(vec) == self.dims:
                self._hits[(row["user_id"], row["content_hash"])] = vec

    def misses(self) -> list[_Doc]:
        """Documents the model must embed: not cached, once per (owner, text)."""
        seen: dict[tuple[str | None, str], _Doc] = {}
        for d in self.docs:
            if d.key is None or (d.owner, d.key) not in self._hits:
                seen.setdefault((d.owner, d.text), d)
        return list(seen.values())

    def unique_queries(self) -> list[str]:
        """Queries the model must embed, once each."""
        return list(dict.fromkeys(self.queries))

    def deliver(
        self, doc_vectors: Sequence[Sequence[float]], query_vectors: Sequence[Sequence[float]]
    ) -> tuple[list[list[float]], list[list[float]], Sql | None]:
        """Vectors for ``misses`` and ``unique_queries``, in their order.

        Returns:
            Every document's vector and every query's, in the order they were added,
            and the upsert of the new cache entries (``None`` when there are none).

        Raises:
            EmbeddingDimensionError: A vector has the wrong size; nothing is written.
        """
        for vec in [*doc_vectors, *query_vectors]:
            if self.dims is not None and len(vec) != self.dims:
                raise EmbeddingDimensionError(
                    f"The embedding model {self.model_id!r} returned {len(vec)}-dimensional "
                    f"vectors but the store is configured with dims={self.dims}. Pass "
                    f"index={{'dims': {len(vec)}, ...}} (or the model that makes "
                    f"{self.dims}-dimensional vectors). Nothing was written."
                )
        fresh = {
            (d.owner, d.text): list(v)
            for d, v in zip(self.misses(), doc_vectors, strict=True)
        }
        by_query = {
            q: list(v) for q, v in zip(self.unique_queries(), query_vectors, strict=True)
        }
        docs: list[list[float]] = []
        new: dict[tuple[str, str], list[float]] = {}
        for d in self.docs:
            hit = None
            if d.owner is not None and d.key is not None:
                hit = self._hits.get((d.owner, d.key))
            if hit is not None:
                docs.append(hit)
                continue
            vec = fresh[(d.owner, d.text)]
            docs.append(vec)
            if d.owner is not None and d.key is not None:
                new[(d.owner, d.key)] = vec
        upsert = None
        if new and self.now is not None:
            rows = [(u, h, v) for (u, h), v in sorted(new.items())]
            upsert = csql.upsert_cached(self.model_id or "", rows, self.now)
        return docs, [by_query[q] for q in self.queries], upsert
