"""`make bench`: the benchmark suite at a modest scale, written to docs/results/ and
docs/benchmarks.md.

Runs each benchmark of ``SUITE`` as its own process, one after the other, and records
what it printed: the date, the commit, the machine (cores, memory), the 1-minute load
average before and after, the exact command, and the benchmark's own output verbatim.
Each benchmark's record is a fragment, ``docs/results/<name>.md``: the one source of the
figures. The pages that quote a figure include the fragment (``pymdownx.snippets``), and
``docs/benchmarks.md`` is assembled from all of them (a summary table, then each
fragment under its name). ``--only`` reruns some benchmarks: their fragments are
rewritten, the others kept, and the page assembled again. A benchmark of the suite that
has never run has a fragment saying "not recorded yet". The whole suite takes about
25-30 minutes on 2 cores, the waits for a quiet machine included (the run recorded at
1ab64d1 took 28 minutes; see the comments in ``SUITE`` for each benchmark's share);
the first run of ``recall_latency`` also writes its LoCoMo data, about 6 minutes, kept
in ``/tmp`` for the next.

A figure taken while the machine does other work measures the waiting, not the code. So
before each benchmark the runner reads the 1-minute load average; above ``--max-load``
(1.0) it waits, at most ``--max-wait`` seconds (120), for it to fall (a benchmark that
just ended leaves the load near 2 on two cores; with nothing else running it is below 1
again after about a minute). If the machine stays busy the benchmark is not run and its
fragment says "noisy: not recorded" instead of figures. A benchmark that fails is
recorded as failed, with its output. The fragment and the page are rewritten after every
benchmark, so an interrupted run keeps what it measured.

    .venv/bin/python benchmarks/run_all.py [--only serve_bench,http_bench]
        [--output docs/benchmarks.md] [--results docs/results] [--max-load 1.0]
        [--max-wait 120] [--list] [--assemble] [--from-page OLD_PAGE]

``--assemble`` only rebuilds the page from the fragments; ``--from-page`` splits a page
written by an earlier version of this runner (one section per benchmark) into fragments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
#: One fragment per benchmark of the suite, ``<name>.md``: what the pages include.
RESULTS = ROOT / "docs" / "results"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the suite: a script of ``benchmarks/`` and its arguments."""

    name: str  # the fragment's name, docs/results/<name>.md
    args: tuple[str, ...]
    what: str  # one line for the page
    script: str = ""  # benchmarks/<script>.py; the name when empty

    def argv(self, python: str) -> list[str]:
        """The command that runs it, from the repository root."""
        return [python, f"benchmarks/{self.script or self.name}.py", *self.args]


def _shown(python: str) -> str:
    # The page shows the command as typed at the repository root.
    path = Path(python)
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else python


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # the models ship with the packages
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)


