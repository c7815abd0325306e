"""The benchmarks share one percentile and one header, and no script imports another."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import common  # noqa: E402

#: Modules of helpers the scripts share, and the runner of the suite (`make bench`,
#: which runs the scripts as processes); every other file is a script.
SHARED = {"common", "workload", "served_app", "run_all"}


def test_one_percentile_definition() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    # NumPy's default (linear interpolation): p50 of 1..10 is 5.5, p95 is 9.55.
    assert common.percentile(values, 50) == pytest.approx(5.5)
    assert common.percentile(values, 95) == pytest.approx(9.55)
    assert common.percentile([7.0], 95) == 7.0
    assert math.isnan(common.percentile([], 50))
    assert common.summary(values) == {"p50": pytest.approx(5.5), "p95": pytest.approx(9.55),
                                      "p99": pytest.approx(9.91), "max": 10.0}


def test_the_header_names_the_run(capsys, monkeypatch) -> None:
    monkeypatch.setattr(common, "load_average", lambda: (0.25, 0.5, 0.75))
    assert common.header("x_bench", argv=["x_bench.py", "--users", "5"]) is True
    out = capsys.readouterr().out
    assert out.startswith("x_bench  ") and "commit " in out
    assert "cores" in out and "GiB" in out
    assert "load average before: 0.25 0.50 0.75" in out
    assert "command: x_bench.py --users 5" in out


def test_a_busy_machine_measures_nothing_unless_allowed(capsys, monkeypatch) -> None:
    monkeypatch.setattr(common, "load_average", lambda: (3.5, 2.0, 1.0))
    with pytest.raises(SystemExit, match="busy"):
        common.header("x_bench", argv=["x"], wait_seconds=0)
    assert common.header("x_bench", argv=["x"], wait_seconds=0, allow_noisy=True) is False
    assert "NOISY" in capsys.readouterr().out


def test_no_script_imports_another() -> None:
    scripts = {p.stem for p in BENCH.glob("*.py")} - SHARED
    found = []
    for path in BENCH.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name} imports {n}" for n in names if n.split(".")[0] in scripts]
    assert found == []


def test_every_script_starts_with_the_header() -> None:
    for path in BENCH.glob("*.py"):
        if path.stem in SHARED:
            continue
        text = path.read_text(encoding="utf-8")
        assert "header(" in text and "add_noise_option(" in text, path.name
        # Percentiles come from common.percentile only.
        tops = {n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
        assert not tops & {"pct", "percentile", "_p95"}, path.name
        assert "quantiles(" not in text and "np.percentile(" not in text, path.name


def test_the_suites_own_output_does_not_make_the_checkout_dirty(tmp_path, monkeypatch) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "docs" / "results").mkdir(parents=True)
    for name in ("docs/benchmarks.md", "docs/results/x_bench.md", "code.py"):
        (tmp_path / name).write_text("v1\n", encoding="utf-8")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "init")
    monkeypatch.setattr(common, "ROOT", tmp_path)
    clean = common.commit()
    assert clean and not clean.endswith("+dirty")
    for name in ("docs/benchmarks.md", "docs/results/x_bench.md"):
        (tmp_path / name).write_text("v2\n", encoding="utf-8")
    assert common.commit() == clean  # the page and the fragments are the suite's output
    (tmp_path / "code.py").write_text("v2\n", encoding="utf-8")
    assert common.commit() == clean + "+dirty"


def test_a_scratch_directory_is_removed_unless_given(tmp_path) -> None:
    with common.scratch_dir(None, "langmem-test-scratch-") as made:
        assert made.is_dir() and made.name.startswith("langmem-test-scratch-")
    assert not made.exists()
    with common.scratch_dir(str(tmp_path), "langmem-test-scratch-") as given:
        assert given == tmp_path
    assert tmp_path.is_dir()
