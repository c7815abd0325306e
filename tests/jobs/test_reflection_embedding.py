"""The reflection jobs' embedding work on the real database: each distinct text embedded
once per run, many users' texts per model call, users with nothing new passed over, and
two runners sharing a job's users without overlap."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from langmem_layer import MemorySettings
from langmem_layer.jobs import JOBS, JobContext, JobRun, run, run_due
from langmem_layer.jobs.batching import RunEmbeddings
from langmem_layer.sql.jobs import shard_of
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.synth import OfflineSynthesizer
from langmem_layer.synth.synthesizer import SynthesisOutcome, SynthesisTask
from langmem_layer.types import Kind, Layer, MemoryRecord, Source
from tests.fakes import Clock, CountingEmbeddings

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(days=60)
USERS = ["u1", "u2", "u3", "u4", "u5"]


class CountingSynthesizer(OfflineSynthesizer):
    """The offline synthesizer, counting its tasks."""

    def __init__(self) -> None:
        self.tasks = 0

    def synthesize(self, task: SynthesisTask[Any]) -> SynthesisOutcome[Any]:
        self.tasks += 1
        return super().synthesize(task)


def put(store: PostgresMemoryStore, user: str, key: str, content: str, at: datetime,
        thread: str, refs: tuple[str, ...] = ()) -> None:
    rec = MemoryRecord(content=content, kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                       occurred_at=at, last_accessed_at=at, refs=list(refs),
                       source=Source(thread_id=thread))
    store.put(("memories", user, "work"), key, rec.to_value())


def seed(store: PostgresMemoryStore, users: list[str]) -> None:
    """Every user: the same topic on the same days (so the same consolidated text), and a
    topic of their own (their own text)."""
    for n, user in enumerate(users):
        put(store, user, "r1", "Studied Romans 8 and the promise that all things work "
            "together.", T0 + timedelta(days=30), "t1", ("romans 8",))
        put(store, user, "r2", "Came back to Romans 8: wonders whether verse 28 covers "
            "suffering?", T0 + timedelta(days=40), "t2", ("romans 8",))
        put(store, user, "r3", "Decided Romans 8 is about hope in suffering.",
            T0 + timedelta(days=55), "t3", ("romans 8",))
        hobby = f"hobby{n}"
        put(store, user, "h1", f"Started {hobby} lessons with a coach.",
            T0 + timedelta(days=45 + n), "t4", (hobby,))
        put(store, user, "h2", f"Practised {hobby} for an hour.",
            T0 + timedelta(days=50 + n), "t5", (hobby,))


@pytest.fixture
def counting(pg_uri: str, store: PostgresMemoryStore, clock: Clock
             ) -> Iterator[tuple[PostgresMemoryStore, CountingEmbeddings]]:
    """The seeded database (``store`` empties it), opened again with a counting model
    of the same vectors."""
    seed(store, USERS)
    model = CountingEmbeddings(dims=64)
    index = {"embed": model, "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as s:
        yield s, model


def written(pg_uri: str, synthesis: str) -> list[str]:
    """Contents of the active records a job wrote, every user's."""
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT value ->> 'content' FROM langmem_items WHERE is_memory "
            "AND value -> 'metadata' ->> 'synthesis' = %s AND value ->> 'status' = 'active'",
            (synthesis,)).fetchall()
    return [r[0] for r in rows]


def decision_logs(pg_uri: str, job: str) -> dict[str, int]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute("SELECT user_id, count(*) FROM langmem_ingest_log "
                            "WHERE agent_id = %s GROUP BY user_id", (f"job:{job}",)).fetchall()
    return dict(rows)


@pytest.mark.parametrize(("job", "synthesis"), [("consolidate", "consolidation"),
                                                 ("summarize", "temporal_summary")])
