"""The ``langmem-layer`` command: schema setup, export/import of a user, the maintenance
jobs and the extraction worker.

The database is ``--database-url`` (or ``LANGMEM_DATABASE_URL``); without one, the
embedded PostgreSQL in ``--data-dir`` (or ``LANGMEM_DATA_DIR``, default ``.langmem``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from langmem_layer.config import open_store
from langmem_layer.errors import LangmemError
from langmem_layer.jobs import JOBS, Job, JobContext

__all__ = ["COMMANDS", "Command", "main"]

PROG = "langmem-layer"
#: SQLSTATE ``undefined_table``: the schema was never created in this database.
_UNDEFINED_TABLE = "42P01"

def _always(args: argparse.Namespace) -> bool:
    return True


def _never(args: argparse.Namespace) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand.

    Attributes:
        help: One line for ``--help``.
        add_arguments: Adds the command's own arguments to its parser.
        handler: Runs the command on an open store; returns the exit code.
        needs_embeddings: Whether the store needs its embedding index for these
            arguments (opening without one loads no model).
        uses_store: False for commands that never touch the database.
    """

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace, JobContext | None], int]
    needs_embeddings: Callable[[argparse.Namespace], bool] = _never
    uses_store: bool = True


class _Failure(Exception):
    """A one-line error for the user (no traceback)."""


