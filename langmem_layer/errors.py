"""Errors raised by langmem_layer.

Every error derives from ``LangmemError``, and each also inherits the built-in
error a caller would naturally catch (``ValueError`` for bad input, ``LookupError``
for a missing memory, ``ConnectionError`` for a database that went away), so code
written against the built-ins keeps working.
"""

from __future__ import annotations

from asyncio import InvalidStateError as _InvalidStateError

from langgraph.store.base import InvalidNamespaceError as _LangGraphInvalidNamespace

__all__ = [
    "AccessDeniedError",
    "ConcurrencyError",
    "ConfigurationError",
    "DatabaseNotFoundError",
    "DatabaseUnavailableError",
    "EmbeddingDimensionError",
    "EmbeddingError",
    "ExtractionError",
    "InvalidContentError",
    "InvalidFilterError",
    "InvalidInputError",
    "InvalidMemoryError",
    "InvalidNamespaceError",
    "LangmemError",
    "MemoryNotFoundError",
    "MissingUserError",
    "NotProceduralError",
    "OperationAppliedError",
    "PoolTimeoutError",
    "SchemaNotReadyError",
    "SyncCallOnEventLoopError",
]


#: The longest message an error carries. The messages name what to fix and quote a
#: short prefix of the input (``langmem_layer.sanitize.excerpt``); this bound keeps
#: any that quotes more (a value PostgreSQL echoed) from carrying a whole input.
MAX_MESSAGE = 2_000


class LangmemError(Exception):
    """Root of every error raised by langmem_layer."""

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str) and len(args[0]) > MAX_MESSAGE:
            text = args[0]
            args = (f"{text[:MAX_MESSAGE]}… (message cut from {len(text):,} characters)",
                    *args[1:])
        super().__init__(*args)


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


class NotProceduralError(LangmemError, ValueError):
    """The call applies to procedural memories (habits) only, and this memory is not one."""


class EmbeddingError(LangmemError, RuntimeError):
    """The embedding model kept failing after its retries; nothing was written."""


class ExtractionError(LangmemError, RuntimeError):
    """An extractor could not produce valid operations."""


class DatabaseUnavailableError(LangmemError, ConnectionError):
    """The PostgreSQL server cannot be reached or went away mid-operation."""


class InvalidInputError(LangmemError, ValueError):
    """PostgreSQL refused the caller's data: invalid (a NUL byte in text, a value out of
    range) or too large (a query too deeply nested, a row too big). Nothing was written.
    """


class ConcurrencyError(LangmemError, RuntimeError):
    """A transaction kept losing to concurrent ones (deadlock or serialization failure)
    after its retries; nothing was written and the batch may be run again.
    """


class OperationAppliedError(LangmemError, RuntimeError):
    """A ``MarkAppliedOp`` found its operation applied
    before; its batch was rolled back, so nothing of it was written. Run the batch again
    with the operation under ``ApplyOnceOp``, which skips
    what was applied instead of failing.
    """


class PoolTimeoutError(LangmemError, TimeoutError):
    """No pooled connection became free in time: the pool is too small for the load."""


class DatabaseNotFoundError(LangmemError, FileNotFoundError):
    """No embedded database exists in the data directory a read-only command was given
    (nothing was created there): a typo in the path, or ``setup`` never ran there."""


class SchemaNotReadyError(LangmemError, RuntimeError):
    """The store's tables do not exist: ``setup()`` has not been run on this database."""


class SyncCallOnEventLoopError(LangmemError, _InvalidStateError, RuntimeError):
    """A synchronous method of the async store cannot run now: it was called on the
    store's own event loop thread, where waiting for the loop would deadlock (use the
    ``a``-prefixed methods there), or the store has no running loop to hand work to.
    """


class AccessDeniedError(LangmemError, PermissionError):
    """A server request was refused: ``status`` 401 (no valid API key) or 403 (the
    request names another user's data)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