#: The suite `make bench` runs, in order: each benchmark at a scale where the whole
#: run's benchmark time stays around 25-30 minutes on 2 cores (its docstring gives the
#: full-scale run). A later entry's expected wall time is noted beside it.
SUITE: tuple[Benchmark, ...] = (
    Benchmark("serve_bench", ("--users", "1,8,50", "--duration", "10"),
              "a served turn beside LangGraph's store alone, 1, 8 and 50 concurrent users"),
    Benchmark("serve_bench_vectors", ("--users", "1,50", "--duration", "10",
                                      "--embeddings", "hash"),
              "the same with an embedding model on both sides, 1 and 50 users",
              script="serve_bench"),
    Benchmark("recall_latency", ("--questions", "300", "--passes", "3"),
              "recall() and the block's read on LoCoMo, the query's embedding included"),
    # ~30 s: a data dir set up, then each command run five times as a new process.
    Benchmark("cli_start", ("--runs", "5"),
              "how long `langmem-layer list`, `search` and `remember` take as new "
              "processes on an existing data dir, against `--help`"),
    Benchmark("read_path_bench", ("--total", "100000", "--big", "10000", "--queries", "100"),
              "load_memory + assemble_context for a user of 10k memories in a store of 100k"),
    Benchmark("store_concurrency_bench", ("--n", "300", "--rounds", "2000", "--repeat", "1"),
              "many small concurrent async calls against LangGraph's AsyncPostgresStore"),
    Benchmark("http_bench", ("--users", "20", "--duration", "15"),
              "20 users of the HTTP app (LangServe agent and REST API) against in-process"),
    Benchmark("serving_floor", ("--users", "10", "--requests", "2000"),
              "the serving stack's own CPU per request: a one-node graph in process, "
              "through LangServe's routes and through a bare FastAPI route"),
    Benchmark("jobs_bench", ("--users", "200", "--memories", "200000"),
              "the nightly lifecycle over 200k memories, and the read path while it runs"),
    Benchmark("reflection_bench", ("--users", "50", "--threads", "1"),
              "consolidation, reflections and summaries for 50 users of 300 memories"),
    # ~1.5 min: two 30 s phases and the server's start and stop.
    Benchmark("http_bench_50", ("--users", "50", "--duration", "30"),
              "50 users of the HTTP app (LangServe agent and REST API) against in-process",
              script="http_bench"),
    # ~5 min: loading 1M memories (~15 s per 200k), the first night (~1.5 min), the
    # day's VACUUM, the next night, and the read path quiet and during each night.
    Benchmark("jobs_bench_1m", ("--users", "1000", "--memories", "1000000", "--explain"),
              "the nightly lifecycle over 1M memories of 1,000 users, the first night "
              "included, and the read path while it runs", script="jobs_bench"),
    # ~5-8 min: 300,000 memories loaded (COPY), consolidation and summaries for 1,000
    # users, each run again over the unchanged data (reflections and the procedural
    # profile are left to the 50-user run).
    Benchmark("reflection_bench_1000", ("--users", "1000", "--threads", "1",
                                        "--jobs", "consolidate,summarize"),
              "consolidation and summaries for 1,000 users of 300 memories",
              script="reflection_bench"),
    # ~1 min: the same two jobs for 50 users from two worker processes at once.
    Benchmark("reflection_workers", ("--users", "50", "--workers", "2", "--threads",
                                     "1", "--jobs", "consolidate,summarize"),
              "consolidation and summaries from two worker processes on one database: "
              "each user processed exactly once", script="reflection_bench"),
    # ~1-2 min: 12k memories loaded, a 10k-memory user indexed, 100 turns per mode.
    Benchmark("rls_bench", ("--total", "12000", "--big", "10000", "--queries", "100"),
              "the read path with and without row-level security, alternating, one run"),
    # <1 min: walking 20,000 users and a trivial per-user job, recorded and not.
    Benchmark("jobs_runner", ("--runner-only", "--runner-users", "20000"),
              "the job runner's own overhead over 20,000 users", script="jobs_bench"),
    # <1 min: one thread of 200 turns trimmed every turn.
    Benchmark("trim_bench", ("--turns", "200", "--data-dir", "/tmp/langmem-trim-bench"),
              "working-memory trimming per turn: planning, the handoff, load_memory"),
    # ~1-2 min: the 53 shipped fixtures, rule extractor, local model.
    Benchmark("fixture_eval", (),
              "`langmem-layer eval --offline`: the shipped fixtures' extraction and "
              "retrieval figures"),
    # ~1-2 min: the 2,760 LoCoMo turns and 759 questions embedded at both precisions.
    Benchmark("embedder_precision", (),
              "the local embedding model in int8 (ONNX, the default), float32 and bfloat16 "
              "(torch): LoCoMo recall@10 of the embedder alone, agreement, documents/s and "
              "query latency"),
    # ~3-5 min: a database of the oldest schema with a fixture (4) grown to 1M memories,
    # upgraded while served: every migration since, the data migrations included.
    Benchmark("migration_locks", ("--from", "04", "--memories", "1000000"),
              "an upgrade from an earlier schema at 1M memories while clients read and "
              "write: what their statements waited, the locks the upgrade held"),
    # ~10-15 min: writing the 2,760 turns with the local model (~6-9 min), then the 759
    # questions read three times (one per rrf_k of the grid), once per ablation row (7),
    # and the vector-only baseline; then the turns written again without subjects and
    # the questions asked once.
    Benchmark("locomo_eval", ("--data", "../shared/data/locomo-dev.json", "--ablation",
                              "--also-without-subjects"),
              "`langmem-layer eval locomo`: evidence in the memory block on LoCoMo, per "
              "category and conversation, leave-one-conversation-out, the ablation, and "
              "the turns written without subjects"),
    # ~5 min: the 2,760 turns written again (vectors cached in /tmp), the 759 questions
    # asked once; the training itself takes seconds.
    Benchmark("locomo_rerank", ("--data", "../shared/data/locomo-dev.json", "--vector-cache",
                                "/tmp/langmem-locomo-rerank/vectors.npz", "--data-dir",
                                "/tmp/langmem-locomo-rerank/pgdata", "--ablation", "--windows"),
              "the reranker's features and weights: leave-one-conversation-out on LoCoMo, "
              "before and after, and each part's held-out contribution"),
)


