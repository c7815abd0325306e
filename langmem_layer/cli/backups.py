"""Backups from the shell: ``backup PATH`` and ``restore PATH --yes``.

Thin adapters over ``langmem_layer.store.backup`` on the configured database (the
``--database-url``, else ``LANGMEM_DATABASE_URL``, else the embedded one); see
docs/operating.md.
"""

from __future__ import annotations

import argparse

from langmem_layer.cli.commands import Command, Failure
from langmem_layer.jobs import JobContext

__all__ = ["COMMANDS"]


def _backup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="the backup file to write")


def _backup(args: argparse.Namespace, ctx: JobContext | None) -> int:
    from langmem_layer.environment import database_url
    from langmem_layer.store.backup import backup

    url = database_url(args.database_url, data_dir=args.data_dir, create=False)
    written = backup(url, args.path)
    print(f"backed up to {written} ({written.stat().st_size:,} bytes)")
    return 0


def _restore_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="a file written by `backup`")
    parser.add_argument("--yes", action="store_true",
                        help="confirm: the database becomes the backup's (later writes go)")


def _restore(args: argparse.Namespace, ctx: JobContext | None) -> int:
    from langmem_layer.environment import database_url
    from langmem_layer.store.backup import restore

    if not args.yes:
        raise Failure("restore replaces the database with the backup's contents (what "
                      "was written since is lost): run it again with --yes")
    restore(database_url(args.database_url, data_dir=args.data_dir), args.path)
    print(f"restored from {args.path}")
    return 0


#: The backup commands, merged into ``langmem_layer.cli.main.COMMANDS``.
COMMANDS: dict[str, Command] = {
    "backup": Command("write a consistent backup of the memory database (pg_dump)",
                      _backup_arguments, _backup, uses_store=False),
    "restore": Command("replace the memory database with a backup (needs --yes)",
                       _restore_arguments, _restore, uses_store=False),
}