def test_a_run_embeds_each_distinct_text_once_in_fewer_calls_than_users(
        counting: tuple[PostgresMemoryStore, CountingEmbeddings], pg_uri: str, job: str,
        synthesis: str) -> None:
    store, model = counting
    synth = CountingSynthesizer()
    ctx = JobContext(store, settings=MemorySettings(), synthesizer=synth)

    first = run(ctx, job, now=NOW)

    assert first.users == len(USERS) and not first.failed
    contents = written(pg_uri, synthesis)
    assert len(contents) >= 2 * len(USERS)
    # Users share some texts (the same topic on the same days), and each distinct text
    # went to the model exactly once, however many users wrote it.
    assert len(set(contents)) < len(contents)
    assert sorted(model.texts) == sorted(set(contents))
    # Many users per model call.
    assert len(model.batches) < len(USERS)
    assert synth.tasks > 0

    # Again over the same data: every user passed over in one statement; nothing
    # synthesized, nothing embedded, nothing written.
    model.batches.clear()
    synth.tasks = 0
    again = run(ctx, job, now=NOW, force=True)
    assert again.counts == {"skipped": len(USERS)}
    assert model.batches == [] and synth.tasks == 0
    assert sorted(written(pg_uri, synthesis)) == sorted(contents)

    # One user's new memory: that user runs again, the others are passed over.
    put(store, "u2", "h3", "Practised hobby1 with the coach again.",
        NOW - timedelta(days=2), "t6", ("hobby1",))
    model.batches.clear()
    third = run(ctx, job, now=NOW, force=True)
    assert third.counts["skipped"] == len(USERS) - 1
    assert synth.tasks > 0
    assert set(model.texts) <= set(written(pg_uri, synthesis))


def test_summarize_takes_up_a_period_completed_since_its_last_run(
        counting: tuple[PostgresMemoryStore, CountingEmbeddings], pg_uri: str) -> None:
    """A day still running at the last run holds memories written before it: with no
    new data since, the next day's run still summarizes that day."""
    store, _ = counting
    ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
    put(store, "u1", "late", "Practised hobby0 late in the evening.", NOW - timedelta(hours=1),
        "t7", ("hobby0",))
    run(ctx, "summarize", now=NOW, user="u1")
    before = written(pg_uri, "temporal_summary")

    nxt = run(ctx, "summarize", now=NOW + timedelta(days=1), user="u1")

    assert "skipped" not in nxt.counts and nxt.counts.get("created", 0) >= 1
    assert len(written(pg_uri, "temporal_summary")) > len(before)
    # The same day again: nothing new.
    assert run(ctx, "summarize", now=NOW + timedelta(days=1), user="u1",
               force=True).counts == {"skipped": 1}


def test_a_changed_option_runs_the_user_again(
        counting: tuple[PostgresMemoryStore, CountingEmbeddings]) -> None:
    store, _ = counting
    ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
    run(ctx, "consolidate", now=NOW, user="u1")
    assert run(ctx, "consolidate", now=NOW, user="u1", force=True).counts == {"skipped": 1}
    other = run(ctx, "consolidate", now=NOW, user="u1", force=True,
                options={"window_days": 30})
    assert "skipped" not in other.counts


def test_an_unrecorded_run_passes_over_no_one(
        counting: tuple[PostgresMemoryStore, CountingEmbeddings]) -> None:
    """Skipping is for recorded runs: a dry run or a run of the function itself works
    as before."""
    store, _ = counting
    ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
    run(ctx, "consolidate", now=NOW)
    dry = run(ctx, "consolidate", now=NOW, dry_run=True)
    assert dry.counts == {"unchanged": 2 * len(USERS)}
    assert JOBS["consolidate"].function(ctx, "u1", now=NOW) == {"unchanged": 2}