#: Benchmarks that need the local Citus cluster (``make citus``), so not part of the suite:
#: each runs by name only (``--only citus_bench``), is recorded as the suite's are, and
#: its fragment is shown on its own page (docs/scaling.md), not on the benchmarks page.
CLUSTER: tuple[Benchmark, ...] = (
    # ~10 min: 200k memories loaded on each side, then the faults (~1 min).
    Benchmark("citus_bench", ("--memories", "200000"),
              "the single server beside a Citus cluster of two workers: the read path, "
              "served turns and what each costs every process, the nightly lifecycle, "
              "a shard move and a worker restart under load"),
    # ~1 h: 1M memories loaded on each side (the large user's own index among them); the
    # read path, served turns and the nightly lifecycle at that size, no faults.
    Benchmark("citus_bench_1m", ("--memories", "1000000", "--skip-faults"),
              "the same comparison at 1M memories: the read path, served turns and the "
              "nightly lifecycle", script="citus_bench"),
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
              results: Path = RESULTS, *, page: Sequence[Benchmark] | None = None,
              log: Callable[[str], None] = print) -> list[Outcome]:
        """Run ``benches`` in order; after each, write its fragment in ``results`` and
        assemble ``output`` from the fragments of ``page`` (default: ``benches``)."""
        outcomes: list[Outcome] = []
        for bench in benches:
            log(f"{bench.name}: waiting for a quiet machine, then running")
            outcomes.append(self.one(bench))
            log(f"{bench.name}: {outcomes[-1].status}")
            if output is not None:
                results.mkdir(parents=True, exist_ok=True)
                (results / f"{bench.name}.md").write_text(fragment(outcomes[-1]),
                                                          encoding="utf-8")
                write_page(benches if page is None else page, results, output)
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


#: The status of a benchmark of the suite that has no fragment of its own yet.
NOT_YET = "not recorded yet"
_META = re.compile(r"\A<!-- run_all (\{.*?\}) -->\n")


def _meta_line(meta: dict[str, str]) -> str:
    # The summary table's row, kept in the fragment (invisible where it is included).
    return f"<!-- run_all {json.dumps(meta, ensure_ascii=False)} -->"


