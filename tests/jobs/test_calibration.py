"""Calibration profiles (retrieval defaults chosen by the embedding model), explicit
settings winning over them, ``langmem-layer calibrate`` and ``eval locomo``."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from langmem_layer import MemoryLayer
from langmem_layer.calibration import PROFILES, apply_profile, profile_for
from langmem_layer.calibration.calibrate import calibrate, render
from langmem_layer.calibration.labelled import load_locomo, read_locomo, split_units
from langmem_layer.calibration.locomo import (
    ABLATIONS,
    GRID,
    Outcome,
    _changed,
    cross_validate,
    run_locomo,
)
from langmem_layer.cli import main
from langmem_layer.errors import ConfigurationError
from langmem_layer.settings import MemorySettings, RankingWeights
from langmem_layer.store.sync import PostgresMemoryStore
from tests.conftest import _truncate
from tests.fakes import BagOfWordsEmbeddings

SLICE = Path(__file__).parents[1] / "data" / "locomo-slice.json"  # conv-26, sessions 1-2
DEFAULTS = MemorySettings()


@pytest.mark.parametrize(("model_id", "name"), [
    ("all-MiniLM-L6-v2", "minilm"),
    ("sentence-transformers/all-MiniLM-L6-v2", "minilm"),
    ("text-embedding-3-small", "openai-3-small"),
    ("openai:text-embedding-3-small", "openai-3-small"),
    ("text-embedding-3-large", "openai-3-large"),
    ("nomic-embed-text", "defaults"),
    ("bow-64", "defaults"),
    (None, "defaults"),
])
def test_the_profile_is_chosen_by_the_model_id(model_id: str | None, name: str) -> None:
    assert profile_for(model_id).name == name


def test_the_fallback_is_the_uncalibrated_defaults() -> None:
    assert apply_profile(None, "an-unknown-model") == DEFAULTS
    assert (DEFAULTS.rrf_k, DEFAULTS.similarity_floor,
            DEFAULTS.episodic_similarity_floor) == (60, 0.7, 0.72)


def test_the_local_profile_fills_unset_fields() -> None:
    s = apply_profile(None, "all-MiniLM-L6-v2")
    minilm = PROFILES["minilm"].values
    assert s.rrf_k == minilm["rrf_k"] and s.similarity_floor == minilm["similarity_floor"]
    assert s.episodic_similarity_floor == minilm["episodic_similarity_floor"]
    assert s.candidates_per_source == minilm["candidates_per_source"]
    assert s.weights.recency == 0.0 and s.weights.relevance == RankingWeights().relevance
    assert s.model_fields_set == set()  # still "nothing explicit"
    assert apply_profile(s, "text-embedding-3-small").rrf_k == PROFILES[
        "openai-3-small"].values["rrf_k"]


def test_explicit_settings_win_field_by_field() -> None:
    s = apply_profile(MemorySettings(rrf_k=60, similarity_floor=0.8), "all-MiniLM-L6-v2")
    assert (s.rrf_k, s.similarity_floor) == (60, 0.8)  # kept
    # Filled by the profile:
    assert s.episodic_similarity_floor == PROFILES["minilm"].values["episodic_similarity_floor"]
    # weights is one field: explicit weights are kept whole.
    w = RankingWeights(recency=0.3)
    assert apply_profile(MemorySettings(weights=w), "all-MiniLM-L6-v2").weights == w
    # An explicit value equal to the default is still explicit.
    assert apply_profile(MemorySettings(rrf_k=60), "all-MiniLM-L6-v2").rrf_k == 60


def test_environment_settings_are_explicit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGMEM_SIMILARITY_FLOOR", "0.65")
    s = apply_profile(MemorySettings.from_env(), "all-MiniLM-L6-v2")
    assert s.similarity_floor == 0.65 and s.rrf_k == 5


def test_calibration_can_be_forced_or_switched_off() -> None:
    assert apply_profile(MemorySettings(calibration="defaults"), "all-MiniLM-L6-v2").rrf_k == 60
    forced = apply_profile(MemorySettings(calibration="minilm"), "bow-64")
    assert forced.similarity_floor == PROFILES["minilm"].values["similarity_floor"]
    with pytest.raises(ConfigurationError, match="names no profile"):
        apply_profile(MemorySettings(calibration="nope"), "all-MiniLM-L6-v2")


def test_spec_is_a_deprecated_name_of_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.warns(DeprecationWarning, match="'defaults'"):
        s = MemorySettings(calibration="spec")
    assert s.calibration == "defaults"
    assert apply_profile(s, "all-MiniLM-L6-v2") == apply_profile(
        MemorySettings(calibration="defaults"), "all-MiniLM-L6-v2")
    monkeypatch.setenv("LANGMEM_CALIBRATION", "spec")
    with pytest.warns(DeprecationWarning, match="'defaults'"):
        assert MemorySettings.from_env().calibration == "defaults"


def test_the_layer_applies_the_profile_of_its_store(pg_uri: str) -> None:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64,
             "model_id": "all-MiniLM-L6-v2"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        floor = MemoryLayer(store).settings.similarity_floor
        assert floor == PROFILES["minilm"].values["similarity_floor"]
        assert MemoryLayer(store, settings=MemorySettings(rrf_k=60)).settings.rrf_k == 60
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:  # the defaults
        assert MemoryLayer(store).settings == DEFAULTS


def test_splits_are_by_conversation() -> None:
    units = ["a", "b", "c", "d", "e"]
    assert split_units(units, "calib") == ["a", "b"]
    assert split_units(units, "heldout") == ["c", "d", "e"]
    assert split_units(units, "heldout", ["e"]) == ["a", "b", "c", "d"]
    with pytest.raises(ConfigurationError, match="not in the file"):
        split_units(units, "calib", ["z"])


def _tiny_locomo(path: Path) -> Path:
    """Three conversations of one session; each question's evidence is one turn."""
    samples = []
    for n, (pet, city) in enumerate([("cat", "Lisbon"), ("dog", "Porto"), ("parrot", "Oslo")]):
        turns = [{"speaker": "Ana", "dia_id": f"D1:{i + 1}", "text": text} for i, text in
                 enumerate([f"My {pet} is called Pixel.", f"We moved to {city} last year.",
                            "The weather is nice today.", "I started painting in June."])]
        samples.append({
            "sample_id": f"conv-{n}",
            "conversation": {"speaker_a": "Ana", "speaker_b": "Bo",
                             "session_1_date_time": "1:56 pm on 8 May, 2023",
                             "session_1": turns},
            "qa": [{"question": f"What is the name of Ana's {pet}?", "answer": "Pixel",
                    "evidence": ["D1:1"], "category": 4},
                   {"question": "Where did Ana move?", "answer": city,
                    "evidence": ["D1:2", "D9:9", "D1:2; D1:3"], "category": 1},
                   {"question": "Unanswerable?", "evidence": [], "category": 5}],
        })
    path.write_text(json.dumps(samples))
    return path


