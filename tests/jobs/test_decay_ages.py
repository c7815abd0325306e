"""Memories of every age, from today to twenty years untouched, through the nightly
lifecycle, recall and the reflection jobs: decay never underflows or overflows, in SQL
or in Python, and a user who comes back after years is served like anyone else."""

from __future__ import annotations

import math
from datetime import timedelta

import psycopg
import pytest

from langmem_layer import InvalidInputError, MemoryLayer, MemorySettings
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.jobs.runs import run
from langmem_layer.read.rank import decay_score
from langmem_layer.store import ops as mops
from langmem_layer.store.db_errors import translate
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, MemoryRecord
from tests.fakes import Clock

AGES_DAYS = [0, 1, 365, 2 * 365, 5 * 365, 20 * 365]
#: Every decay form: Ebbinghaus (semantic, procedural, identity), half-life
#: (summaries, reflections), none (episodic).
FORMS = [(Kind.PROFILE_FACT, Layer.SEMANTIC), (Kind.PREFERENCE, Layer.PROCEDURAL),
         (Kind.REFLECTION, Layer.SEMANTIC), (Kind.TEMPORAL_SUMMARY, Layer.SEMANTIC),
         (Kind.EPISODIC_EVENT, Layer.EPISODIC)]
USER = "returning"


def _memories(store: PostgresMemoryStore, clock: Clock) -> list[str]:
    keys = []
    for age in AGES_DAYS:
        for n, (kind, layer) in enumerate(FORMS):
            at = clock.now - timedelta(days=age)
            rec = MemoryRecord(content=f"Fact {n} about gardening from {age} days ago.",
                               kind=kind, layer=layer, occurred_at=at, last_accessed_at=at,
                               confidence=0.9)
            key = f"m-{age}-{n}"
            store.put(("memories", USER, "work"), key, rec.to_value())
            keys.append(key)
    return keys


@pytest.mark.parametrize("years_later", [0, 2, 20])
def test_the_lifecycle_scores_every_age(store: PostgresMemoryStore, clock: Clock,
                                        pg_uri: str, years_later: int) -> None:
    keys = _memories(store, clock)
    now = clock.now + timedelta(days=365 * years_later)
    ctx = JobContext(store, settings=MemorySettings(summary_half_life_by_user={USER: 1.0}))
    done = run(ctx, "lifecycle", now=now, user=USER)
    assert (done.status, done.failed, done.error) == ("done", 0, None)
    with psycopg.connect(pg_uri) as conn:
        stored = dict(conn.execute(
            "SELECT key, decay FROM langmem_decay WHERE user_id = %s", [USER]).fetchall())
    for key in keys:
        if key not in stored:
            continue  # moved out of the live set (archived, stale): not rescored
        (found,) = store.batch([mops.FindMemoryOp(USER, key)])
        rec = MemoryRecord.model_validate(dict(found.value))
        expected = decay_score(rec, now, half_life_days=1.0)
        assert 0.0 <= stored[key] <= 1.0 and math.isfinite(stored[key]), key
        assert math.isclose(stored[key], expected, rel_tol=1e-9, abs_tol=1e-12), key


def test_recall_and_the_block_serve_a_user_back_after_twenty_years(
        store: PostgresMemoryStore, clock: Clock) -> None:
    _memories(store, clock)
    layer = MemoryLayer(store, extraction="inline")
    for years in (0, 2, 20):
        now = clock.now + timedelta(days=365 * years)
        found = layer.recall(USER, "gardening", now=now)
        assert found and all(math.isfinite(r.score) for r in found), years
        assert "gardening" in layer.context_block(USER, "gardening", now=now).text
    layer.close()


@pytest.mark.parametrize("job", ["consolidate", "reflect", "summarize", "procedural-profile"])
def test_the_reflection_jobs_run_over_every_age(store: PostgresMemoryStore, clock: Clock,
                                                job: str) -> None:
    _memories(store, clock)
    ctx = JobContext(store, settings=MemorySettings())
    for years in (2, 20):
        done = run(ctx, job, now=clock.now + timedelta(days=365 * years), user=USER,
                   force=True)
        assert (done.status, done.failed, done.error) == ("done", 0, None), done.summary()
    assert job in JOBS


def test_a_numeric_range_error_says_so_and_blames_no_text() -> None:
    error = psycopg.errors.NumericValueOutOfRange("value out of range: underflow")
    translated = translate(error)
    assert isinstance(translated, InvalidInputError)
    assert "number is out of range" in str(translated)
    assert "NUL" not in str(translated)


def test_one_users_unreadable_memory_fails_that_user_and_the_others_run(
        store: PostgresMemoryStore, clock: Clock, pg_uri: str) -> None:
    # The real nightly job, three users, one of whose memories no longer reads as a
    # time (written around the store): that user's part fails and rolls back, and the
    # others are done, two years on.
    for user in ("night-a", "night-b", "night-c"):
        at = clock.now
        rec = MemoryRecord(content="Fact about gardening.", kind=Kind.PROFILE_FACT,
                           layer=Layer.SEMANTIC, occurred_at=at, last_accessed_at=at)
        store.put(("memories", user, "work"), "fact", rec.to_value())
    with psycopg.connect(pg_uri) as conn:
        conn.execute("""UPDATE langmem_items SET value = jsonb_set(value,
            '{last_accessed_at}', '"the day after tomorrow"')
            WHERE user_id = 'night-b' AND key = 'fact'""")
    night = run(JobContext(store, settings=MemorySettings()), "lifecycle",
                now=clock.now + timedelta(days=800))
    assert (night.status, night.users, night.failed) == ("done", 2, 1)
    assert list(night.failures) == ["night-b"]
    assert "SQLSTATE 22007" in night.failures["night-b"]
    assert "NUL" not in night.failures["night-b"]
    with psycopg.connect(pg_uri) as conn:
        scored = {u for (u,) in conn.execute(
            "SELECT DISTINCT user_id FROM langmem_decay WHERE user_id LIKE 'night-%'")}
    assert scored == {"night-a", "night-c"}