def fragment(o: Outcome) -> str:
    """``docs/results/<name>.md``: the outcome's metadata and output, verbatim."""
    after = "—" if o.load_after is None else f"{o.load_after:.2f}"
    meta = {"status": _status(o),
            "wall": "—" if o.seconds is None else f"{o.seconds:.0f} s",
            "load": f"{o.load_before:.2f} → {after}"}
    lines = [_meta_line(meta), "",
             f"- Date: {o.started.isoformat(timespec='seconds')}",
             f"- Commit: `{o.commit}`",
             f"- Machine: {o.machine}",
             f"- 1-minute load average before: {o.load_before:.2f}"
             + (f" (after waiting {o.waited:.0f} s)" if o.waited >= 1 else "")
             + ("" if o.max_load == common.MAX_LOAD else f" (limit {o.max_load})"),
             f"- 1-minute load average after: {after}",
             f"- Command: `{o.command}`"]
    if o.status == "noisy" and not o.output:
        lines += ["", f"Noisy: not recorded. The 1-minute load average stayed above "
                  f"{o.max_load} for {o.waited:.0f} s, so the benchmark was not run."]
        return "\n".join(lines) + "\n"
    if o.status == "noisy":
        lines += ["", "Noisy: not recorded. The benchmark found the machine busy and "
                  "measured nothing:"]
    elif o.status == "failed":
        lines += ["", f"Failed (exit {o.exit_code}); its output:"]
    fence = _fence(o.output)
    lines += ["", f"{fence}text", o.output.rstrip("\n"), fence]
    return "\n".join(lines) + "\n"


def not_yet(bench: Benchmark, python: str = sys.executable) -> str:
    """The fragment of a benchmark of the suite that has not been recorded."""
    shown = "HF_HUB_OFFLINE=1 " + shlex.join(bench.argv(_shown(python)))
    return "\n".join([
        _meta_line({"status": NOT_YET, "wall": "—", "load": "—"}), "",
        f"- Command: `{shown}`", "",
        "Not recorded yet: this benchmark joined the suite after its last run. "
        f"`make bench` (or `benchmarks/run_all.py --only {bench.name}`) on a quiet machine "
        "records it here."]) + "\n"


def _split(text: str) -> tuple[dict[str, str], str]:
    """A fragment's table row and its visible body."""
    found = _META.match(text)
    if not found:
        return {"status": "recorded", "wall": "—", "load": "—"}, text.strip("\n")
    return json.loads(found.group(1)), text[found.end():].strip("\n")


INTRO = (
    "Written by `make bench` (`benchmarks/run_all.py`) from what each benchmark "
    "printed; nothing on this page is edited by hand. Each benchmark ran as its own "
    "process, one after the other, and only when the 1-minute load average was at "
    "most the limit (1.0 unless said otherwise; the runner waits up to two minutes "
    "for it by default); otherwise the page says "
    "\"noisy: not recorded\" and shows no figures. Each benchmark's script and "
    "docstring (`benchmarks/`) say what it measures and against which baseline; "
    "read the figures with the machine and the load they were taken at. Each section "
    "is the file `docs/results/<name>.md`, which the other pages include where they "
    "quote its figures; a section rerun alone (`--only`) carries its own date and commit.")


def assemble(items: Sequence[tuple[Benchmark, str]]) -> str:
    """The page from the fragments: a summary table, then each fragment under its name."""
    lines = ["# Benchmarks", "", INTRO, "",
             "| Benchmark | What | Status | Wall time | Load before → after |",
             "|---|---|---|---|---|"]
    sections: list[str] = []
    for bench, text in items:
        meta, body = _split(text)
        lines.append(f"| [{bench.name}](#{bench.name}) | {bench.what} | {meta['status']} | "
                     f"{meta['wall']} | {meta['load']} |")
        sections += ["", f"## {bench.name}", "", body]
    return "\n".join(lines + sections) + "\n"


def render(outcomes: Sequence[Outcome], *, pending: Sequence[Benchmark] = ()) -> str:
    """The page for ``outcomes`` (and ``pending`` benchmarks, not recorded yet)."""
    return assemble([(o.bench, fragment(o)) for o in outcomes]
                    + [(b, not_yet(b)) for b in pending])