def test_run_embeddings_embeds_a_text_once_per_run() -> None:
    model = CountingEmbeddings(dims=16)
    run_model = RunEmbeddings(model, batch_size=3)
    run_model.prefetch(["a b", "c d", "a b", "e f", "g h"])
    assert model.batches == [["a b", "c d", "e f"], ["g h"]]
    vectors = run_model.embed_documents(["g h", "a b", "new text"])
    assert model.batches[-1] == ["new text"]
    assert vectors[1] == pytest.approx(model._vec("a b"))
    assert (run_model.calls, run_model.texts) == (3, 5)


def test_run_embeddings_drops_the_least_recently_used_vectors_past_its_budget() -> None:
    model = CountingEmbeddings(dims=16)
    run_model = RunEmbeddings(model, batch_size=10, kept_bytes=3 * 16 * 4)  # 3 vectors
    run_model.prefetch(["a", "b", "c"])
    run_model.prefetch(["a"])  # used again: "b" is now the oldest
    run_model.prefetch(["d"])
    assert list(run_model.vectors) == ["c", "a", "d"]
    run_model.embed_documents(["a", "c", "d"])
    assert model.texts == ["a", "b", "c", "d"]  # nothing embedded twice
    run_model.prefetch(["b", "e", "f", "g"])  # more than the budget at once: all kept
    assert set(run_model.vectors) >= {"b", "e", "f", "g"}


def test_two_runners_share_a_jobs_users_each_exactly_once(
        pg_uri: str, store: PostgresMemoryStore, clock: Clock, index: dict) -> None:
    """Two workers' scheduler passes at once, over more shards than workers: each shard,
    and so each user, is done by exactly one of them."""
    users = [f"w{n}" for n in range(12)]
    seed(store, users)
    shards = 4
    results: dict[str, list[JobRun]] = {}
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as s:
                ctx = JobContext(s, settings=MemorySettings(),
                                 synthesizer=OfflineSynthesizer())
                start.wait()
                results[name] = run_due(ctx, now=NOW, jobs=["consolidate"], shards=shards)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors

    done = {name: {int(r.shard.split("/")[0]) for r in runs}
            for name, runs in results.items()}
    assert sorted(done["a"] | done["b"]) == list(range(shards))
    assert not done["a"] & done["b"]
    by_worker = {name: {u for u in users if shard_of(u, shards) in mine}
                 for name, mine in done.items()}
    assert by_worker["a"] | by_worker["b"] == set(users)
    assert sum(r.users for runs in results.values() for r in runs) == len(users)
    # Each user's work was applied once: one decision log entry each.
    assert decision_logs(pg_uri, "consolidate") == dict.fromkeys(users, 1)


def test_one_users_failure_in_a_batched_run_is_that_users_alone(
        counting: tuple[PostgresMemoryStore, CountingEmbeddings], pg_uri: str) -> None:
    """A user whose part fails while the chunk is prepared is recorded failed, in their
    turn; the users before and after it in the chunk are done, and the failed user's
    texts were never written."""
    store, model = counting
    base = JOBS["consolidate"]

    def fails_for_u3(ctx: JobContext, user_id: str, **kwargs: Any) -> dict[str, int]:
        if user_id == "u3":
            raise ValueError("u3's evidence is broken")
        return base.function(ctx, user_id, **kwargs)  # type: ignore[no-any-return]

    job = dataclasses.replace(base, function=fails_for_u3)
    ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())

    result = run(ctx, job, now=NOW)

    assert result.counts["failed"] == 1 and list(result.failures) == ["u3"]
    assert "u3's evidence is broken" in result.failures["u3"]
    assert result.users == len(USERS) - 1
    assert decision_logs(pg_uri, "consolidate") == {u: 1 for u in USERS if u != "u3"}
    assert len(model.batches) == 1
    # The failed user was not remembered: the next run does them, and skips the others.
    again = run(ctx, "consolidate", now=NOW, force=True)
    assert again.counts == {"skipped": len(USERS) - 1, "created": 2}


