"""The embedded PostgreSQL killed (its postmaster, by PID) in the middle of extraction,
of a job run and of an import, then started again: the worker reconnects by itself and
finishes; no turn is lost and none is applied twice.

Each test has a data directory (and server) of its own, not the suite's shared one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import (
    DatabaseUnavailableError,
    MemoryLayer,
    MemorySettings,
    PostgresMemoryStore,
)
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.jobs import JOBS, JobContext, register
from langmem_layer.jobs.runs import run
from langmem_layer.store import embedded
from langmem_layer.store.driver import RunTransaction
from langmem_layer.worker import WakeWorker
from tests.fakes import BagOfWordsEmbeddings, Clock

ROOT = Path(__file__).resolve().parents[2] / ".langmem-test-faults"
TURNS = 24


@pytest.fixture
def data_dir() -> Iterator[Path]:
    ROOT.mkdir(exist_ok=True)
    ROOT.chmod(0o777)
    path = ROOT / uuid.uuid4().hex[:12]
    yield path
    server = embedded._servers.pop(path.resolve(), None)
    if server is not None:
        with contextlib.suppress(Exception):
            server.stop()
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):  # another test may still use it
        ROOT.rmdir()


@pytest.fixture
def store(data_dir: Path) -> Iterator[PostgresMemoryStore]:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.embedded(data_dir, index=index, clock=Clock()) as s:
        s.setup()
        yield s


def kill_postmaster(path: Path) -> None:
    pid = int((path / "postmaster.pid").read_text().splitlines()[0])
    os.kill(pid, signal.SIGKILL)
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.05)  # waiting for the kill to land, not measuring anything


class KillAt:
    """Kills the server just before the store's ``n``-th transaction (counted from now)."""

    def __init__(self, store: PostgresMemoryStore, path: Path, n: int) -> None:
        self.store, self.path, self.n = store, path, n
        self.seen = 0
        self.killed = threading.Event()
        self._io = store._io
        store._io = self  # type: ignore[method-assign]

    def __call__(self, io: Any) -> Any:
        if isinstance(io, RunTransaction) and not self.killed.is_set():
            self.seen += 1
            if self.seen == self.n:
                kill_postmaster(self.path)
                self.killed.set()
        return self._io(io)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60  # a bound on a hang, not a performance assertion
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def queue_counts(uri: str) -> dict[str, int]:
    with psycopg.connect(uri) as conn:
        row = conn.execute("""SELECT count(*), count(done_at), count(parked_at),
            coalesce(max(attempts), 0) FROM langmem_extraction_queue""").fetchone()
    assert row is not None
    return dict(zip(("queued", "done", "parked", "max_attempts"), row, strict=True))


def memory_counts(uri: str) -> tuple[int, int]:
    """(memories, distinct (user, content)): equal when nothing was applied twice."""
    with psycopg.connect(uri) as conn:
        row = conn.execute("""SELECT count(*), count(DISTINCT (user_id, value->>'content'))
            FROM langmem_items WHERE is_memory""").fetchone()
    assert row is not None
    return row[0], row[1]


def test_killed_during_background_extraction_the_worker_reconnects_and_finishes(
        store: PostgresMemoryStore, data_dir: Path) -> None:
    uri = embedded.embedded_uri(data_dir)
    # The turns wait in the queue until the worker is woken below.
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="background",
                        settings=MemorySettings(extract_every_n_turns=1000))
    layer.worker.min_retry_seconds, layer.worker.max_retry_seconds = 0.05, 0.5
    for i in range(TURNS):
        layer.admin.submit(f"user-{i:02d}", [HumanMessage(f"My favourite band is Band{i}.")])
    assert queue_counts(uri)["queued"] == TURNS
    fault = KillAt(store, data_dir, n=TURNS // 2)

    layer.worker._wake_thread(WakeWorker())
    wait_for(fault.killed.is_set, "the server was killed mid-extraction")
    wait_for(lambda: layer.worker._outages > 0, "the worker saw the outage")
    uri = embedded.embedded_uri(data_dir)  # start it again on the same data directory
    wait_for(lambda: queue_counts(uri)["done"] == TURNS, "every turn extracted")

    counts = queue_counts(uri)
    memories, distinct = memory_counts(uri)
    print(f"kill during extraction: queued {counts['queued']}, extracted {counts['done']}, "
          f"memories {memories} ({distinct} distinct)")
    assert counts == {"queued": TURNS, "done": TURNS, "parked": 0, "max_attempts": 1}
    assert (memories, distinct) == (TURNS, TURNS)  # nothing lost, nothing twice
    assert layer.worker._thread is not None and layer.worker._thread.is_alive()
    layer.close()


def test_killed_during_a_job_run_the_rerun_finishes_every_user_once(
        store: PostgresMemoryStore, data_dir: Path) -> None:
    now = datetime(2026, 11, 23, tzinfo=UTC)
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline")
    users = [f"user-{i:02d}" for i in range(TURNS)]
    for user in users:
        layer.remember(user, f"{user} likes tea.", now=now - timedelta(days=200))
    lifecycle = JOBS["lifecycle"].function
    calls: list[str] = []

    def counted(ctx: JobContext, user_id: str, **kw: Any) -> Any:
        calls.append(user_id)
        if len(calls) == TURNS // 2:
            kill_postmaster(data_dir)
        return lifecycle(ctx, user_id, **kw)

    register("lifecycle-under-fault", "the lifecycle job, killed midway", schedule="daily",
             per_user=True)(counted)
    try:
        ctx = JobContext(store)
        with pytest.raises(DatabaseUnavailableError):
            run(ctx, "lifecycle-under-fault", now=now)
        embedded.embedded_uri(data_dir)
        again = run(ctx, "lifecycle-under-fault", now=now)
    finally:
        del JOBS["lifecycle-under-fault"]
    with psycopg.connect(embedded.embedded_uri(data_dir)) as conn:
        row = conn.execute("""SELECT users, finished_at IS NOT NULL FROM langmem_job_runs
            WHERE job = 'lifecycle-under-fault'""").fetchone()
    print(f"kill during a job run: {TURNS} users, run resumed: {again.status}, "
          f"users recorded {row}")
    assert again.status == "done"
    assert row == (TURNS, True)  # each user's work committed exactly once
    assert sorted(set(calls)) == users


def test_killed_during_an_import_the_retry_imports_exactly_once(
        store: PostgresMemoryStore, data_dir: Path) -> None:
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline")
    for i in range(TURNS):
        layer.remember("source", f"Fact number {i} about the garden.")
    export = layer.export("source")
    fault = KillAt(store, data_dir, n=1)
    with pytest.raises(DatabaseUnavailableError):
        layer.import_("target", export)
    assert fault.killed.is_set()
    embedded.embedded_uri(data_dir)
    assert layer.export("target")["items"] == []  # the killed import wrote nothing
    imported = layer.import_("target", export)
    memories = [i["value"] for i in layer.export("target")["items"]]
    print(f"kill during an import: {imported} imported, {len(memories)} stored")
    assert imported == len(memories) == TURNS
    assert sorted(m["content"] for m in memories) == sorted(
        i["value"]["content"] for i in export["items"])
