"""`make bench`: the benchmark suite at a modest scale, written to docs/benchmarks.md.

Runs each benchmark of :data:`SUITE` as its own process, one after the other, and writes
the page from what they printed: for each, the date, the commit, the machine (cores,
memory), the 1-minute load average before and after, the exact command, and the
benchmark's own output verbatim. The whole suite takes about 20-25 minutes on 2 cores
(waits for a quiet machine included; the first run of ``recall_latency`` also writes its
LoCoMo data, about 6 minutes, kept in ``/tmp`` for the next).

A figure taken while the machine does other work measures the waiting, not the code. So
before each benchmark the runner reads the 1-minute load average; above ``--max-load``
(1.0) it waits, at most ``--max-wait`` seconds (120), for it to fall (a benchmark that
just ended leaves the load near 2 on two cores; with nothing else running it is below 1
again after about a minute). If the machine stays busy the benchmark is not run and the
page says "noisy: not recorded" instead of figures. A benchmark that fails is recorded
as failed, with its output. The page is rewritten after every benchmark, so an
interrupted run keeps what it measured.

    .venv/bin/python benchmarks/run_all.py [--only serve_bench,http_bench]
        [--output docs/benchmarks.md] [--max-load 1.0] [--max-wait 120] [--list]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import common

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the suite: a script of ``benchmarks/`` and its arguments."""

    name: str
    args: tuple[str, ...]
    what: str  # one line for the page

    def argv(self, python: str) -> list[str]:
        """The command that runs it, from the repository root."""
        return [python, f"benchmarks/{self.name}.py", *self.args]


def _shown(python: str) -> str:
    # The page shows the command as typed at the repository root.
    path = Path(python)
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else python


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # the models ship with the packages
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)


#: The suite `make bench` runs, in order: each benchmark at a scale where the whole
#: run stays around 20-25 minutes on 2 cores (its docstring gives the full-scale run).
SUITE: tuple[Benchmark, ...] = (
    Benchmark("serve_bench", ("--users", "1,8", "--duration", "10"),
              "a served turn beside LangGraph's store alone, 1 and 8 concurrent users"),
    Benchmark("recall_latency", ("--questions", "300"),
              "recall() and the block's read on LoCoMo, the query's embedding included"),
    Benchmark("read_path_bench", ("--total", "100000", "--big", "10000", "--queries", "100"),
              "load_memory + assemble_context for a user of 10k memories in a store of 100k"),
    Benchmark("store_concurrency_bench", ("--n", "300", "--rounds", "2000", "--repeat", "1"),
              "many small concurrent async calls against LangGraph's AsyncPostgresStore"),
    Benchmark("http_bench", ("--users", "20", "--duration", "15"),
              "20 users of the HTTP app (LangServe agent and REST API) against in-process"),
    Benchmark("jobs_bench", ("--users", "200", "--memories", "200000"),
              "the nightly lifecycle over 200k memories, and the read path while it runs"),
    Benchmark("reflection_bench", ("--users", "50", "--torch-threads", "1"),
              "consolidation, reflections and summaries for 50 users of 300 memories"),
)


@dataclass
class Outcome:
    """What one benchmark's turn in the suite gave."""

    bench: Benchmark
    command: str
    status: str  # "recorded", "noisy", "failed"
    started: datetime
    commit: str
    machine: str
    load_before: float
    max_load: float = common.MAX_LOAD  # the gate it passed or failed
    load_after: float | None = None
    waited: float = 0.0  # seconds spent waiting for a quiet machine
    seconds: float | None = None  # the benchmark's wall time
    exit_code: int | None = None
    output: str = ""


@dataclass
class Runner:
    """The suite's loop, with its clock, load reader and process runner injectable."""

    python: str = sys.executable
    max_load: float = common.MAX_LOAD
    max_wait: float = 120.0
    poll: float = 10.0
    read_load: Callable[[], float] = field(default=lambda: common.load_average()[0])
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    commit: Callable[[], str] = common.commit
    machine: Callable[[], str] = common.machine
    run: Callable[[list[str]], subprocess.CompletedProcess[str]] = _run

    def wait_for_quiet(self) -> tuple[bool, float, float]:
        """Wait (at most ``max_wait`` s) for the 1-minute load to be at most ``max_load``.

        Returns:
            Whether it was, the last load read, and the seconds waited.
        """
        start = self.monotonic()
        load = self.read_load()
        while load > self.max_load:
            waited = self.monotonic() - start
            if waited >= self.max_wait:
                return False, load, waited
            self.sleep(min(self.poll, self.max_wait - waited))
            load = self.read_load()
        return True, load, self.monotonic() - start

    def one(self, bench: Benchmark) -> Outcome:
        """Run ``bench`` if the machine is quiet; its outcome either way."""
        argv = bench.argv(self.python)
        calm, load, waited = self.wait_for_quiet()
        shown = "HF_HUB_OFFLINE=1 " + shlex.join(bench.argv(_shown(self.python)))
        outcome = Outcome(bench, shown, "noisy", self.now(), self.commit(), self.machine(),
                          load, max_load=self.max_load, waited=waited)
        if not calm:
            return outcome
        start = self.monotonic()
        done = self.run(argv)
        outcome.seconds = self.monotonic() - start
        outcome.load_after = self.read_load()
        outcome.exit_code = done.returncode
        # What it printed; its progress lines (stderr) only when it failed, to say why.
        outcome.output = done.stdout or ""
        # A benchmark's own header refuses a busy machine (exit with "is busy").
        busy = done.returncode != 0 and "the machine is busy" in (done.stderr or "")
        if done.returncode != 0:
            outcome.output += done.stderr or ""
        outcome.status = ("recorded" if done.returncode == 0
                          else "noisy" if busy else "failed")
        return outcome

    def suite(self, benches: Sequence[Benchmark], output: Path | None,
              log: Callable[[str], None] = print) -> list[Outcome]:
        """Run ``benches`` in order, rewriting ``output`` after each."""
        outcomes: list[Outcome] = []
        for bench in benches:
            log(f"{bench.name}: waiting for a quiet machine, then running")
            outcomes.append(self.one(bench))
            log(f"{bench.name}: {outcomes[-1].status}")
            if output is not None:
                output.write_text(render(outcomes, pending=benches[len(outcomes):]),
                                  encoding="utf-8")
        return outcomes