class RefusesLargeCalls(CountingEmbeddings):
    """A model that fails on any call of more than ``limit`` texts."""

    def __init__(self, limit: int) -> None:
        super().__init__(dims=64)
        self.limit = limit

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if len(texts) > self.limit:
            raise RuntimeError(f"{len(texts)} texts at once")
        return super().embed_documents(texts)


def test_a_failed_call_for_the_chunk_fails_no_user(pg_uri: str, store: PostgresMemoryStore,
                                                   clock: Clock) -> None:
    """When the model fails on the chunk's call, each user's own write embeds its texts."""
    seed(store, USERS)
    model = RefusesLargeCalls(limit=3)
    index = {"embed": model, "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as s:
        ctx = JobContext(s, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
        result = run(ctx, "consolidate", now=NOW)
    assert result.users == len(USERS) and not result.failed
    assert decision_logs(pg_uri, "consolidate") == dict.fromkeys(USERS, 1)
    # One call per user, none of them holding a text an earlier one embedded.
    assert len(model.batches) == len(USERS)
    assert len(model.texts) == len(set(model.texts))


def test_a_lifecycle_move_is_news_for_the_next_run(
        pg_uri: str, counting: tuple[PostgresMemoryStore, CountingEmbeddings]) -> None:
    """A move writes only the unindexed moved columns (sql/moved.py), never ``value`` nor
    ``updated_at``: the fingerprint reads through them, so an archived memory is not
    passed over."""
    store, _ = counting
    ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
    run(ctx, "consolidate", now=NOW, user="u1")
    assert run(ctx, "consolidate", now=NOW, user="u1", force=True).counts == {"skipped": 1}
    with psycopg.connect(pg_uri) as conn:
        moved = conn.execute(
            "UPDATE langmem_items SET moved = jsonb_build_object('status', 'archived'), "
            "moved_at = %s WHERE user_id = 'u1' AND key = 'h1'", (NOW,)).rowcount
    assert moved == 1
    assert "skipped" not in run(ctx, "consolidate", now=NOW, user="u1", force=True).counts


def test_a_write_between_prepare_and_apply_is_not_overwritten(
        pg_uri: str, counting: tuple[PostgresMemoryStore, CountingEmbeddings],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The prepared writes were built from the data as it was; when another client wrote
    the user's memories since, the job runs again on the data as it is instead."""
    from langmem_layer.jobs import batching

    store, _ = counting
    ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
    run(ctx, "consolidate", now=NOW)
    with psycopg.connect(pg_uri) as conn:
        (key,) = conn.execute(
            "SELECT key FROM langmem_items WHERE user_id = 'u1' AND is_memory "
            "AND value -> 'metadata' ->> 'synthesis' = 'consolidation' "
            "AND value ->> 'content' ILIKE '%%romans%%'").fetchone()
    # New evidence, so the next run rewrites the record.
    put(store, "u1", "r4", "Read Romans 8 again: verse 28 finally makes sense.",
        NOW - timedelta(days=1), "t6", ("romans 8",))
    real = batching.prepare

    def prepare_then_edit(*args: Any, **kwargs: Any) -> batching.Prepared:
        prepared = real(*args, **kwargs)
        if args[3] == "u1":  # the user annotates the record meanwhile
            with psycopg.connect(pg_uri, autocommit=True) as conn:
                conn.execute(
                    "UPDATE langmem_items SET value = jsonb_set(value, '{metadata,note}', "
                    "'\"mine\"'), updated_at = %s WHERE user_id = 'u1' AND key = %s",
                    (NOW, key))
        return prepared

    monkeypatch.setattr(batching, "prepare", prepare_then_edit)
    run(ctx, "consolidate", now=NOW + timedelta(hours=1), force=True)
    with psycopg.connect(pg_uri) as conn:
        (value,) = conn.execute("SELECT value FROM langmem_items WHERE user_id = 'u1' "
                                "AND key = %s", (key,)).fetchone()
    assert value["metadata"].get("note") == "mine"
    assert "r4" in value["metadata"]["evidence"]  # and the run took the new evidence
