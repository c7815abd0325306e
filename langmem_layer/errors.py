"""Errors raised by langmem_layer.

Every error derives from :class:`LangmemError`, and each also inherits the built-in
error a caller would naturally catch (``ValueError`` for bad input, ``LookupError``
for a missing memory, ``ConnectionError`` for a database that went away), so code
written against the built-ins keeps working.
"""

from __future__ import annotations

from langgraph.store.base import InvalidNamespaceError as _LangGraphInvalidNamespace

__all__ = [
    "ConfigurationError",
    "DatabaseUnavailableError",
    "EmbeddingDimensionError",
    "EmbeddingError",
    "ExtractionError",
    "InvalidContentError",
    "InvalidFilterError",
    "InvalidMemoryError",
    "InvalidNamespaceError",
    "LangmemError",
    "MemoryNotFoundError",
    "MissingUserError",
]


class LangmemError(Exception):
    """Root of every error raised by langmem_layer."""


class InvalidNamespaceError(LangmemError, _LangGraphInvalidNamespace):
    """A namespace is invalid, or would reach across users.

    It subclasses LangGraph's own ``InvalidNamespaceError`` (a ``ValueError``), which
    ``BaseStore`` methods raise for bad labels before a batch reaches the store.
    """


class InvalidFilterError(LangmemError, ValueError):
    """A search filter uses an unknown operator or a value of the wrong type."""


class InvalidContentError(LangmemError, ValueError):
    """Memory content is empty or longer than the configured maximum."""


class InvalidMemoryError(LangmemError, ValueError):
    """A value stored as a typed memory does not match the memory schema."""


class EmbeddingDimensionError(LangmemError, ValueError):
    """An embedding model returned vectors of a different size than configured."""


class MissingUserError(LangmemError, ValueError):
    """A graph run or API call has no user id to scope its memory to."""


class ConfigurationError(LangmemError, ValueError):
    """Settings or constructor arguments that cannot work together."""


class MemoryNotFoundError(LangmemError, LookupError):
    """No memory with the given id exists for this user."""


class EmbeddingError(LangmemError, RuntimeError):
    """The embedding model kept failing after its retries; nothing was written."""


class ExtractionError(LangmemError, RuntimeError):
    """An extractor could not produce valid operations."""


class DatabaseUnavailableError(LangmemError, ConnectionError):
    """The PostgreSQL server cannot be reached or went away mid-operation."""
