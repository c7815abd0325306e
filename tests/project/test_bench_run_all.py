"""`make bench`'s runner (benchmarks/run_all.py): the load gate, the page, the metadata.

Deterministic: a fake load reader and clock, and in place of a benchmark a tiny Python
process that prints a line; no benchmark is run here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402
from run_all import Benchmark, Runner, render  # noqa: E402

FAKE = Benchmark("fake_bench", ("--users", "3"), "a fake benchmark")
WHEN = datetime(2026, 11, 26, 4, 0, tzinfo=UTC)


class Clock:
    """A monotonic clock that moves only when the runner sleeps."""

    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def _loads(*values: float) -> Iterator[float]:
    yield from values
    while True:
        yield values[-1]


def _printing(line: str, code: int = 0, stderr: str = ""):  # type: ignore[no-untyped-def]
    """A stand-in for a benchmark: a real process printing ``line``; the argv it got."""
    seen: list[list[str]] = []

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        seen.append(argv)
        script = (f"import sys; print({line!r}); print({stderr!r}, file=sys.stderr); "
                  f"sys.exit({code})")
        return run_all._run([sys.executable, "-c", script])

    return run, seen


def _runner(loads: Iterator[float], run, clock: Clock) -> Runner:  # type: ignore[no-untyped-def]
    return Runner(python=sys.executable, read_load=lambda: next(loads), sleep=clock.sleep,
                  monotonic=clock, now=lambda: WHEN, commit=lambda: "abc1234",
                  machine=lambda: "2 cores, 8 GiB, Python 3.12.1, Linux x86_64", run=run)


def test_a_quiet_machine_runs_the_benchmark_at_once() -> None:
    clock = Clock()
    run, seen = _printing("p95 1.25 ms")
    outcome = _runner(_loads(0.4, 0.9), run, clock).one(FAKE)
    assert clock.slept == []
    assert seen == [[sys.executable, "benchmarks/fake_bench.py", "--users", "3"]]
    assert (outcome.status, outcome.exit_code, outcome.output) == ("recorded", 0,
                                                                   "p95 1.25 ms\n")
    assert (outcome.load_before, outcome.load_after, outcome.waited) == (0.4, 0.9, 0.0)
    assert outcome.command == ("HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/fake_bench.py "
                               "--users 3")


def test_the_runner_waits_for_the_load_to_fall_then_runs() -> None:
    clock = Clock()
    run, seen = _printing("done")
    outcome = _runner(_loads(1.8, 1.3, 0.7, 0.5), run, clock).one(FAKE)
    assert clock.slept == [10.0, 10.0] and outcome.waited == 20.0
    assert outcome.status == "recorded" and outcome.load_before == 0.7 and len(seen) == 1
    assert "after waiting 20 s" in render([outcome])


def test_a_machine_that_stays_busy_records_nothing() -> None:
    clock = Clock()
    run, seen = _printing("figures that must not appear")
    runner = _runner(_loads(1.5), run, clock)
    runner.max_wait, runner.poll = 120.0, 50.0
    outcome = runner.one(FAKE)
    assert seen == []  # not run at all
    assert clock.slept == [50.0, 50.0, 20.0]  # bounded by max_wait, exactly
    assert (outcome.status, outcome.load_before, outcome.waited) == ("noisy", 1.5, 120.0)
    page = render([outcome])
    assert "| noisy: not recorded |" in page
    assert "Noisy: not recorded. The 1-minute load average stayed above 1.0 for 120 s" in page
    assert "figures that must not appear" not in page and "```" not in page


def test_the_page_names_a_limit_other_than_the_default() -> None:
    clock = Clock()
    run, _ = _printing("x")
    runner = _runner(_loads(0.6), run, clock)
    runner.max_load, runner.max_wait = 0.5, 0.0
    page = render([runner.one(FAKE)])
    assert "- 1-minute load average before: 0.60 (limit 0.5)\n" in page
    assert "stayed above 0.5 for 0 s" in page and clock.slept == []


def test_a_benchmark_that_finds_the_machine_busy_itself_is_noisy() -> None:
    run, _ = _printing("fake_bench  2026-11-26", code=1,
                       stderr="fake_bench: the machine is busy (load average 1.2); ...")
    outcome = _runner(_loads(0.5), run, Clock()).one(FAKE)
    assert outcome.status == "noisy" and "| noisy: not recorded |" in render([outcome])


def test_a_failed_benchmark_is_recorded_as_failed_with_its_output() -> None:
    run, _ = _printing("half a table", code=3, stderr="Traceback: boom")
    outcome = _runner(_loads(0.5), run, Clock()).one(FAKE)
    page = render([outcome])
    assert outcome.status == "failed" and "| failed (exit 3) |" in page
    assert "Failed (exit 3); its output:" in page
    assert "half a table\n" in page and "Traceback: boom" in page


def test_the_page_carries_every_figures_metadata_and_the_output_verbatim() -> None:
    output = "serve_bench  header\n  users  turns/s\n  1      42.0\n  tricky ```` fence\n"
    run, _ = _printing(output.rstrip("\n"))
    outcome = _runner(_loads(0.25, 1.75), run, Clock()).one(FAKE)
    page = render([outcome])
    section = page.split("## fake_bench\n", 1)[1]
    for line in ("- Date: 2026-11-26T04:00:00+00:00", "- Commit: `abc1234`",
                 "- Machine: 2 cores, 8 GiB, Python 3.12.1, Linux x86_64",
                 "- 1-minute load average before: 0.25",
                 "- 1-minute load average after: 1.75",
                 "- Command: `HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/fake_bench.py "
                 "--users 3`"):
        assert line + "\n" in section, line
    # Verbatim, in a fence longer than any run of backticks in the output.
    assert f"\n`````text\n{output}`````\n" in section
    assert re.search(r"\| \[fake_bench\]\(#fake_bench\) \| a fake benchmark \| recorded \| "
                     r"\d+ s \| 0\.25 → 1\.75 \|", page)


def test_the_suite_rewrites_the_fragment_and_the_page_after_each_benchmark(
        tmp_path: Path) -> None:
    page, results = tmp_path / "benchmarks.md", tmp_path / "results"
    pages: list[str] = []
    run, _ = _printing("a figure")

    def recording(argv: list[str]) -> subprocess.CompletedProcess[str]:
        if page.exists():
            pages.append(page.read_text(encoding="utf-8"))
        return run(argv)

    second = Benchmark("other_bench", (), "another")
    outcomes = _runner(_loads(0.5), recording, Clock()).suite([FAKE, second], page, results,
                                                               log=lambda _: None)
    assert [o.status for o in outcomes] == ["recorded", "recorded"]
    assert "| [other_bench](#other_bench) | another | not recorded yet | — | — |" in pages[0]
    final = page.read_text(encoding="utf-8")
    assert "not recorded yet" not in final
    assert final.count("```text\na figure\n```") == 2
    for name in ("fake_bench", "other_bench"):
        assert "```text\na figure\n```" in (results / f"{name}.md").read_text(encoding="utf-8")


def test_only_rewrites_its_fragments_and_keeps_the_others(tmp_path: Path) -> None:
    page, results = tmp_path / "benchmarks.md", tmp_path / "results"
    results.mkdir()
    second = Benchmark("other_bench", (), "another")
    kept = ('<!-- run_all {"status": "recorded", "wall": "9 s", "load": "0.10 → 0.20"} -->'
            "\n\nold figures\n")
    (results / "other_bench.md").write_text(kept, encoding="utf-8")
    run, _ = _printing("new figures")
    _runner(_loads(0.5), run, Clock()).suite([FAKE], page, results,
                                             page=[FAKE, second], log=lambda _: None)
    assert (results / "other_bench.md").read_text(encoding="utf-8") == kept
    text = page.read_text(encoding="utf-8")
    assert "new figures" in text and "\n## other_bench\n\nold figures\n" in text
    assert "| [other_bench](#other_bench) | another | recorded | 9 s | 0.10 → 0.20 |" in text


def test_a_page_splits_into_fragments_that_assemble_it_again() -> None:
    run, _ = _printing("p50 3.0 ms")
    outcomes = [_runner(_loads(0.3, 0.4), run, Clock()).one(b)
                for b in (FAKE, Benchmark("other_bench", (), "another"))]
    page = render(outcomes)
    found = run_all.fragments_from_page(page)
    assert list(found) == ["fake_bench", "other_bench"]
    assert found["fake_bench"] == run_all.fragment(outcomes[0])
    assert render(outcomes) == run_all.assemble([(o.bench, found[o.bench.name])
                                                 for o in outcomes])


def test_a_benchmark_never_run_has_a_fragment_saying_so() -> None:
    text = run_all.not_yet(FAKE)
    assert "Not recorded yet" in text and "benchmarks/fake_bench.py --users 3" in text
    assert "| [fake_bench](#fake_bench) | a fake benchmark | not recorded yet | — | — |" in (
        render([], pending=[FAKE]))


def test_the_committed_page_is_the_committed_fragments_assembled() -> None:
    text = (BENCH.parent / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    results = BENCH.parent / "docs" / "results"
    for bench in run_all.SUITE:
        assert (results / f"{bench.name}.md").is_file(), f"no fragment for {bench.name}"
    assert text == run_all.assemble(run_all.read_fragments(run_all.SUITE, results))


def test_every_committed_fragment_is_a_recorded_run_of_its_benchmark() -> None:
    # Split from a page or written by a run, a recorded section names its commit and
    # holds the benchmark's own output, whose header names the same script.
    import re

    results = BENCH.parent / "docs" / "results"
    for bench in run_all.SUITE:
        text = (results / f"{bench.name}.md").read_text(encoding="utf-8")
        if '"status": "recorded"' not in text:
            continue
        assert re.search(r"- Commit: `[0-9a-f]{7,}`", text), bench.name
        script = bench.script or bench.name
        assert f"benchmarks/{script}.py" in text, bench.name
        assert "load average before" in text, bench.name


def test_every_benchmark_of_the_suite_takes_the_arguments_given() -> None:
    assert len(run_all.SUITE) >= 5
    for bench in run_all.SUITE:
        script = (BENCH / f"{bench.script or bench.name}.py").read_text(encoding="utf-8")
        for arg in bench.args:
            if arg.startswith("--"):
                assert f'"{arg}"' in script, f"{bench.name} has no option {arg}"


def test_make_bench_runs_the_suite() -> None:
    makefile = (BENCH.parent / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    assert "benchmarks/run_all.py" in recipe


def test_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_all.main(["--list", "--only", "http_bench"]) == 0
    assert capsys.readouterr().out.endswith(
        "benchmarks/http_bench.py --users 20 --duration 15\n")
    with pytest.raises(SystemExit):
        run_all.main(["--only", "no_such_bench"])
    assert "not in the suite: no_such_bench" in capsys.readouterr().err


def test_the_command_line_splits_a_page_and_assembles_without_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = BENCH.parent / "docs" / "benchmarks.md"
    page, results = tmp_path / "benchmarks.md", tmp_path / "results"
    assert run_all.main(["--from-page", str(old), "--output", str(page),
                         "--results", str(results)]) == 0
    assert "fragments" in capsys.readouterr().out
    # Every benchmark of the suite has its fragment, and the page is the committed one.
    assert sorted(p.stem for p in results.glob("*.md")) == sorted(b.name for b in run_all.SUITE)
    assert page.read_text(encoding="utf-8") == old.read_text(encoding="utf-8")
    assert run_all.main(["--assemble", "--output", str(page), "--results", str(results)]) == 0
    assert page.read_text(encoding="utf-8") == old.read_text(encoding="utf-8")
