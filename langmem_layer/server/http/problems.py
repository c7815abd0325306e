"""Errors as RFC 9457 problem documents (``application/problem+json``).

Every error the app answers with is one: the library's own errors through the one
table ``STATUS_OF``, FastAPI's request-validation errors, HTTP errors raised by
routes (401 keeps its ``WWW-Authenticate``), and a body over the size limit (413). An
unexpected error answers 500 with a generic detail: its text may name internals.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from langmem_layer import errors
from langmem_layer.sanitize import redact

__all__ = ["PROBLEM_JSON", "STATUS_OF", "BodyLimit", "install", "problem", "status_of"]

PROBLEM_JSON = "application/problem+json"
_log = logging.getLogger(__name__)

#: HTTP status of each library error, most specific first (the first match wins).
STATUS_OF: tuple[tuple[type[Exception], int], ...] = (
    (errors.MemoryNotFoundError, 404),
    (errors.AccessDeniedError, 403),
    (errors.MissingUserError, 400),
    (errors.InvalidNamespaceError, 400),
    (errors.ConfigurationError, 400),
    (errors.NotProceduralError, 409),
    (errors.ConcurrencyError, 409),
    (errors.InvalidContentError, 422),
    (errors.InvalidMemoryError, 422),
    (errors.InvalidFilterError, 422),
    (errors.InvalidInputError, 422),
    (errors.EmbeddingDimensionError, 503),
    (errors.DatabaseUnavailableError, 503),
    (errors.PoolTimeoutError, 503),
    (errors.SchemaNotReadyError, 503),
    (errors.EmbeddingError, 503),
    (errors.ExtractionError, 503),
)

_TITLES = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 409: "Conflict", 413: "Content Too Large",
    415: "Unsupported Media Type", 422: "Unprocessable Content",
    500: "Internal Server Error", 503: "Service Unavailable",
}


def status_of(error: Exception) -> int:
    """The HTTP status of a library error (500 for any other error)."""
    for kind, status in STATUS_OF:
        if isinstance(error, kind):
            return status
    return 500


def problem(status: int, detail: str, *, type_: str = "about:blank",
            title: str | None = None, headers: Mapping[str, str] | None = None,
            **extra: Any) -> JSONResponse:
    """A problem document response.

    Args:
        status: The HTTP status.
        detail: What went wrong for this request, and how to fix it.
        type_: A URI naming the problem type (``about:blank``: the status says it).
        title: A short summary (default: the status's reason phrase).
        headers: Extra response headers.
        **extra: Extension members (``errors`` for validation errors).
    """
    # The last net for secrets: a connection string quoted anywhere in a detail is masked.
    body = {"type": type_, "title": title or _TITLES.get(status, "Error"), "status": status,
            "detail": redact(detail), **extra}
    return JSONResponse(jsonable_encoder(body), status_code=status, headers=dict(headers or {}),
                        media_type=PROBLEM_JSON)


def _error_type(error: Exception) -> str:
    return f"urn:langmem-layer:error:{type(error).__name__}"


def _count(request: Request, error: Exception) -> None:
    """Count the error by class for /metrics (when the app keeps metrics)."""
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.errors.labels(type(error).__name__).inc()


async def _library_error(request: Request, error: Exception) -> JSONResponse:
    _count(request, error)
    status = status_of(error)
    if status == 500:
        return await _unexpected(request, error)
    detail = str(error)
    if isinstance(error, errors.MemoryNotFoundError):
        # The same words whoever owns the id: nothing tells "another user's" apart.
        detail = "No such memory."
    return problem(status, detail, type_=_error_type(error),
                   title=type(error).__name__)


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    return problem(error.status_code, str(error.detail), headers=error.headers)


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    found = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
             for e in error.errors()]
    where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in found[:5])
    return problem(422, f"Invalid request: {where}", errors=found)


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    if not isinstance(error, errors.LangmemError):  # a library error was counted already
        _count(request, error)
    _log.exception("unhandled error on %s %s", request.method, request.url.path,
                   exc_info=error)
    return problem(500, "The server failed to handle the request; it has been logged.")


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` with a problem document."""
    app.add_exception_handler(errors.LangmemError, _library_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)


class _TooLarge(HTTPException):
    # An HTTPException, so the app's own handler answers it (and FastAPI's body
    # parsing lets it through instead of calling it a malformed body).
    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, _too_large(max_bytes))


def _too_large(max_bytes: int) -> str:
    return (f"The request body is over the limit of {max_bytes} bytes: send a smaller "
            "file, or raise the server's limit.")


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` answers 413 (problem document).

    A declared ``Content-Length`` over the limit is refused before the body is read; a
    body sent without one is counted as it arrives.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    await self._refuse(scope, receive, send)
                    return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(413, _too_large(self.max_bytes))
        await response(scope, receive, send)
