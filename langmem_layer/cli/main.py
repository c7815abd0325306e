"""The ``langmem-layer`` command: schema setup, export/import of a user, the maintenance
jobs and the extraction worker.

The database is ``--database-url`` (or ``LANGMEM_DATABASE_URL``); without one, the
embedded PostgreSQL in ``--data-dir`` (or ``LANGMEM_DATA_DIR``, default the per-user
data directory, ``~/.local/share/langmem-layer`` on Linux). Only ``setup`` (and ``eval``)
create a database; any other command given a directory without one says so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from langmem_layer.cli import backups, extraction, memories
from langmem_layer.cli.commands import (
    PROG,
    Command,
    Failure,
    always,
    iso_time,
    shard,
    user_id,
)
from langmem_layer.cli.server import (
    keys_create,
    keys_create_arguments,
    keys_list,
    keys_list_arguments,
    keys_revoke,
    keys_revoke_arguments,
    serve_http,
    serve_http_arguments,
)
from langmem_layer.environment import open_store, settings_from_env
from langmem_layer.errors import LangmemError
from langmem_layer.jobs import JOBS, Job, JobContext
from langmem_layer.jobs.runs import run as run_job
from langmem_layer.jobs.schedule import zone
from langmem_layer.jobs.status import counts_json, status
from langmem_layer.sanitize import redact

__all__ = ["COMMANDS", "Command", "main"]

#: SQLSTATE ``undefined_table``: the schema was never created in this database.
_UNDEFINED_TABLE = "42P01"



# -- commands -------------------------------------------------------------------------


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def _setup_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--distributed", action="store_true", default=None,
                        help="distribute the tables on Citus (the default when the "
                             "database has the citus extension)")


def _setup(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    applied = ctx.store.setup(distributed=args.distributed)
    print(f"schema up to date; applied migrations: {applied or 'none'}")
    return 0


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id", metavar="USER", type=user_id)
    parser.add_argument("-o", "--output", help="file (default: standard output)")


def _export(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    exported = ctx.layer.export(args.user_id)
    if not exported.get("items"):
        print(f"{PROG}: user {args.user_id!r} has no memories here (an empty export)",
              file=sys.stderr)
    text = json.dumps(exported, indent=2, ensure_ascii=False)
    if args.output:
        try:
            Path(args.output).write_text(text + "\n", encoding="utf-8")
        except OSError as e:
            raise Failure(f"cannot write {args.output}: {e.strerror or e}") from None
    else:
        sys.stdout.write(text + "\n")
    return 0


def _import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id", metavar="USER", type=user_id)
    parser.add_argument("file")


def _read_export(path: str) -> dict[str, Any]:
    """The JSON object in ``path``; a ``Failure`` when it cannot be one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise Failure(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise Failure(f"cannot read {path}: {e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise Failure(f"{path} is not valid JSON: {e}") from None
    # The library checks the format marker; a non-object has no marker to check.
    if not isinstance(data, dict):
        raise Failure(f"{path} is not a langmem_layer export (expected a JSON object)")
    return data


def _import(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    # Read before touching the database, so a wrong path fails fast and alone.
    data = _read_export(args.file)
    try:
        count = ctx.layer.import_(args.user_id, data)
    except (KeyError, TypeError, AttributeError) as e:
        # The format marker was right but an item or link is malformed.
        raise Failure(f"{args.file} is not a valid langmem_layer export: "
                       f"{type(e).__name__}: {e}") from None
    print(f"imported {count} items")
    return 0


def _import_langmem_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id", metavar="USER", type=user_id)
    parser.add_argument("--namespace", nargs="+", metavar="LABEL",
                        help="LangMem's namespace prefix (default: memories USER_ID)")
    parser.add_argument("--profile", help="where the memories go (default: work)")


def _import_langmem(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    done = ctx.layer.agents.import_langmem(args.user_id, namespace=args.namespace,
                                    profile=args.profile)
    print(f"LangMem items: {done.found}; imported {len(done.written)}, already known "
          f"{len(done.reinforced)}, imported before {done.replayed}, skipped "
          f"{len(done.skipped)}")
    for line in done.skipped:
        print(f"  skipped {line}")
    return 0


def _delete_user_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id", metavar="USER", type=user_id)
    parser.add_argument("--yes", action="store_true",
                        help="confirm: the user's data cannot be recovered")
    parser.add_argument("--keep-keys", action="store_true",
                        help="keep the user's API keys (reset their memory, not their access)")


def _delete_user(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    if not args.yes:
        raise Failure(f"delete-user erases everything stored for {args.user_id!r} and "
                       "cannot be undone: run it again with --yes")
    deleted = ctx.layer.delete_user(args.user_id, keep_keys=args.keep_keys)
    rows = ", ".join(f"{table} {n}" for table, n in deleted.counts.items() if n)
    print(f"deleted {deleted.total} rows of user {args.user_id!r}" + (f": {rows}" if rows else ""))
    return 0


def _mcp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (the client starts the server; default) or streamable "
                        "HTTP at http://HOST:PORT/mcp")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP interface (default: loopback)")
    parser.add_argument("--port", type=int, default=8000, help="HTTP port (default: 8000)")
    parser.add_argument("--user", default=None,
                        help="the user whose memory is served (default: LANGMEM_USER_ID); "
                        "over HTTP without one, each client sends an API key")
    parser.add_argument("--profile", default=None,
                        help="the default profile (default: LANGMEM_PROFILE, else the "
                        "settings' default); an HTTP connection may choose its own with "
                        "the X-Langmem-Profile header or ?profile=")
    parser.add_argument("--no-embeddings", action="store_true",
                        help="load no embedding model: lexical recall only, fast start")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _mcp(args: argparse.Namespace, ctx: JobContext | None) -> int:
    """Serve the memory over MCP until the client disconnects or Ctrl-C."""
    import asyncio
    import contextlib
    import signal

    try:
        from langmem_layer.server.mcp import serve
    except ImportError as e:  # the optional extra is missing
        raise Failure(f"the MCP server needs the mcp extra: pip install "
                       f"'langmem-layer[mcp]' ({e})") from None
    # SIGTERM (a client or supervisor stopping the server) shuts down as Ctrl-C does, so
    # the store closes and an embedded PostgreSQL stops with the server.
    signal.signal(signal.SIGTERM, _interrupt)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a server stops
        asyncio.run(serve(args.transport, database_url=args.database_url,
                          data_dir=args.data_dir, user_id=args.user, profile=args.profile,
                          host=args.host, port=args.port,
                          embeddings=not args.no_embeddings))
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
        scope = " (per user)" if job.per_user else ""
        print(f"{job.name:<{width}}  {job.schedule or 'on demand':<9}  {job.summary}{scope}")
    return 0


def _jobs_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=sorted(JOBS), metavar="NAME",
                        help="a job from `jobs list`")
    parser.add_argument("--now", type=iso_time, default=None,
                        help="run as if at this ISO 8601 time (default: now)")
    parser.add_argument("--option", "-O", action="append", default=[], metavar="KEY=VALUE",
                        help="a job option, e.g. -O threshold=1000 (repeatable)")
    parser.add_argument("--user", default=None, help="a per-user job for this user only")
    parser.add_argument("--shard", type=shard, default=None, metavar="I/N",
                        help="a per-user job for shard I of N of the users (e.g. 0/4)")
    parser.add_argument("--dry-run", action="store_true",
                        help="a per-user job run without writing anything; not recorded")
    parser.add_argument("--force", action="store_true",
                        help="run again a period that has already finished")


def _jobs_run_options(args: argparse.Namespace) -> dict[str, Any]:
    job = JOBS[args.name]
    options: dict[str, Any] = {}
    for pair in args.option:
        key, sep, value = pair.partition("=")
        if not sep:
            raise Failure(f"an option is KEY=VALUE, got {pair!r}")
        options[key] = job.option(key.replace("-", "_")).parse(value)
    return options


def _jobs_run(args: argparse.Namespace, ctx: JobContext | None) -> int:
    """Run a job through the runner: recorded, once per period unless ``--force``."""
    assert ctx is not None
    job = JOBS[args.name]
    run = run_job(ctx, job, now=args.now, user=args.user, shard=args.shard,
                  dry_run=args.dry_run, force=args.force, progress=True,
                  options=_jobs_run_options(args))
    if run.status == "done" and run.result is not None:
        print(run.result.summary())  # a whole-store job: its own line
    elif run.status in ("done", "dry-run"):
        print(run.table())
    else:
        print(run.summary())
    return 1 if run.failed else 0


def _when(value: datetime | None, tz: Any) -> str:
    return value.astimezone(tz).strftime("%Y-%m-%d %H:%M") if value else "-"


def _jobs_status_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--now", type=iso_time, default=None,
                        help="next due times as of this ISO 8601 time (default: now)")


def _jobs_status(args: argparse.Namespace, ctx: JobContext | None) -> int:
    """Each job's latest run: period, shard, times, counts, error, and when next due."""
    assert ctx is not None
    settings = settings_from_env()
    tz = zone(settings.jobs_timezone)
    rows = [("JOB", "PERIOD", "SHARD", "LAST RUN", "USERS",
             f"NEXT DUE ({settings.jobs_timezone})")]
    details: list[list[str]] = [[]]
    for st in status(JobContext(ctx.store, settings=settings), now=args.now):
        due = _due(st, tz)
        last = ("-" if st.started_at is None else _when(st.finished_at, tz)
                if st.finished_at else f"running since {_when(st.started_at, tz)}")
        rows.append((st.job, st.period or "never", st.shard or "-", last,
                     str(st.users) if st.started_at else "-", due))
        lines = []
        if st.started_at and (st.counts or st.tokens):
            tokens = f", {st.tokens} tokens" if st.tokens else ""
            lines.append(f"counts: {counts_json(st.counts)}{tokens}")
        if st.error:
            lines.append(f"error: {st.error}")
        details.append(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row, lines in zip(rows, details, strict=True):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        for line in lines:  # one indented line each, cut to the table's 100 columns
            print(_fit(f"    {line}"))
    return 0


#: The widest line ``jobs status`` prints.
STATUS_COLUMNS = 100


def _fit(line: str) -> str:
    return line if len(line) <= STATUS_COLUMNS else line[: STATUS_COLUMNS - 1] + "…"


def _due(st: Any, tz: Any) -> str:
    """When a job is next due; "now" says which period is waiting for the worker."""
    if not st.schedule:
        return "on demand"
    if st.due_now:
        return f"now ({st.due_period})"
    return _when(st.next_due, tz)


def _jobs_run_embeds(args: argparse.Namespace) -> bool:
    return JOBS[args.name].embeds(_jobs_run_options(args))


def _eval_arguments(parser: argparse.ArgumentParser) -> None:
    from langmem_layer.cli.evals import add_arguments

    add_arguments(parser)


def _eval(args: argparse.Namespace, ctx: JobContext | None) -> int:
    from langmem_layer.cli.evals import handle

    return handle(args, ctx)


def _calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    from langmem_layer.calibration.calibrate import add_arguments

    add_arguments(parser)


def _calibrate(args: argparse.Namespace, ctx: JobContext | None) -> int:
    from langmem_layer.calibration.calibrate import handle

    return handle(args, ctx)


#: Every subcommand by name; a name with a space is a nested command (``jobs run``).
COMMANDS: dict[str, Command] = {
    "setup": Command("create or upgrade the schema (idempotent)", _setup_arguments, _setup,
                     creates_database=True),
    "export": Command("write a user's memory as JSON", _export_arguments, _export),
    "import": Command("load a JSON export into a user (re-embeds)", _import_arguments,
                      _import, always),
    "import-langmem": Command("write the memories LangMem stored for a user as typed "
                              "memories (idempotent)", _import_langmem_arguments,
                              _import_langmem, always),
    "delete-user": Command("erase everything stored for a user (needs --yes)",
                           _delete_user_arguments, _delete_user),
    **backups.COMMANDS,
    **memories.COMMANDS,
    **{name: _job_command(JOBS[name]) for name in
       ("sweep-ttl", "purge-embedding-cache", "sweep-sessions", "index-large-users")},
    **extraction.COMMANDS,
    "mcp": Command("serve one user's memory to MCP clients (stdio or streamable HTTP)",
                   _mcp_arguments, _mcp, uses_store=False),
    "jobs list": Command("list the maintenance jobs: name, schedule, summary",
                         _no_arguments, _jobs_list, uses_store=False),
    "jobs run": Command("run one maintenance job by name (once per period; recorded)",
                        _jobs_run_arguments, _jobs_run, _jobs_run_embeds),
    "jobs status": Command("each job's last run and when it is next due",
                           _jobs_status_arguments, _jobs_status),
    "keys create": Command("create an API key for a user; prints it once",
                           keys_create_arguments, keys_create),
    "keys revoke": Command("revoke an API key", keys_revoke_arguments, keys_revoke),
    "keys list": Command("list a user's API keys (ids and roles, no secrets)",
                         keys_list_arguments, keys_list),
    "serve": Command("run the HTTP app: the memory agent (LangServe) and the REST API",
                     serve_http_arguments, serve_http, uses_store=False),
    "eval": Command("run the evaluation fixtures (or a named suite) and check thresholds",
                    _eval_arguments, _eval, always, creates_database=True),
    "calibrate": Command("derive retrieval settings for the embedder from labelled queries "
                         "(LoCoMo or fixtures) and show what they would change",
                         _calibrate_arguments, _calibrate, always, creates_database=True),
}

_GROUP_HELP = {"jobs": "list the maintenance jobs, run one by name, or show their runs",
               "keys": "create, revoke or list the API keys of the HTTP app"}


# -- main -----------------------------------------------------------------------------


def _global_options(parser: argparse.ArgumentParser, default: Any) -> None:
    # None: resolved by langmem_layer.environment (environment, then the embedded server).
    parser.add_argument("--database-url", default=default,
                        help="PostgreSQL URL (default: LANGMEM_DATABASE_URL, else embedded)")
    parser.add_argument("--data-dir", default=default,
                        help="the embedded server's directory (default: LANGMEM_DATA_DIR, "
                        "else the per-user data directory, ~/.local/share/langmem-layer "
                        "on Linux)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    _global_options(parser, None)
    # The same options after the command (`export ann --data-dir X`): SUPPRESS keeps a
    # value given before the command when none is given after it.
    after = argparse.ArgumentParser(add_help=False)
    _global_options(after, argparse.SUPPRESS)
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
                                             description=command.help, parents=[after])
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
    with open_store(args.database_url, data_dir=args.data_dir, index=index,
                    create=command.creates_database) as store:
        ctx = JobContext(store, database_url=args.database_url, data_dir=args.data_dir)
        return command.handler(args, ctx)


def _progress_on_terminal() -> None:
    """On a terminal, say what a command is waiting for (the database starting, the
    embedding model loading): the library's INFO lines, to standard error. Piped or
    captured output stays as it was."""
    import logging

    library = logging.getLogger("langmem_layer")
    if not sys.stderr.isatty() or any(getattr(h, _OURS, False) for h in library.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
    setattr(handler, _OURS, True)
    library.addHandler(handler)
    library.setLevel(logging.INFO)
    library.propagate = False  # printed once, not again by the last-resort handler


_OURS = "_langmem_cli"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code.

    Errors a user can fix (a missing or malformed file, a database without the schema,
    any ``LangmemError``) print one line to standard error and return 1.
    """
    args = _parser().parse_args(argv)
    command = COMMANDS[args.command_name]
    _progress_on_terminal()
    try:
        return _execute(command, args)
    except (Failure, LangmemError, psycopg.Error) as e:
        if _missing_schema(e):
            message = f"the database has no langmem schema; run `{PROG} setup` first"
        elif isinstance(e, psycopg.Error):
            raise  # a bug or a server problem: the traceback is the useful report
        else:
            message = str(e)
    # One line even when the server's message carries a hint on the next.
    line = "; ".join(part.strip() for part in message.splitlines() if part.strip())
    # No password reaches the terminal, whichever way the URL came in.
    line = redact(line, args.database_url, os.environ.get("LANGMEM_DATABASE_URL"))
    print(f"{PROG}: {line}", file=sys.stderr)
    return 1
