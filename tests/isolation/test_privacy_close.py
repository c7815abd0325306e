"""Leaving the store's ``with`` block while the background worker extracts is quiet, and
loses no turn: what was not extracted stays queued for the next worker."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.rules import RuleExtractor
from tests.fakes import Clock

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, time
from langchain_core.messages import HumanMessage
from langmem_layer import MemoryLayer, MemorySettings, PostgresMemoryStore
from langmem_layer.extract.rules import RuleExtractor
from tests.fakes import BagOfWordsEmbeddings


class SlowRules(RuleExtractor):
    # Slow enough that the worker is mid-pass when the block ends.
    def extract(self, messages, *, existing=(), now):
        time.sleep(0.3)
        return super().extract(messages, existing=existing, now=now)


index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
with PostgresMemoryStore.from_conn_string(sys.argv[1], index=index, **eval(sys.argv[2])) as s:
    layer = MemoryLayer(s, extractor=SlowRules(),
                        settings=MemorySettings(extract_every_n_turns=1))
    for i in range(6):
        layer.admin.submit("zed", [HumanMessage(f"I prefer tea number {i}.", id=f"z{i}")],
                     thread_id="t")
    time.sleep(0.5)
# no layer.close(): the worker thread is still extracting
time.sleep(1.0)
print("exited")
"""


@pytest.mark.parametrize("options", ["{}", "{'pool_size': 2}"], ids=["connection", "pool"])
def test_exit_with_extraction_pending_is_quiet_and_keeps_the_turns(
        pg_uri: str, store: PostgresMemoryStore, clock: Clock, options: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, pg_uri, options], env=env,
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exited"
    assert "Traceback" not in done.stderr, done.stderr
    assert "Background extraction pass failed" not in done.stderr, done.stderr

    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT dedupe_key, done_at IS NOT NULL FROM langmem_extraction_queue "
            "WHERE user_id = 'zed' ORDER BY dedupe_key").fetchall()
    assert len(rows) == 6  # every turn is still there: extracted or queued

    # The next worker extracts what is left, once the dead process's leases expired
    # (the script ran on the real clock: ours moves past its leases).
    clock.now = datetime.now(UTC) + timedelta(hours=1)
    layer = MemoryLayer(store, extractor=RuleExtractor(), clock=clock)
    layer.admin.process_pending()
    with psycopg.connect(pg_uri) as conn:
        left = conn.execute("SELECT count(*) FROM langmem_extraction_queue "
                            "WHERE user_id = 'zed' AND done_at IS NULL").fetchone()
    assert left == (0,)