# -- commands -------------------------------------------------------------------------


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def _setup(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    applied = ctx.store.setup()
    print(f"schema up to date; applied migrations: {applied or 'none'}")
    return 0


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id")
    parser.add_argument("-o", "--output", help="file (default: standard output)")


def _export(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    text = json.dumps(ctx.layer.export(args.user_id), indent=2, ensure_ascii=False)
    if args.output:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
    return 0


def _import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id")
    parser.add_argument("file")


def _read_export(path: str) -> dict[str, Any]:
    """The JSON object in ``path``; a :class:`_Failure` when it cannot be one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _Failure(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _Failure(f"cannot read {path}: {e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise _Failure(f"{path} is not valid JSON: {e}") from None
    # The library checks the format marker; a non-object has no marker to check.
    if not isinstance(data, dict):
        raise _Failure(f"{path} is not a langmem_layer export (expected a JSON object)")
    return data


def _import(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    # Read before touching the database, so a wrong path fails fast and alone.
    data = _read_export(args.file)
    try:
        count = ctx.layer.import_(args.user_id, data)
    except (KeyError, TypeError, AttributeError) as e:
        # The format marker was right but an item or link is malformed.
        raise _Failure(f"{args.file} is not a valid langmem_layer export: "
                       f"{type(e).__name__}: {e}") from None
    print(f"imported {count} items")
    return 0


def _delete_user_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id")
    parser.add_argument("--yes", action="store_true",
                        help="confirm: the user's data cannot be recovered")


def _delete_user(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    if not args.yes:
        raise _Failure(f"delete-user erases everything stored for {args.user_id!r} and "
                       "cannot be undone: run it again with --yes")
    deleted = ctx.layer.delete_user(args.user_id)
    rows = ", ".join(f"{table} {n}" for table, n in deleted.counts.items() if n)
    print(f"deleted {deleted.total} rows of user {args.user_id!r}" + (f": {rows}" if rows else ""))
    return 0


def _work_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="one pass over ready entries")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between polls")


def _work(args: argparse.Namespace, ctx: JobContext | None) -> int:
    """Run the ``extract`` job, then poll; Ctrl-C stops after the current pass."""
    assert ctx is not None
    try:
        while True:
            result = JOBS["extract"].run(ctx)
            if result.counts["extracted"] or result.failed:
                print(result.summary(), flush=True)
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


# -- jobs -----------------------------------------------------------------------------


def _job_arguments(job: Job) -> Callable[[argparse.ArgumentParser], None]:
    """The job's options as flags (``ttl_hours`` -> ``--ttl-hours``), all defaulting to
    None so that the job's own defaults apply."""
    def add(parser: argparse.ArgumentParser) -> None:
        for option in job.options:
            if option.type is bool:
                parser.add_argument(option.flag, dest=option.name, action="store_true",
                                    default=None, help=option.help)
            else:
                parser.add_argument(option.flag, dest=option.name, type=option.type,
                                    choices=option.choices, default=None, help=option.help)

    return add


def _job_options(job: Job, args: argparse.Namespace) -> dict[str, Any]:
    return {o.name: getattr(args, o.name) for o in job.options}


def _run_job(job: Job, ctx: JobContext, options: dict[str, Any],
             now: datetime | None = None) -> int:
    result = job.run(ctx, now=now, **options)
    print(result.summary())
    return 1 if result.failed else 0


def _job_command(job: Job) -> Command:
    """A command of its own for a job: ``langmem-layer sweep-ttl``."""
    def handle(args: argparse.Namespace, ctx: JobContext | None) -> int:
        assert ctx is not None
        return _run_job(job, ctx, _job_options(job, args))

    return Command(job.summary, _job_arguments(job), handle,
                   lambda args: job.embeds(_job_options(job, args)))


def _jobs_list(args: argparse.Namespace, ctx: JobContext | None) -> int:
    width = max(len(name) for name in JOBS)
    for job in sorted(JOBS.values(), key=lambda j: j.name):
        print(f"{job.name:<{width}}  {job.schedule or 'on demand':<9}  {job.summary}")
    return 0


def _iso_time(text: str) -> datetime:
    """A ``--now`` value; a time without a zone is UTC (the database stores UTC)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _jobs_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=sorted(JOBS), metavar="NAME",
                        help="a job from `jobs list`")
    parser.add_argument("--now", type=_iso_time, default=None,
                        help="run as if at this ISO 8601 time (default: now)")
    parser.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                        help="a job option, e.g. -O threshold=1000 (repeatable)")


def _jobs_run_options(args: argparse.Namespace) -> dict[str, Any]:
    job = JOBS[args.name]
    options: dict[str, Any] = {}
    for pair in args.option:
        key, sep, value = pair.partition("=")
        if not sep:
            raise _Failure(f"an option is KEY=VALUE, got {pair!r}")
        options[key] = job.option(key.replace("-", "_")).parse(value)
    return options


def _jobs_run(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    return _run_job(JOBS[args.name], ctx, _jobs_run_options(args), now=args.now)


def _jobs_run_embeds(args: argparse.Namespace) -> bool:
    return JOBS[args.name].embeds(_jobs_run_options(args))


#: Every subcommand by name; a name with a space is a nested command (``jobs run``).
COMMANDS: dict[str, Command] = {
    "setup": Command("create or upgrade the schema (idempotent)", _no_arguments, _setup),
    "export": Command("write a user's memory as JSON", _export_arguments, _export),
    "import": Command("load a JSON export into a user (re-embeds)", _import_arguments,
                      _import, _always),
    "delete-user": Command("erase everything stored for a user (needs --yes)",
                           _delete_user_arguments, _delete_user),
    **{name: _job_command(JOBS[name]) for name in
       ("sweep-ttl", "purge-embedding-cache", "sweep-sessions", "index-large-users")},
    "worker": Command("extract queued turns (until interrupted)", _work_arguments, _work,
                      _always),
    "jobs list": Command("list the maintenance jobs: name, schedule, summary",
                         _no_arguments, _jobs_list, uses_store=False),
    "jobs run": Command("run one maintenance job by name", _jobs_run_arguments, _jobs_run,
                        _jobs_run_embeds),
}

_GROUP_HELP = {"jobs": "list the maintenance jobs, or run one by name"}


# -- main -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    # None: resolved by langmem_layer.config (environment, then the embedded server).
    parser.add_argument("--database-url", default=None,
                        help="PostgreSQL URL (default: LANGMEM_DATABASE_URL, else embedded)")
    parser.add_argument("--data-dir", default=None,
                        help="the embedded server's directory (default: LANGMEM_DATA_DIR, "
                        "else .langmem)")
    groups: dict[tuple[str, ...], Any] = {
        (): parser.add_subparsers(dest="command", required=True, metavar="COMMAND")}
    for name, command in COMMANDS.items():
        *path, leaf = name.split()
        for depth in range(len(path)):
            if tuple(path[:depth + 1]) not in groups:
                group = groups[tuple(path[:depth])].add_parser(
                    path[depth], help=_GROUP_HELP.get(path[depth]))
                groups[tuple(path[:depth + 1])] = group.add_subparsers(
                    dest=f"command_{depth + 1}", required=True, metavar="COMMAND")
        sub = groups[tuple(path)].add_parser(leaf, help=command.help,
                                             description=command.help)
        command.add_arguments(sub)
        sub.set_defaults(command_name=name)
    return parser


def _missing_schema(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) is PostgreSQL's "no such table"."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, psycopg.Error) and seen.sqlstate == _UNDEFINED_TABLE:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _execute(command: Command, args: argparse.Namespace) -> int:
    if not command.uses_store:
        return command.handler(args, None)
    index = "default" if command.needs_embeddings(args) else None
    # index="default" is resolved inside the store, after the command line is parsed.
    with open_store(args.database_url, data_dir=args.data_dir, index=index) as store:
        ctx = JobContext(store, database_url=args.database_url, data_dir=args.data_dir)
        return command.handler(args, ctx)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    Errors a user can fix (a missing or malformed file, a database without the schema,
    any :class:`LangmemError`) print one line to standard error and return 1.
    """
    args = _parser().parse_args(argv)
    command = COMMANDS[args.command_name]
    try:
        return _execute(command, args)
    except (_Failure, LangmemError, psycopg.Error) as e:
        if _missing_schema(e):
            message = f"the database has no langmem schema; run `{PROG} setup` first"
        elif isinstance(e, psycopg.Error):
            raise  # a bug or a server problem: the traceback is the useful report
        else:
            message = str(e)
    # One line even when the server's message carries a hint on the next.
    line = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"{PROG}: {line}", file=sys.stderr)
    return 1

if __name__ == "__main__":
    raise SystemExit(main())
