"""The embedded server can be reopened in the same process after it died, and a process
whose server died exits quietly."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from langmem_layer.store import embedded

# Under the checkout, as tests/conftest.py's DATA_DIR: the server runs as its own
# system user and must be able to reach its data directory.
ROOT = Path(__file__).resolve().parents[2] / ".langmem-test-embedded"

SCRIPT = """
import os, signal, sys, time
import psutil, psycopg
from langmem_layer.store.embedded import embedded_uri

path = sys.argv[1]
with psycopg.connect(embedded_uri(path)) as conn:
    conn.execute("SELECT 1")
pid = int(open(os.path.join(path, "postmaster.pid")).readline())
os.kill(pid, signal.SIGKILL)
while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
    time.sleep(0.05)
with psycopg.connect(embedded_uri(path)) as conn:
    print(conn.execute("SELECT 41 + 1").fetchone()[0])
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    ROOT.mkdir(exist_ok=True)
    ROOT.chmod(0o777)
    path = ROOT / uuid.uuid4().hex[:12]
    yield path
    server = embedded._servers.pop(path.resolve(), None)
    if server is not None:
        server.stop()
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):  # another test may still use it
        ROOT.rmdir()


def _kill_postmaster(path: Path) -> int:
    pid = int((path / "postmaster.pid").read_text().splitlines()[0])
    os.kill(pid, signal.SIGKILL)
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.05)  # waiting for the kill to land, not measuring anything
    return pid


def test_reopen_after_the_server_died(data_dir: Path) -> None:
    with psycopg.connect(embedded.embedded_uri(data_dir)) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    dead = _kill_postmaster(data_dir)

    with psycopg.connect(embedded.embedded_uri(data_dir)) as conn:
        assert conn.execute("SELECT 2").fetchone() == (2,)
    pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    assert pid != dead


def test_a_process_whose_server_died_exits_quietly(data_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(data_dir)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "42"
    assert "Traceback" not in done.stderr, done.stderr
    assert "NoSuchProcess" not in done.stderr, done.stderr
