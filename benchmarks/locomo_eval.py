"""Benchmark wrapper: ``langmem-layer eval locomo`` with the suite's header and footer.

The retrieval page's main table (what the memory block holds on LoCoMo, per category and
conversation, the vector-only baseline, and the leave-one-conversation-out
cross-validation of the block's settings) is what ``langmem-layer eval locomo PATH``
prints. That is a command of the library, not a benchmark script; this wrapper waits for
a quiet machine and prints the date, commit, machine, load average and command
(``common.header``) before it and the load average after, so ``make bench`` can record
it like the others. The evaluation writes every turn of the five conversations (about 6
minutes on 2 cores), asks the 759 questions once per ``rrf_k`` of the grid (and once per
ablation row with ``--ablation``), and deletes
what it wrote; the embedded server in ``--data-dir`` is kept for the next run.
``--also-without-subjects`` then runs it again with the turns written without their
speaker as subject (``eval locomo --no-subjects --no-cv``): what a deployment whose
messages carry no names gets.

Run:  .venv/bin/python benchmarks/locomo_eval.py [--data ../shared/data/locomo-dev.json]
          [--data-dir /tmp/langmem-locomo-eval] [--no-cv] [--ablation] [--sessions N]
          [--also-without-subjects]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import add_noise_option, header

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DATA, help="a LoCoMo JSON file")
    p.add_argument("--data-dir", default="/tmp/langmem-locomo-eval",
                   help="the embedded PostgreSQL's directory")
    p.add_argument("--no-cv", action="store_true",
                   help="skip the leave-one-conversation-out cross-validation")
    p.add_argument("--ablation", action="store_true",
                   help="also the ablation: one setting changed per row, same memories")
    p.add_argument("--sessions", type=int, default=None, metavar="N",
                   help="only the first N sessions of each conversation (a quick check)")
    p.add_argument("--also-without-subjects", action="store_true",
                   help="then run again with the turns written without a subject")
    add_noise_option(p)
    args = p.parse_args(argv)
    from langmem_layer.cli import main as cli

    command = ["--data-dir", args.data_dir, "eval", "locomo", str(args.data), "--no-progress",
               *(["--no-cv"] if args.no_cv else []),
               *(["--ablation"] if args.ablation else []),
               *(["--sessions", str(args.sessions)] if args.sessions else [])]
    header("locomo_eval", allow_noisy=args.allow_noisy)
    print("  runs: langmem-layer " + " ".join(command), flush=True)
    status = cli(command)
    if status or not args.also_without_subjects:
        return status
    again = [c for c in command if c not in ("--ablation", "--no-cv")] + ["--no-cv",
                                                                         "--no-subjects"]
    print("\n  runs: langmem-layer " + " ".join(again), flush=True)
    return cli(again)


if __name__ == "__main__":
    sys.exit(main())
