"""The evaluation report as a table or JSON, and the thresholds a run must meet."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langmem_layer.evals.play import EvalReport, FixtureResult

__all__ = ["Thresholds", "report_json", "report_table", "violations"]


@dataclass(frozen=True)
class Thresholds:
    """Minimums and maximums of the overall figures; None: not checked."""

    min_precision: float | None = None
    min_recall: float | None = None
    min_hit3: float | None = None
    min_checks: float | None = None
    max_duplicates: int | None = None
    max_leaks: int | None = None
    max_surfacing: int | None = None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _ratio(num: int, den: int) -> str:
    return "-" if not den else f"{num}/{den}"


def _row(r: FixtureResult) -> tuple[str, ...]:
    return (r.name, _ratio(r.correct, r.created), _ratio(r.found, r.expected),
            _ratio(r.hits, r.queries), _ratio(r.passed, r.checks),
            "-" if r.duplicates is None else str(r.duplicates), str(r.leaks), str(r.surfacing),
            "ok" if r.ok else "FAIL")


def report_table(report: EvalReport, *, failures: bool = True) -> str:
    """A plain-text table: one row per fixture, the totals, then each unmet expectation."""
    rows: list[tuple[str, ...]] = [("FIXTURE", "PRECISION", "RECALL", "HIT@3", "CHECKS", "DUPS",
                                    "LEAKS", "SURFACED", "")]
    rows += [_row(r) for r in report.results]
    rows.append((f"overall ({report.passed}/{len(report.results)} ok)",
                 _pct(report.precision), _pct(report.recall), _pct(report.hit3),
                 _pct(report.checks), str(report.duplicates), str(report.leaks),
                 str(report.surfacing), ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
             for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    lines.insert(0, f"extractor: {report.extractor}")
    if failures:
        for r in report.results:
            lines += [f"  {r.name}: {f}" for f in r.failures]
    return "\n".join(lines)


def report_json(report: EvalReport) -> dict[str, Any]:
    """The report as JSON-ready data: totals, then each fixture's figures and failures."""
    return {
        "extractor": report.extractor,
        "overall": {"fixtures": len(report.results), "passed": report.passed,
                    "precision": report.precision, "recall": report.recall,
                    "hit3": report.hit3, "checks": report.checks,
                    "duplicates": report.duplicates, "leaks": report.leaks,
                    "surfacing": report.surfacing},
        "fixtures": [{"name": r.name, "covers": r.covers, "created": r.created,
                      "correct": r.correct, "expected": r.expected, "found": r.found,
                      "queries": r.queries, "hits": r.hits, "checks": r.checks,
                      "passed": r.passed, "duplicates": r.duplicates, "leaks": r.leaks,
                      "surfacing": r.surfacing, "precision": r.precision, "recall": r.recall,
                      "hit3": r.hit3, "ok": r.ok, "failures": r.failures}
                     for r in report.results],
    }


def violations(report: EvalReport, thresholds: Thresholds) -> list[str]:
    """Each threshold the report does not meet, as a sentence (empty: all met)."""
    out: list[str] = []
    mins: Mapping[str, tuple[float | None, float | None]] = {
        "precision": (thresholds.min_precision, report.precision),
        "recall": (thresholds.min_recall, report.recall),
        "hit@3": (thresholds.min_hit3, report.hit3),
        "checks": (thresholds.min_checks, report.checks),
    }
    for name, (floor, value) in mins.items():
        if floor is not None and (value is None or value < floor):
            out.append(f"{name} {_pct(value)} is below {floor:.0%}")
    maxes = {"duplicates": (thresholds.max_duplicates, report.duplicates),
             "leaks": (thresholds.max_leaks, report.leaks),
             "surfacing violations": (thresholds.max_surfacing, report.surfacing)}
    for name, (ceiling, count) in maxes.items():
        if ceiling is not None and count > ceiling:
            out.append(f"{name} {count} is above {ceiling}")
    return out
