"""Run an ASGI app under uvicorn, stopping gracefully (exit status 0) on SIGTERM or SIGINT.

uvicorn's own runner shuts down gracefully on those signals and then raises the signal
again, so its process ends "killed by SIGTERM" (status -15 / 143) even after a clean
shutdown. A supervisor's stop is a normal end for this server: ``run`` returns
after the lifespan finished (extraction drained, store closed), and the process exits 0.

``python -m langmem_layer.server.http.serve module:app [--host H] [--port P]`` runs an app by
its import string.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import uvicorn

__all__ = ["GracefulServer", "main", "run"]

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulServer(uvicorn.Server):
    """A ``uvicorn.Server`` that does not re-raise the signal that stopped it."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Stop gracefully on SIGINT / SIGTERM (a second SIGINT forces the exit)."""
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def run(app: Any, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
        **config: Any) -> None:
    """Serve ``app`` until SIGTERM / SIGINT, then shut down gracefully and return.

    Args:
        app: The ASGI app, or its import string (``"module:attribute"``).
        host: The interface; the default serves loopback only.
        port: The TCP port.
        log_level: uvicorn's log level.
        **config: Other ``uvicorn.Config`` arguments.
    """
    config.setdefault("log_config", _log_config())
    GracefulServer(uvicorn.Config(app, host=host, port=port, log_level=log_level,
                                  **config)).run()


def _log_config() -> dict[str, Any]:
    """uvicorn's logging, with the library's INFO lines (where the database is, the
    model loaded) printed the same way as uvicorn's own; with ``LANGMEM_LOG_FORMAT=json``
    every line (uvicorn's too) is one JSON object, for a log collector."""
    import copy

    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["langmem_layer"] = {"handlers": ["default"], "level": "INFO",
                                          "propagate": False}
    if os.environ.get("LANGMEM_LOG_FORMAT", "").lower() == "json":
        for formatter in config["formatters"].values():
            formatter.clear()
            formatter["()"] = JsonFormatter
    return config


class JsonFormatter(logging.Formatter):
    """One JSON object per log record: time, level, logger, message (and the exception,
    if any). The messages themselves carry no memory text, key or password."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
                 "level": record.levelname, "logger": record.name,
                 "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m langmem_layer.server.http.serve module:app [--host H] [--port P]``."""
    parser = argparse.ArgumentParser(prog="python -m langmem_layer.server.http.serve")
    parser.add_argument("app", help="the app's import string, module:attribute")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    run(args.app, host=args.host, port=args.port, log_level=args.log_level)


if __name__ == "__main__":
    main()
