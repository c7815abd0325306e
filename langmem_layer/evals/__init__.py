"""Fixture-driven evaluation of the whole memory pipeline: see
``langmem_layer.evals.fixtures`` for the fixture format and
``langmem_layer.evals.play`` for the phases and measures."""

from langmem_layer.evals.fixtures import Fixture, builtin_fixture_paths, load_fixtures
from langmem_layer.evals.play import EvalReport, FixtureResult, run_fixture, run_fixtures
from langmem_layer.evals.report import Thresholds, report_json, report_table, violations

__all__ = [
    "EvalReport",
    "Fixture",
    "FixtureResult",
    "Thresholds",
    "builtin_fixture_paths",
    "load_fixtures",
    "report_json",
    "report_table",
    "run_fixture",
    "run_fixtures",
    "violations",
]