def test_calibrate_chooses_on_one_split_and_reports_on_the_other(
        pg_uri: str, tmp_path: Path) -> None:
    _truncate(pg_uri)
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        result = calibrate(store, [_tiny_locomo(tmp_path / "tiny.json")], k=1, show=False)
        assert result.current == {"rrf_k": 60, "floor": 0.7, "recency": 0.1,
                                  "candidates_per_source": 20}
        assert len(result.tried) >= 7 and 0 <= result.calib_chosen <= 1
        assert result.calib_chosen >= result.calib_current
        assert result.heldout_current is not None and result.heldout_chosen is not None
        text = render(result)
        assert "held-out split" in text and "calibration split" in text
        # The labelled users are gone afterwards.
        assert store.list_namespaces(prefix=("memories",)) == []


def test_calibrate_reads_fixtures(pg_uri: str, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    _truncate(pg_uri)
    fixtures = tmp_path / "f.json"
    fixtures.write_text(json.dumps([
        {"name": f"f{i}", "turns": [{"at": "2026-11-02T10:00", "text": f"I work at {w}."}],
         "expect": {"retrieve": [{"query": "Where do I work?", "hit": {"contains": [w]}}]}}
        for i, w in enumerate(["Initech", "Globex", "Acme"])]))
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        result = calibrate(store, [fixtures], k=3, show=False)
        assert result.calib_chosen == 1.0  # f0: "Initech" is found
        assert result.heldout_chosen == 1.0  # f1, f2
        assert store.list_namespaces(prefix=("memories",)) == []


def test_calibrate_command(pg_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tiny = _tiny_locomo(tmp_path / "tiny.json")
    code = main(["--database-url", pg_uri, "calibrate", str(tiny), "--split", "conv-1",
                 "--k", "3", "--json", "--no-progress"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["profile_today"] == "minilm"
    assert set(data["chosen"]) == {"rrf_k", "floor", "recency", "candidates_per_source"}
    assert 0 <= data["calib"]["chosen"] <= 1 and 0 <= data["heldout"]["chosen"] <= 1


def test_eval_locomo_on_a_slice(pg_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--database-url", pg_uri, "eval", "locomo", str(SLICE), "--no-progress"]
    assert main([*args, "--json", "--k", "5"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["conversations"] == ["conv-26"] and data["turns"] == 35
    assert data["questions"] == 15 and data["k"] == 5 and data["profile"] == "minilm"
    for run in ("layer", "vector_baseline"):
        assert 0 < data[run]["recall"] <= 1
        assert 0 < data[run]["p50_ms"] <= data[run]["p95_ms"]
        assert set(data[run]["by_category"]) <= {"multi-hop", "temporal", "open-domain",
                                                 "single-hop"}
    layer = data["layer"]
    # The block holds at least the evidence its best-ranked memories hold, within target.
    assert layer["block"] >= layer["recall"] - 1e-9 and 0 < layer["share"] < 1
    # Session-level recall_any@5: at least as often as the evidence itself is in the top 5.
    assert 0 < layer["any5"] <= 1
    assert layer["tokens_p95"] <= data["settings"]["block_target_tokens"]
    assert set(layer["by_conversation"]) == {"conv-26"}
    assert data["cross_validation"]["folds"] == []  # one conversation: nothing to tune on
    assert main([*args, "--sessions", "1"]) == 0
    table = capsys.readouterr().out
    assert "evidence in block" in table and "vector only" in table and "sess@5" in table
    assert "cross-validation needs two conversations" in table
    with pytest.raises(SystemExit):
        main([*args, "--split", "sideways"])


def test_eval_locomo_cross_validates_by_conversation(
        pg_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three conversations: each is scored with settings chosen on the other two."""
    _truncate(pg_uri)
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        report = run_locomo(store, _tiny_locomo(tmp_path / "tiny.json"), k=1, show=False)
        assert [f.unit for f in report.folds] == ["conv-0", "conv-1", "conv-2"]
        for fold in report.folds:
            assert set(fold.chosen) == set(GRID)
            assert 0 <= fold.held_out["block"] <= 1 and 0 <= fold.tuned["block"] <= 1
        summary = report.summary()
        assert summary["gap"] == pytest.approx(summary["tuned_on_block_mean"]
                                               - summary["held_out_block_mean"])
        assert "held-out mean" in report.table()
        assert store.list_namespaces(prefix=("memories",)) == []


@pytest.mark.parametrize("subjects", [True, False])
def test_eval_locomo_writes_turns_with_or_without_their_speaker_as_subject(
        pg_uri: str, tmp_path: Path, subjects: bool) -> None:
    """``--no-subjects``: the turns as a deployment whose messages carry no names
    writes them; the report says which."""
    _truncate(pg_uri)
    path = _tiny_locomo(tmp_path / "tiny.json")
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        layer = MemoryLayer(store)
        data = load_locomo(layer, path, ["conv-0"], prefix="t-", show=False,
                           subjects=subjects)
        try:
            found = {m.record.subject for m in layer.list("t-conv-0", profile="work")}
        finally:
            data.cleanup(layer)
        assert found == ({"Ana"} if subjects else {None})
        report = run_locomo(store, path, k=1, show=False, cross_validation=False,
                            subjects=subjects)
    assert report.json()["subjects"] is subjects
    assert ("written without a subject" in report.table()) is not subjects


def _outcomes(unit: str, block: float, share: float, n: int = 2) -> list[Outcome]:
    return [Outcome(unit, 4, block, block, 100, share) for _ in range(n)]


def test_cross_validation_never_scores_a_conversation_on_its_own_tuning() -> None:
    # Setting A is best on "a" only, B on "b" and "c": held out, "a" gets B (chosen on b
    # and c); "b" gets A, whose 1.0 on "a" outweighs it on a and c, and scores 0.2.
    a = (("block_target_tokens", 400),)
    b = (("block_target_tokens", 800),)
    outcomes = {a: _outcomes("a", 1.0, 0.01) + _outcomes("b", 0.2, 0.01)
                + _outcomes("c", 0.2, 0.01),
                b: _outcomes("a", 0.5, 0.01) + _outcomes("b", 0.6, 0.01)
                + _outcomes("c", 0.6, 0.01)}
    folds = {f.unit: f for f in cross_validate(outcomes)}
    assert folds["a"].chosen == dict(b) and folds["a"].held_out["block"] == 0.5
    assert folds["a"].tuned["block"] == pytest.approx(0.6)
    assert folds["b"].chosen == dict(a) and folds["b"].held_out["block"] == 0.2
    assert folds["b"].tuned["block"] == pytest.approx(0.6)
    assert cross_validate({a: _outcomes("a", 1.0, 0.01)}) == []


def test_cross_validation_keeps_blocks_under_the_share() -> None:
    cheap = (("block_target_tokens", 400),)
    dear = (("block_target_tokens", 1200),)
    outcomes = {cheap: _outcomes("a", 0.7, 0.03) + _outcomes("b", 0.7, 0.03),
                dear: _outcomes("a", 0.9, 0.08) + _outcomes("b", 0.9, 0.08)}
    assert all(f.chosen == dict(cheap) for f in cross_validate(outcomes))
    # When nothing is cheap enough, the best is still chosen.
    assert all(f.chosen == dict(dear) for f in cross_validate(outcomes, max_share=0.01))


def test_eval_locomo_ablation_asks_again_with_one_change_per_row(
        pg_uri: str, tmp_path: Path) -> None:
    _truncate(pg_uri)
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        report = run_locomo(store, _tiny_locomo(tmp_path / "tiny.json"), k=1, show=False,
                            cross_validation=False, ablation=True)
    # And the reranker trained on the other conversations, scored on each.
    assert list(report.ablation) == [*ABLATIONS, "rerank_held_out"]
    for rows in report.ablation.values():
        assert [(r.unit, r.category) for r in rows] == [
            (r.unit, r.category) for r in report.defaults]
    # Recall's ten best with no target: at most ten ranked memories, never cut by tokens,
    # so on four-turn conversations every turn is in the block.
    assert all(r.block == 1.0 for r in report.ablation["ten_best"])
    data = report.json()["ablation"]
    assert data["no_links"]["change"] == {"link_types": ()}
    assert "multi_hop" in data["no_time"]
    table = report.table()
    assert "Ablation" in table and "no link walk" in table


def test_an_ablation_changes_one_key_of_a_dict_setting() -> None:
    base = {"source_weights": {"vector": 1.0, "keyword": 1.0}, "rrf_k": 5}
    assert _changed(base, {"source_weights": {"keyword": 0.0}}) == {
        "source_weights": {"vector": 1.0, "keyword": 0.0}, "rrf_k": 5}
    assert base["source_weights"]["keyword"] == 1.0


def test_the_locomo_reader_keeps_questions_with_evidence_among_the_turns_read() -> None:
    [conv] = read_locomo(SLICE)
    ids = {t.dia_id for t in conv.turns}
    assert (conv.sample_id, len(conv.turns), len(conv.questions)) == ("conv-26", 35, 15)
    assert conv.asked_at == max(t.when for t in conv.turns) + timedelta(days=1)
    assert all(q.evidence and q.evidence <= ids for q in conv.questions)
    assert conv.turns[0].text.startswith(conv.turns[0].speaker + ": ")
    [first] = read_locomo(SLICE, ["conv-26"], sessions=1)
    assert {t.session for t in first.turns} == {1}
    assert all(q.evidence <= {t.dia_id for t in first.turns} for q in first.questions)
    assert len(first.questions) < len(conv.questions)
