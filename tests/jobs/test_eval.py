"""The fixture-driven evaluation (``langmem-layer eval``): the shipped fixtures run
offline (rule extractor, local embedding model) on the suite's database, and the
figures must not drop below what the rule extractor reaches today."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from langmem_layer import MemoryLayer
from langmem_layer.cli import main
from langmem_layer.errors import ConfigurationError
from langmem_layer.evals import (
    EvalReport,
    Thresholds,
    load_fixtures,
    report_json,
    report_table,
    run_fixtures,
    violations,
)
from langmem_layer.store.embedding.default_embedder import LOCAL_DIMS, LOCAL_MODEL, LocalEmbeddings
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind

# Measured on the full shipped set with the library's default settings; a little
# under, so that any drop fails the build (see docs/evaluation.md).
MIN_PRECISION = 0.95
MIN_RECALL = 0.95
MIN_HIT3 = 1.0  # 53/53 with the MiniLM calibration profile (floors 0.10, standing preferences)
MIN_CHECKS = 0.95
MIN_FIXTURES = 40


class _Memo(Embeddings):
    """The local model, each distinct text embedded once (the eval repeats queries)."""

    def __init__(self) -> None:
        self.inner = LocalEmbeddings()
        self.cache: dict[str, list[float]] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            self.cache.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        return [self.cache[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@pytest.fixture(scope="module")
def report(pg_uri: str) -> EvalReport:
    index = {"embed": _Memo(), "dims": LOCAL_DIMS, "model_id": LOCAL_MODEL}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        return run_fixtures(store, load_fixtures())


def test_questions_that_share_no_word_with_their_answer_are_answered(report: EvalReport
                                                                       ) -> None:
    """The office -> the employer, jogging -> asthma, grew up -> origin, an explanation
    -> prefers short answers: no word in common, found by meaning or by what the
    memory is (a preference on how to answer comes to every turn)."""
    by_name = {r.name: r for r in report.results}
    for name in ("stable-fact-reinforced", "health", "origin-and-home",
                 "preferences-and-habits"):
        assert by_name[name].ok, (name, by_name[name])


def test_the_shipped_set_is_large_and_covers_seed_003(report: EvalReport) -> None:
    names = {r.name for r in report.results}
    assert len(names) >= MIN_FIXTURES
    for needed in ("stable-fact-reinforced", "hard-boundary", "correction-updates",
                   "explicit-forget", "do-not-bring-up", "open-loop-followed-up",
                   "open-loop-closed", "stale-detail-fades", "natural-follow-up",
                   "over-reference", "cross-user-isolation", "paraphrase-dedup",
                   "loop-closed-by-report", "broad-question", "favourite-coffee-shop"):
        assert needed in names
    assert sum(r.name.startswith("negative-") for r in report.results) >= 5


def test_offline_figures_do_not_drop(report: EvalReport) -> None:
    unmet = violations(report, Thresholds(
        min_precision=MIN_PRECISION, min_recall=MIN_RECALL, min_hit3=MIN_HIT3,
        min_checks=MIN_CHECKS, max_duplicates=0, max_leaks=0, max_surfacing=0))
    assert not unmet, report_table(report)


def test_the_negative_set_extracts_nothing(report: EvalReport) -> None:
    for result in report.results:
        if result.name.startswith("negative-"):
            assert result.created == 0, result.failures


def test_the_report_renders_as_a_table_and_json(report: EvalReport) -> None:
    table = report_table(report)
    assert table.splitlines()[1].split()[:4] == ["FIXTURE", "PRECISION", "RECALL", "HIT@3"]
    assert all(r.name in table for r in report.results)
    data = json.loads(json.dumps(report_json(report)))
    assert data["overall"]["fixtures"] == len(report.results)
    assert data["overall"]["leaks"] == 0


def test_the_command_runs_a_fixture_file_and_gates_on_thresholds(
        pg_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    fixture = tmp_path / "one.yaml"
    fixture.write_text(
        "name: job\nturns:\n  - {at: '2026-11-02T10:00', text: 'I work at Initech.'}\n"
        "expect:\n  extract: [{kind: profile_fact, contains: [Initech]}]\n"
        "  isolation: [{user: v, query: 'Where do I work?', never: {contains: [Initech]}}]\n")
    args = ["--database-url", pg_uri, "eval", str(fixture)]
    assert main([*args, "--json", "--max-leaks", "0", "--min-precision", "1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["extractor"] == "rules"
    assert data["fixtures"][0]["found"] == 1 and data["overall"]["leaks"] == 0
    # A threshold the run cannot meet: exit 1 and say which.
    assert main([*args, "--min-hit3", "0.5"]) == 1
    assert "hit@3 - is below 50%" in capsys.readouterr().err


def test_bad_fixtures_fail_with_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="No fixture file"):
        load_fixtures([tmp_path / "missing.yaml"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nturns: [{at: '2026-11-02', text: hi}]\nexpect: {extracts: []}\n")
    with pytest.raises(ConfigurationError, match=r"Fixture x in .*bad\.yaml.*extracts"):
        load_fixtures([bad])
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps([{"name": "a", "turns": [{"at": "2026-11-02", "text": "hi"}]}] * 2))
    with pytest.raises(ConfigurationError, match="used twice"):
        load_fixtures([twice])


def test_a_broad_question_recalls_the_users_core_facts(store: PostgresMemoryStore) -> None:
    now = datetime(2026, 11, 2, 10, tzinfo=UTC)
    layer = MemoryLayer(store, extraction="inline")
    layer.remember("u1", "Name is Dana.", kind=Kind.PROFILE_FACT, salience=0.9, now=now)
    layer.remember("u1", "Works at Acme Robotics.", kind=Kind.PROFILE_FACT, now=now)
    layer.remember("u1", "Is allergic to shellfish.", kind=Kind.PROFILE_FACT, now=now)
    layer.remember("u2", "Name is Bob.", kind=Kind.PROFILE_FACT, now=now)
    for question in ("What do you know about me?", "Tell me what you remember about me",
                     "who am I?"):
        found = {r.record.content for r in layer.recall("u1", question, now=now)}
        assert {"Name is Dana.", "Works at Acme Robotics.", "Is allergic to shellfish."} <= found
        block = layer.context_block("u1", question, now=now)
        assert "Dana" in block.text and "Bob" not in block.text
    # Any other question is unchanged: nothing resembles it, nothing comes back.
    assert layer.recall("u1", "What is the capital of Peru?", now=now) == []
