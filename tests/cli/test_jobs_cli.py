"""The job runner from the command line: ``jobs run`` with users, shards, dry runs,
``jobs status``, and the worker running the schedule."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from langmem_layer.cli import main
from langmem_layer.sql.jobs import shard_of
from tests.jobs.test_jobs_runner import JOB, NOW, USERS, Touch, marks, people, runs, touch

__all__ = ["people", "touch"]  # fixtures, imported to be used here

AT = NOW.isoformat()


def table(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """The summary table ``jobs run`` prints for a per-user job, as a dict."""
    lines = capsys.readouterr().out.splitlines()
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in lines)  # type: ignore[misc]


def test_jobs_run_a_per_user_job(pg_uri, people, touch: Touch, capsys) -> None:
    url = ["--database-url", pg_uri]
    assert main([*url, "jobs", "run", JOB, "--now", AT, "--dry-run"]) == 0
    assert table(capsys) == {"job": JOB, "period": "2026-11-23", "shard": "0/1",
                             "status": "dry-run", "users": "12", "items": "12",
                             "touched": "12"}
    assert marks(pg_uri) == {} and runs(pg_uri) == []
    assert main([*url, "jobs", "run", JOB, "--now", AT, "--user", "user-03"]) == 0
    assert table(capsys)["shard"] == "user:user-03"
    for shard in ("0/2", "1/2"):
        assert main([*url, "jobs", "run", JOB, "--now", AT, "--shard", shard]) == 0
        assert table(capsys)["status"] == "done"
    assert marks(pg_uri) == {u: 2 if u == "user-03" else 1 for u in USERS}
    assert main([*url, "jobs", "run", JOB, "--now", AT, "--shard", "1/2"]) == 0
    assert "already ran" in capsys.readouterr().out
    assert main([*url, "jobs", "run", JOB, "--now", AT, "--shard", "1/2", "--force"]) == 0
    assert table(capsys)["status"] == "done"


def test_a_failed_run_resumes_from_the_command_line(pg_uri, people, touch: Touch,
                                                    capsys) -> None:
    url = ["--database-url", pg_uri, "jobs", "run", JOB, "--now", AT]
    touch.fail_after = 4
    assert main(url) == 1
    assert capsys.readouterr().err == "langmem-layer: stopped at user-04\n"
    touch.fail_after = None
    assert main(url) == 0
    resumed = table(capsys)
    assert (resumed["resumed after"], resumed["users"]) == ("user-03", "12")
    assert marks(pg_uri) == dict.fromkeys(USERS, 1)


def test_per_user_flags_on_a_whole_store_job_are_one_line(pg_uri, capsys) -> None:
    assert main(["--database-url", pg_uri, "jobs", "run", "sweep-ttl", "--user", "u1"]) == 1
    assert capsys.readouterr().err == (
        "langmem-layer: Job sweep-ttl works on the whole store: --user, --shard and "
        "--dry-run apply to per-user jobs only.\n")
    with pytest.raises(SystemExit):
        main(["--database-url", pg_uri, "jobs", "run", "sweep-ttl", "--shard", "2/2"])
    assert "A shard is i/n with 0 <= i < n" in capsys.readouterr().err


def test_jobs_status_shows_the_runs(pg_uri, people, touch: Touch, capsys,
                                    monkeypatch) -> None:
    monkeypatch.setenv("LANGMEM_JOBS_TIMEZONE", "UTC")
    url = ["--database-url", pg_uri]
    assert main([*url, "jobs", "run", JOB, "--now", AT]) == 0
    assert main([*url, "jobs", "run", "sweep-ttl", "--now", AT]) == 0
    capsys.readouterr()
    assert main([*url, "jobs", "status", "--now", AT]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: re.split(r"\s{2,}", line) for line in lines
            if not line.startswith(" ")}
    details = {line.split()[0]: lines[n + 1].strip() for n, line in enumerate(lines[:-1])
               if not line.startswith(" ") and lines[n + 1].startswith(" ")}
    assert rows["JOB"] == ["JOB", "PERIOD", "SHARD", "LAST RUN", "USERS", "NEXT DUE (UTC)"]
    mine = rows[JOB]
    assert mine[1:3] == ["2026-11-23", "0/1"]
    assert mine[4:] == ["12", "2026-11-24 03:00"]
    assert details[JOB] == 'counts: {"items":12,"touched":12}'
    assert rows["sweep-ttl"][4:] == ["0", "2026-11-24 03:00"]
    assert details["sweep-ttl"] == 'counts: {"deleted":0}'
    assert rows["purge-embedding-cache"][1:] == ["never", "-", "-", "-", "now (2026-W48)"]
    assert rows["extract"][-1] == "on demand"


def test_worker_runs_the_jobs_due_once(pg_uri, store, people, touch: Touch, capsys,
                                       monkeypatch) -> None:
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    argv = ["--database-url", pg_uri, "worker", "--once", "--jobs", f"{JOB},sweep-ttl"]
    assert main([*argv, "--now", AT]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "sweep-ttl [2026-11-23, shard 0/1]: deleted 0 expired items",
        f"{JOB} [2026-11-23, shard 0/1]: 12 users, 12 items, 12 touched"]
    assert main([*argv, "--now", (NOW + timedelta(hours=1)).isoformat()]) == 0
    assert capsys.readouterr().out == ""  # both done for the day
    # Three days later, a worker of shard 1/2: the whole-store job, and its half of users.
    assert main([*argv, "--now", (NOW + timedelta(days=3)).isoformat(), "--shard", "1/2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "sweep-ttl [2026-11-26, shard 0/1]: deleted 0 expired items"
    assert lines[1].startswith(f"{JOB} [2026-11-26, shard 1/2]: ")
    assert len(touch.calls) == 12 + sum(shard_of(u, 2) == 1 for u in USERS)


def test_worker_reports_a_failing_job_and_goes_on(pg_uri, store, people, touch: Touch,
                                                  capsys, monkeypatch) -> None:
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    touch.fail_after = 2
    argv = ["--database-url", pg_uri, "worker", "--once", "--jobs", f"{JOB},sweep-ttl",
            "--now", AT]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"langmem-layer: job {JOB} failed: DatabaseUnavailableError: stopped at user-02\n")
    assert captured.out.startswith("sweep-ttl [2026-11-23, shard 0/1]")