def read_fragments(benches: Sequence[Benchmark], results: Path) -> list[tuple[Benchmark, str]]:
    """Each benchmark's fragment in ``results``, "not recorded yet" when it has none."""
    out = []
    for bench in benches:
        path = results / f"{bench.name}.md"
        out.append((bench, path.read_text(encoding="utf-8") if path.is_file()
                    else not_yet(bench)))
    return out


def write_page(benches: Sequence[Benchmark], results: Path, output: Path) -> None:
    """Write each missing fragment ("not recorded yet"), then the page from them all."""
    results.mkdir(parents=True, exist_ok=True)
    items = read_fragments(benches, results)
    for bench, text in items:
        path = results / f"{bench.name}.md"
        if not path.is_file():
            path.write_text(text, encoding="utf-8")
    output.write_text(assemble(items), encoding="utf-8")


_ROW = re.compile(r"^\| (?:\[(?P<linked>[^\]]+)\]\(#[^)]*\)|(?P<plain>\S+)) \| .*? \| "
                  r"(?P<status>[^|]+) \| (?P<wall>[^|]+) \| (?P<load>[^|]+) \|$")


def fragments_from_page(text: str) -> dict[str, str]:
    """Split a page this runner wrote (table + one ``## name`` section each) into the
    fragments that would have written it: each section's text as it stands, its table
    row kept as the fragment's metadata. Nothing is retyped."""
    rows: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        found = _ROW.match(line)
        if found:
            name = found.group("linked") or found.group("plain")
            rows[name] = {k: found.group(k).strip() for k in ("status", "wall", "load")}
    out: dict[str, str] = {}
    for part in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        name, _, body = part.partition("\n")
        name = name.strip()
        if name not in rows or rows[name]["status"] in (NOT_YET, "not run yet"):
            continue
        out[name] = _meta_line(rows[name]) + "\n\n" + body.strip("\n") + "\n"
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--only", default="",
                   help="comma-separated names of SUITE (or CLUSTER) to run")
    p.add_argument("--output", type=Path, default=PAGE)
    p.add_argument("--results", type=Path, default=RESULTS,
                   help="the fragments' directory, one <name>.md per benchmark")
    p.add_argument("--max-load", type=float, default=common.MAX_LOAD)
    p.add_argument("--max-wait", type=float, default=120.0, help="seconds, per benchmark")
    p.add_argument("--list", action="store_true", help="print the suite's commands and stop")
    p.add_argument("--assemble", action="store_true",
                   help="run nothing: write the page from the fragments")
    p.add_argument("--from-page", type=Path, default=None, metavar="PAGE",
                   help="run nothing: split PAGE (as an earlier runner wrote it) into "
                   "fragments, then write the page from them")
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - {b.name for b in (*SUITE, *CLUSTER)}
    if unknown:
        p.error(f"not in the suite: {', '.join(sorted(unknown))}")
    benches = [b for b in (*SUITE, *CLUSTER) if b.name in names] if names else list(SUITE)
    runner = Runner(max_load=args.max_load, max_wait=args.max_wait)
    if args.list:
        for b in benches:
            print(shlex.join(b.argv(_shown(runner.python))))
        return 0
    if args.from_page is not None:
        found = fragments_from_page(args.from_page.read_text(encoding="utf-8"))
        args.results.mkdir(parents=True, exist_ok=True)
        for name, text in found.items():
            (args.results / f"{name}.md").write_text(text, encoding="utf-8")
        print(f"{args.from_page}: {len(found)} fragments: {', '.join(found)}")
    if args.from_page is not None or args.assemble:
        write_page(SUITE, args.results, args.output)
        print(f"wrote {args.output} from {args.results}")
        return 0
    outcomes = runner.suite(benches, args.output, args.results, page=SUITE)
    print(f"wrote {args.output}: " + ", ".join(f"{o.bench.name} {_status(o)}"
                                               for o in outcomes))
    return 0 if all(o.status != "failed" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