def _fence(text: str) -> str:
    # Longer than any run of backticks in the output, so nothing in it closes the block.
    longest = max((len(run) for run in text.split("\n") for run in _backtick_runs(run)),
                  default=0)
    return "`" * max(3, longest + 1)


def _backtick_runs(line: str) -> list[str]:
    runs, current = [], ""
    for ch in line:
        if ch == "`":
            current += ch
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


def _status(o: Outcome) -> str:
    if o.status == "noisy":
        return "noisy: not recorded"
    if o.status == "failed":
        return f"failed (exit {o.exit_code})"
    return "recorded"


EMPTY = """# Benchmarks

The figures on this page come from `make bench` (`benchmarks/run_all.py`), which runs
the benchmark suite at a modest scale on a quiet machine and rewrites this page from
what each benchmark printed. None are recorded yet.
"""


def render(outcomes: Sequence[Outcome], *, pending: Sequence[Benchmark] = ()) -> str:
    """The page: a summary table, then each benchmark's metadata and output verbatim."""
    if not outcomes and not pending:
        return EMPTY
    lines = [
        "# Benchmarks", "",
        "Written by `make bench` (`benchmarks/run_all.py`) from what each benchmark "
        "printed; nothing on this page is edited by hand. Each benchmark ran as its own "
        "process, one after the other, and only when the 1-minute load average was at "
        "most the limit (1.0 unless said otherwise; the runner waits up to two minutes "
        "for it by default); otherwise the page says "
        "\"noisy: not recorded\" and shows no figures. Each benchmark's script and "
        "docstring (`benchmarks/`) say what it measures and against which baseline; "
        "read the figures with the machine and the load they were taken at.", "",
        "| Benchmark | What | Status | Wall time | Load before → after |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        after = "—" if o.load_after is None else f"{o.load_after:.2f}"
        wall = "—" if o.seconds is None else f"{o.seconds:.0f} s"
        lines.append(f"| [{o.bench.name}](#{o.bench.name}) | "
                     f"{o.bench.what} | {_status(o)} | {wall} | "
                     f"{o.load_before:.2f} → {after} |")
    lines += [f"| {b.name} | {b.what} | not run yet | — | — |" for b in pending]
    for o in outcomes:
        lines += ["", f"## {o.bench.name}", "",
                  f"- Date: {o.started.isoformat(timespec='seconds')}",
                  f"- Commit: `{o.commit}`",
                  f"- Machine: {o.machine}",
                  f"- 1-minute load average before: {o.load_before:.2f}"
                  + (f" (after waiting {o.waited:.0f} s)" if o.waited >= 1 else "")
                  + ("" if o.max_load == common.MAX_LOAD else f" (limit {o.max_load})"),
                  "- 1-minute load average after: "
                  + ("—" if o.load_after is None else f"{o.load_after:.2f}"),
                  f"- Command: `{o.command}`"]
        if o.status == "noisy" and not o.output:
            lines += ["", f"Noisy: not recorded. The 1-minute load average stayed above "
                      f"{o.max_load} for {o.waited:.0f} s, so the benchmark was not run."]
            continue
        if o.status == "noisy":
            lines += ["", "Noisy: not recorded. The benchmark found the machine busy and "
                      "measured nothing:"]
        elif o.status == "failed":
            lines += ["", f"Failed (exit {o.exit_code}); its output:"]
        fence = _fence(o.output)
        lines += ["", f"{fence}text", o.output.rstrip("\n"), fence]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default="", help="comma-separated names of SUITE to run")
    p.add_argument("--output", type=Path, default=PAGE)
    p.add_argument("--max-load", type=float, default=common.MAX_LOAD)
    p.add_argument("--max-wait", type=float, default=120.0, help="seconds, per benchmark")
    p.add_argument("--list", action="store_true", help="print the suite's commands and stop")
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - {b.name for b in SUITE}
    if unknown:
        p.error(f"not in the suite: {', '.join(sorted(unknown))}")
    benches = [b for b in SUITE if not names or b.name in names]
    runner = Runner(max_load=args.max_load, max_wait=args.max_wait)
    if args.list:
        for b in benches:
            print(shlex.join(b.argv(_shown(runner.python))))
        return 0
    outcomes = runner.suite(benches, args.output)
    print(f"wrote {args.output}: " + ", ".join(f"{o.bench.name} {_status(o)}"
                                               for o in outcomes))
    return 0 if all(o.status != "failed" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
