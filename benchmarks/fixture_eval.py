"""Benchmark wrapper: ``langmem-layer eval --offline`` with the suite's header and footer.

The evaluation page's table (each shipped fixture's extraction precision and recall,
retrieval hit@3, state and rejection checks, duplicates on re-run, cross-user leaks and
surfacing violations, with the rule extractor and the local MiniLM) is what
``langmem-layer eval --offline`` prints. That is a command of the library, not a
benchmark script; this wrapper waits for a quiet machine and prints the date, commit,
machine, load average and command (``common.header``) before it and the load average
after, so ``make bench`` can record it like the others. Each fixture runs on user ids of
its own, deleted afterwards; the embedded server in ``--data-dir`` is kept.

Run:  .venv/bin/python benchmarks/fixture_eval.py [--data-dir /tmp/langmem-fixture-eval]
          [--only NAME]
"""

from __future__ import annotations

import argparse
import sys

from common import add_noise_option, header


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--data-dir", default="/tmp/langmem-fixture-eval",
                   help="the embedded PostgreSQL's directory")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="only fixtures whose name contains NAME (a quick check)")
    add_noise_option(p)
    args = p.parse_args(argv)
    from langmem_layer.cli import main as cli

    command = ["--data-dir", args.data_dir, "eval", "--offline",
               *(x for name in args.only for x in ("--only", name))]
    header("fixture_eval", allow_noisy=args.allow_noisy)
    print("  runs: langmem-layer " + " ".join(command), flush=True)
    return cli(command)


if __name__ == "__main__":
    sys.exit(main())
