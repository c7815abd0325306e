"""A user's memories from the shell: ``list``, ``get``, ``search``, ``remember``, ``forget``.

Thin adapters over ``MemoryLayer``'s methods of the same names;
each prints a readable listing, or JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langmem_layer.cli.commands import Command, Failure, positive, user_id
from langmem_layer.jobs import JobContext
from langmem_layer.types import Kind, Recalled, Status

__all__ = ["COMMANDS"]

#: Characters of a memory's content shown per line in a listing (``--json`` has it whole).
_LINE = 72


def _row(found: Recalled) -> dict[str, Any]:
    rec = found.record
    # "profile", as the REST API names it (identity memories: profile "identity").
    return {"id": found.key, "profile": found.namespace[-1], "kind": rec.kind.value,
            "layer": rec.layer.value, "status": rec.status.value, "policy": rec.policy.value,
            "pinned": rec.pinned, "confidence": rec.confidence,
            "occurred_at": rec.occurred_at.isoformat(),
            "content": rec.content, **({"score": round(found.score, 4)} if found.score else {})}


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LINE else text[: _LINE - 1] + "…"


def _print(found: Sequence[Recalled], args: argparse.Namespace, *, empty: str,
           status: bool = False) -> None:
    """A listing: id, kind, (status, when ``status``: a listing of several) and text."""
    if args.json:
        print(json.dumps([_row(f) for f in found], indent=2, ensure_ascii=False))
        return
    if not found:
        print(empty)
        return
    for f in found:
        score = f"  {f.score:.3f}" if f.score else ""
        shown = f"{f.record.status.value:<13}" if status else ""
        print(f"{f.key}  {f.record.kind.value:<14} {shown}{_short(f.record.content)}{score}")


def _user(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id", metavar="USER", type=user_id, help="the user's id")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    _user(parser)
    parser.add_argument("--status", action="append", choices=[s.value for s in Status],
                        help="only memories of this status (repeatable; default: active)")
    parser.add_argument("--all", action="store_true", help="memories of every status")
    parser.add_argument("--profile", help="the profile besides identity (default: work)")
    parser.add_argument("--limit", type=positive, default=100, help="at most this many (100)")


def _list(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    statuses = None if args.all else (args.status or ["active"])
    found = ctx.layer.list(args.user_id, statuses=statuses, profile=args.profile,
                           limit=args.limit)
    _print(found, args, empty=f"no memories for user {args.user_id!r}",
           status=statuses is None or len(statuses) > 1)
    return 0


def _memory_arguments(parser: argparse.ArgumentParser) -> None:
    _user(parser)
    parser.add_argument("memory_id", metavar="ID", help="the memory's id (from `list`)")


def _get(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    found = ctx.layer.get(args.user_id, args.memory_id)
    if args.json:
        print(json.dumps(_row(found), indent=2, ensure_ascii=False))
    else:
        for key, value in _row(found).items():
            print(f"{key:<11} {value}")
    return 0


def _search_arguments(parser: argparse.ArgumentParser) -> None:
    _user(parser)
    parser.add_argument("query", metavar="QUERY", help="what to recall")
    parser.add_argument("--profile", help="the profile besides identity (default: work)")
    parser.add_argument("--limit", type=positive, default=None,
                        help="at most this many (default: the settings' recall_limit)")
    parser.add_argument("--no-embeddings", action="store_true",
                        help="load no embedding model: full-text and reference recall only")


def _search(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    found = ctx.layer.recall(args.user_id, args.query, profile=args.profile, limit=args.limit,
                             matching=True)
    _print(found, args, empty=f"nothing recalled for {args.query!r}")
    return 0


def _remember_arguments(parser: argparse.ArgumentParser) -> None:
    _user(parser)
    parser.add_argument("text", metavar="TEXT", nargs="?",
                        help="the memory, as it should be kept; - reads it from standard "
                        "input (a long or multi-line text)")
    parser.add_argument("--file", metavar="PATH",
                        help="read the memory's text from this file instead")
    parser.add_argument("--kind", choices=[k.value for k in Kind], default=None,
                        help="what it is (default: episodic_event, what was said; "
                        "profile_fact or preference for a fact)")
    parser.add_argument("--profile", help="where a non-identity memory goes (default: work)")
    parser.add_argument("--no-embeddings", action="store_true",
                        help="load no embedding model (the memory has no vector until "
                        "re-embedded)")


def _text(args: argparse.Namespace) -> str:
    """The memory's text: TEXT, standard input for ``-``, or ``--file``."""
    if (args.text is None) == (args.file is None):
        raise Failure("give the memory's text as TEXT, as - (standard input) or with "
                      "--file PATH, one of them")
    if args.file is not None:
        try:
            return Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise Failure(f"cannot read --file {args.file}: {e}") from None
    if args.text == "-":
        return sys.stdin.read()
    return str(args.text)


def _remember(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    text = _text(args)
    if args.kind:
        found = ctx.layer.remember(args.user_id, text, profile=args.profile,
                                   kind=Kind(args.kind))
    else:
        found = ctx.layer.remember(args.user_id, text, profile=args.profile)
    if args.json:
        print(json.dumps(_row(found), indent=2, ensure_ascii=False))
    else:
        print(f"remembered {found.key} ({found.record.kind.value})")
    return 0


def _forget_arguments(parser: argparse.ArgumentParser) -> None:
    _memory_arguments(parser)
    parser.add_argument("--hard", action="store_true",
                        help="delete it, its vectors and links, instead of archiving it")


def _forget(args: argparse.Namespace, ctx: JobContext | None) -> int:
    assert ctx is not None
    changed = ctx.layer.forget(args.user_id, args.memory_id, hard=args.hard)
    done = "deleted" if args.hard else "archived"
    print(f"{done} {args.memory_id}" if changed else f"{args.memory_id} was already {done}")
    return 0


def _embeds(args: argparse.Namespace) -> bool:
    return not args.no_embeddings


#: The memory commands, merged into ``langmem_layer.cli.main.COMMANDS``.
COMMANDS: dict[str, Command] = {
    "list": Command("list a user's memories (default: the active ones)", _list_arguments,
                    _list),
    "get": Command("show one memory of a user", _memory_arguments, _get),
    "search": Command("recall a user's memories for a query, best first",
                      _search_arguments, _search, _embeds),
    "remember": Command("write one memory for a user (through the content checks)",
                        _remember_arguments, _remember, _embeds),
    "forget": Command("archive a memory of a user (--hard deletes it)", _forget_arguments,
                      _forget),
}
