"""Benchmark: how long the ``langmem-layer`` command takes to answer, a new process each time.

A user at a terminal runs one command and waits for the process to end: the
interpreter's start, the imports, the embedded PostgreSQL's start and stop, and, for the
commands that embed (``search``, ``remember``), the local model's load. This times the
common commands that way on an existing data directory (``setup`` and a few memories
written first), each ``--runs`` times as a new process, the page cache warm (the files
were read by the set-up; a machine just booted reads them from disk once more).

The anchor, in the same run: ``langmem-layer --help`` (the interpreter and the command's
parser, no database and no model), so each command's ratio to it says what the command
itself adds. The target is at most 3 s for each.

Run:  .venv/bin/python benchmarks/cli_start.py [--runs 5] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import add_noise_option, header, scratch_dir

TARGET_SECONDS = 3.0
USER = "cli-bench-user"
COMMANDS: dict[str, list[str]] = {
    "--help (anchor)": ["--help"],
    "list": ["list", USER],
    "search": ["search", USER, "where did I move"],
    "remember": ["remember", USER, "I started learning the cello in May"],
}


def _cli() -> str:
    """The installed console script beside this interpreter."""
    script = Path(sys.executable).with_name("langmem-layer")
    if not script.exists():
        raise SystemExit(f"no langmem-layer beside {sys.executable}: install the package")
    return str(script)


def _run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[1:])} failed ({done.returncode}): "
                         f"{done.stderr.strip()[-400:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="new processes per command")
    p.add_argument("--data-dir", default=None,
                   help="the embedded server's directory (default: a temporary one)")
    add_noise_option(p)
    args = p.parse_args(argv)
    header("cli_start", allow_noisy=args.allow_noisy)
    cli = _cli()
    # Nothing may download at run time: the model comes inside its package.
    env = {k: v for k, v in os.environ.items() if k != "LANGMEM_DATABASE_URL"}
    env["HF_HUB_OFFLINE"] = "1"
    with scratch_dir(args.data_dir, "langmem-cli-start-") as data:
        base = [cli, "--data-dir", str(data)]
        _run([*base, "setup"], env)
        for text in ("I moved to Lisbon last year", "My cat is called Pixel",
                     "I prefer short answers"):
            _run([*base, "remember", USER, text], env)
        print(f"  {args.runs} new processes per command on an existing data dir "
              "(the embedded server started and stopped by each)")
        anchor = None
        for name, command in COMMANDS.items():
            times = [_run([*base, *command], env) for _ in range(args.runs)]
            p50 = statistics.median(times)
            anchor = anchor or p50
            verdict = "met" if max(times) <= TARGET_SECONDS else "NOT met"
            print(f"  {name:<16} p50 {p50:5.2f} s  max {max(times):5.2f} s  "
                  f"{p50 / anchor:5.1f}x the anchor  (target <= {TARGET_SECONDS:g} s: "
                  f"{verdict})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
