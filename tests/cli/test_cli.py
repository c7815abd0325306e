"""The langmem-layer command against the suite's database."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from langmem_layer import MemoryLayer
from langmem_layer.cli import main
from langmem_layer.jobs import JOBS, JobResult, register


def test_setup_export_import_sweep(pg_uri: str, store, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    assert main(["--database-url", pg_uri, "setup"]) == 0
    assert "applied migrations: none" in capsys.readouterr().out
    MemoryLayer(store, extraction="inline").remember("u1", "Name is Dana.")
    out = tmp_path / "u1.json"
    assert main(["--database-url", pg_uri, "export", "u1", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [i["value"]["content"] for i in data["items"]] == ["Name is Dana."]
    # Import into another user re-embeds with the default model: use the suite's fake one.
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    assert main(["--database-url", pg_uri, "import", "u2", str(out)]) == 0
    assert "imported 1 items" in capsys.readouterr().out
    assert store.search(("memories", "u2", "work"))[0].value["content"] == "Name is Dana."
    assert main(["--database-url", pg_uri, "sweep-ttl"]) == 0
    assert "deleted 0 expired items" in capsys.readouterr().out
    assert main(["--database-url", pg_uri, "purge-embedding-cache"]) == 0
    assert "deleted 0 stale cached embeddings" in capsys.readouterr().out


def test_worker_once_extracts_queued_turns(pg_uri: str, store, capsys, monkeypatch) -> None:
    from langchain_core.messages import HumanMessage

    from langmem_layer import MemorySettings

    queued = MemoryLayer(store, settings=MemorySettings(extract_every_n_turns=1000))
    queued.admin.submit("u1", [HumanMessage("I live in Lisbon.", id="w1")], thread_id="t")
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    assert main(["--database-url", pg_uri, "worker", "--once"]) == 0
    assert "extracted 1 turns, 0 failed" in capsys.readouterr().out
    assert [r.record.content for r in queued.list("u1")] == ["Lives in Lisbon."]


def test_database_resolved_from_the_environment(pg_uri: str, store, capsys, monkeypatch) -> None:
    monkeypatch.setenv("LANGMEM_DATABASE_URL", pg_uri)
    assert main(["sweep-ttl"]) == 0
    assert capsys.readouterr().out == "deleted 0 expired items\n"


def test_index_large_users(pg_uri: str, store, capsys, monkeypatch) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    for n in range(2):
        MemoryLayer(store, extraction="inline").remember(user, f"Fact {n} about the boat.")
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    assert main(["--database-url", pg_uri, "index-large-users", "--threshold", "3"]) == 0
    assert capsys.readouterr().out == "indexed 0 large users\n"
    assert main(["--database-url", pg_uri, "index-large-users", "--threshold", "2"]) == 0
    assert capsys.readouterr().out == "indexed 1 large users\n"


def test_jobs_list_needs_no_database(capsys, monkeypatch) -> None:
    # An unreachable URL: listing must not connect (nor start the embedded server).
    monkeypatch.setenv("LANGMEM_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    assert main(["jobs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["consolidate", "daily"], ["context-vectors", "daily"],
        ["extract", "on"], ["index-large-users", "daily"], ["lifecycle", "daily"],
        ["procedural-profile", "weekly"],
        ["purge-embedding-cache", "weekly"], ["purge-expired", "monthly"], ["reextract", "on"],
        ["reflect", "weekly"],
        ["summarize", "daily"],
        ["sweep-sessions", "daily"], ["sweep-ttl", "daily"]]
    assert all(JOBS[line.split()[0]].summary in line for line in lines)


def test_jobs_run_with_time_and_options(pg_uri: str, store, clock, capsys, monkeypatch) -> None:
    from langmem_layer.types import Kind, Layer, MemoryRecord

    rec = MemoryRecord(content="Temporary door code is 4821.", kind=Kind.PROFILE_FACT,
                       layer=Layer.SEMANTIC, occurred_at=clock.now,
                       last_accessed_at=clock.now, expires_at=clock.now + timedelta(hours=1))
    store.put(("memories", "u1", "work"), "code", rec.to_value())
    url = ["--database-url", pg_uri]
    at = (clock.now + timedelta(minutes=30)).replace(tzinfo=None).isoformat()  # naive: UTC
    assert main([*url, "jobs", "run", "sweep-ttl", "--now", at]) == 0
    assert capsys.readouterr().out == "deleted 0 expired items\n"
    at = (clock.now + timedelta(hours=2)).isoformat()
    # The same day's period has run: again only when forced.
    assert main([*url, "jobs", "run", "sweep-ttl", "--now", at]) == 0
    assert capsys.readouterr().out.startswith("sweep-ttl [2026-11-18, shard 0/1]: already ran")
    assert main([*url, "jobs", "run", "sweep-ttl", "--now", at, "--force"]) == 0
    assert capsys.readouterr().out == "deleted 1 expired items\n"
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    assert main([*url, "jobs", "run", "index-large-users", "-O", "threshold=1000000"]) == 0
    assert capsys.readouterr().out == "indexed 0 large users\n"
    assert main([*url, "jobs", "run", "extract"]) == 0
    assert capsys.readouterr().out == "extracted 0 turns, 0 failed (kept for retry)\n"


def test_jobs_run_exits_1_when_the_job_failed(pg_uri: str, store, capsys) -> None:
    register("always-fails", "a job that fails")(
        lambda ctx, *, now=None: JobResult("always-fails", {"failed": 2}))
    try:
        assert main(["--database-url", pg_uri, "jobs", "run", "always-fails"]) == 1
    finally:
        del JOBS["always-fails"]
    assert capsys.readouterr().out == "always-fails: 2 failed\n"


@pytest.mark.parametrize(("option", "message"), [
    ("threshold=many", "Option threshold takes a value of type int, got 'many'."),
    ("limit=3", "Job index-large-users has no option 'limit' (options: threshold)."),
    ("threshold", "an option is KEY=VALUE, got 'threshold'"),
])
def test_jobs_run_bad_option_is_one_line(pg_uri: str, capsys, option: str,
                                         message: str) -> None:
    argv = ["--database-url", pg_uri, "jobs", "run", "index-large-users", "-O", option]
    assert main(argv) == 1
    assert capsys.readouterr().err == f"langmem-layer: {message}\n"


def test_jobs_run_unknown_job_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["jobs", "run", "no-such-job"])
    assert exit_.value.code == 2
    assert "invalid choice: 'no-such-job'" in capsys.readouterr().err


def _import_error(pg_uri: str, path: Path, capsys) -> str:
    assert main(["--database-url", pg_uri, "import", "u2", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    return captured.err


def test_import_of_a_missing_file(pg_uri: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "nope.json"
    assert _import_error(pg_uri, path, capsys) == f"langmem-layer: no such file: {path}\n"


def test_import_of_a_file_that_is_not_json(pg_uri: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("Name is Dana.\n")
    assert _import_error(pg_uri, path, capsys).startswith(
        f"langmem-layer: {path} is not valid JSON: ")


@pytest.mark.parametrize("data", [
    [1, 2],
    {"items": []},
    {"format": "langmem_layer.export/1", "user_id": "u1", "items": [{"key": "k"}]},
])
def test_import_of_json_that_is_not_an_export(pg_uri: str, store, tmp_path: Path, capsys,
                                              monkeypatch, data: object) -> None:
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    path = tmp_path / "other.json"
    path.write_text(json.dumps(data))
    err = _import_error(pg_uri, path, capsys)
    assert "not a langmem_layer export" in err.lower() or "not a valid langmem_layer export" in err
    assert store.search(("memories", "u2")) == []


def test_library_errors_are_one_line(pg_uri: str, capsys) -> None:
    assert main(["--database-url", pg_uri, "get", "u1", "no-such-memory"]) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("langmem-layer: ") and captured.err.count("\n") == 1
    # An unreachable server is a DatabaseUnavailableError, not a traceback.
    assert main(["--database-url", "postgresql://nobody@127.0.0.1:1/none", "sweep-ttl"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("langmem-layer: Cannot connect to PostgreSQL") and err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["export", "u1"],
    ["sweep-ttl"],
    ["purge-embedding-cache"],
    ["sweep-sessions"],
    ["jobs", "run", "sweep-ttl"],
])
def test_commands_on_a_database_without_setup(bare_uri: str, capsys, argv: list[str]) -> None:
    assert main(["--database-url", bare_uri, *argv]) == 1
    assert capsys.readouterr().err == (
        "langmem-layer: the database has no langmem schema; run `langmem-layer setup` first\n")
    assert main(["--database-url", bare_uri, "setup"]) == 0
    assert main(["--database-url", bare_uri, *argv]) == 0
