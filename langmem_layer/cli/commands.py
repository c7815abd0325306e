"""What a subcommand is: ``Command``, the table entry every command module adds to
``langmem_layer.cli.main.COMMANDS``, and the one-line failure a handler raises."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from langmem_layer.errors import LangmemError
from langmem_layer.jobs import JobContext
from langmem_layer.jobs.runs import Shard

__all__ = ["PROG", "Command", "Failure", "always", "iso_time", "never", "positive", "shard",
           "user_id"]

#: The command's name, as errors print it.
PROG = "langmem-layer"


def always(args: argparse.Namespace) -> bool:
    """``needs_embeddings`` of a command that always embeds."""
    return True


def never(args: argparse.Namespace) -> bool:
    """``needs_embeddings`` of a command that never embeds."""
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
        creates_database: True for the commands that set the schema up (``setup``,
            ``eval``); any other command pointed at a data directory without an
            embedded database says so instead of creating one there.
    """

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace, JobContext | None], int]
    needs_embeddings: Callable[[argparse.Namespace], bool] = never
    uses_store: bool = True
    creates_database: bool = False


class Failure(Exception):
    """A one-line error for the user (no traceback)."""


def user_id(text: str) -> str:
    """A ``USER`` argument: any non-blank text (argparse type)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "the user id is empty: pass the user's id, e.g. `alice`")
    return text


def positive(text: str) -> int:
    """A count argument (``--limit``): a whole number of at least 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}")
    return value


def iso_time(text: str) -> datetime:
    """A ``--now`` value; a time without a zone is UTC (the database stores UTC)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def shard(text: str) -> Shard:
    """A ``--shard I/N`` value (argparse type)."""
    try:
        return Shard.parse(text)
    except LangmemError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
