"""The ``context-vectors`` job on the real embedded PostgreSQL: memories written into a
thread without context vectors (before they existed, or the vector not kept) get the
vectors the write path would have made, once, for their user only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.jobs import JobContext
from langmem_layer.jobs.runs import run
from langmem_layer.store.ops.context import context_text
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
TURNS = (
    "Do you still go to yoga classes on Tuesdays?",
    "I have been going for about three years now.",
    "Nice, I started running last month.",
)


def _vectors(pg_uri: str) -> dict[tuple[str, str], tuple[str, str | None, str]]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT user_id, key, after_key, before_that, embedding::text "
            "FROM langmem_context_vectors").fetchall()
    return {(u, k): (a, b, e) for u, k, a, b, e in rows}


def test_the_job_makes_the_vectors_a_thread_lacks_once(
        store: PostgresMemoryStore, pg_uri: str, embedder: BagOfWordsEmbeddings) -> None:
    # Written as a version without context vectors would: none kept.
    old = MemoryLayer(store, settings=MemorySettings(context_turns=0))
    keys = {u: [old.remember(u, t, thread_id="t1", now=NOW + timedelta(minutes=i)).key
                for i, t in enumerate(TURNS)] for u in ("u1", "u2")}
    old.remember("u1", "A note outside any thread.", now=NOW)
    assert _vectors(pg_uri) == {}
    ctx = JobContext(store, settings=MemorySettings())

    dry = run(ctx, "context-vectors", now=NOW, user="u1", dry_run=True)
    assert dry.counts == {"missing": 2, "made": 0} and _vectors(pg_uri) == {}

    done = run(ctx, "context-vectors", now=NOW, user="u1")
    assert done.counts == {"missing": 2, "made": 2}
    made = _vectors(pg_uri)
    k = keys["u1"]
    # The chains the write path reads, and the vectors it would embed; u2 untouched.
    assert {key: (a, b) for key, (a, b, _) in made.items()} == {
        ("u1", k[1]): (k[0], None), ("u1", k[2]): (k[1], k[0])}
    expected = embedder.embed_documents([context_text(TURNS[2], (TURNS[1], TURNS[0]))])[0]
    got = [float(x) for x in made[("u1", k[2])][2].strip("[]").split(",")]
    assert got == pytest.approx(expected, abs=1e-6)

    # Every user, a later period: u1 has nothing missing, u2 gets hers.
    later = run(ctx, "context-vectors", now=NOW + timedelta(days=2))
    assert later.counts["made"] == 2
    assert {key for key in _vectors(pg_uri)} == {
        ("u1", k[1]), ("u1", k[2]), ("u2", keys["u2"][1]), ("u2", keys["u2"][2])}
    again = run(ctx, "context-vectors", now=NOW + timedelta(days=4))
    assert again.counts.get("made", 0) == 0


def test_with_context_turns_zero_the_job_makes_none(store: PostgresMemoryStore,
                                                    pg_uri: str) -> None:
    off = MemorySettings(context_turns=0)
    layer = MemoryLayer(store, settings=off)
    for i, t in enumerate(TURNS):
        layer.remember("u1", t, thread_id="t1", now=NOW + timedelta(minutes=i))
    done = run(JobContext(store, settings=off), "context-vectors", now=NOW, user="u1")
    assert done.counts == {"missing": 0, "made": 0} and _vectors(pg_uri) == {}
