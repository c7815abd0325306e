"""``langmem-layer eval``: run the evaluation fixtures and gate on the figures.

``langmem-layer eval [PATHS...]`` runs fixture files or directories (default: the
shipped set) on the command's database, each fixture on user ids of its own that are
deleted afterwards. The first path may instead name a suite in ``SUITES``
(``langmem-layer eval locomo PATH``): a suite adds its own flags to the command and
gets the remaining paths.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langmem_layer.environment import settings_from_file
from langmem_layer.evals.fixtures import load_fixtures
from langmem_layer.evals.play import run_fixtures
from langmem_layer.evals.report import Thresholds, report_json, report_table, violations

__all__ = ["SUITES", "EvalSuite", "add_arguments", "handle"]


@dataclass(frozen=True, slots=True)
class EvalSuite:
    """A named evaluation besides the fixtures (``langmem-layer eval NAME PATHS...``).

    Attributes:
        help: One line for ``--help``.
        run: Runs it: ``(args, ctx, paths) -> exit code``.
        add_arguments: Adds the suite's own flags to the ``eval`` parser.
    """

    help: str
    run: Callable[[argparse.Namespace, Any, Sequence[str]], int]
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None


#: Suites by name; the fixture run is what ``eval`` does without one.
SUITES: dict[str, EvalSuite] = {}


def _locomo(args: argparse.Namespace, ctx: Any, paths: Sequence[str]) -> int:
    from langmem_layer.calibration.locomo import run_suite

    return run_suite(args, ctx, paths)


def _locomo_arguments(parser: argparse.ArgumentParser) -> None:
    from langmem_layer.calibration.locomo import add_arguments as locomo_arguments

    locomo_arguments(parser)


SUITES["locomo"] = EvalSuite(
    "LoCoMo evidence recall@k through the public API vs vector-only",
    _locomo, _locomo_arguments)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``eval`` command's arguments (and those of every suite in ``SUITES``)."""
    suites = "".join(f"; '{name} ...': {s.help}" for name, s in SUITES.items())
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="fixture files or directories (default: the shipped fixtures)"
                        + suites)
    parser.add_argument("--model", default=None, metavar="NAME",
                        help="extract with this chat model (OpenAI-compatible; default: "
                        "OPENAI_MODEL when OPENAI_API_KEY/OPENAI_BASE_URL is set, else rules)")
    parser.add_argument("--offline", action="store_true",
                        help="extract with the rule extractor even when a model is configured")
    parser.add_argument("--settings", default=None, metavar="FILE",
                        help="MemorySettings as a JSON object (nested gate/weights allowed), "
                        "over the LANGMEM_* environment")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run only fixtures whose name contains NAME (repeatable)")
    for flag, kind, what in (("--min-precision", float, "extraction precision"),
                             ("--min-recall", float, "extraction recall"),
                             ("--min-hit3", float, "retrieval hit@3"),
                             ("--min-checks", float, "share of state/rejection checks met"),
                             ("--max-duplicates", int, "duplicates created on re-run"),
                             ("--max-leaks", int, "cross-user/profile leaks"),
                             ("--max-surfacing", int, "surfacing violations")):
        bound = "at least" if flag.startswith("--min") else "at most"
        parser.add_argument(flag, type=kind, default=None,
                            help=f"exit 1 unless {what} is {bound} this"
                            + (" (a fraction, e.g. 0.9)" if kind is float else ""))
    for suite in SUITES.values():
        if suite.add_arguments is not None:
            suite.add_arguments(parser)


def _extractor(args: argparse.Namespace) -> tuple[Any, str]:
    from langmem_layer.environment import default_chat_model
    from langmem_layer.extract.rules import RuleExtractor

    if args.offline:
        return RuleExtractor(), "rules"
    if args.model:
        from langchain_openai import ChatOpenAI

        model: Any = ChatOpenAI(model=args.model)
    else:
        model = default_chat_model()
    if model is None:
        return RuleExtractor(), "rules"
    from langmem_layer.extract.llm import LLMExtractor

    name = args.model or os.environ.get("OPENAI_MODEL") or getattr(model, "model_name", "llm")
    return LLMExtractor(model), f"llm:{name}"


def handle(args: argparse.Namespace, ctx: Any) -> int:
    """Run the fixtures (or the suite the first path names); 1 when a threshold fails."""
    paths: list[str] = list(args.paths)
    if paths and paths[0] in SUITES:
        return SUITES[paths[0]].run(args, ctx, paths[1:])
    fixtures = load_fixtures(paths)
    if args.only:
        fixtures = [f for f in fixtures if any(o in f.name for o in args.only)]
    extractor, label = _extractor(args)
    ctx.store.setup()
    report = run_fixtures(ctx.store, fixtures, extractor=extractor, label=label,
                          settings=settings_from_file(args.settings), progress=True)
    if args.json:
        print(json.dumps(report_json(report), indent=2))
    else:
        print(report_table(report))
    unmet = violations(report, Thresholds(
        args.min_precision, args.min_recall, args.min_hit3, args.min_checks,
        args.max_duplicates, args.max_leaks, args.max_surfacing))
    for line in unmet:
        print(f"threshold not met: {line}", file=sys.stderr)
    return 1 if unmet else 0
