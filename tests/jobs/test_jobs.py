"""The job registry: what is registered, and each job run on the real database."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import ConfigurationError, MemoryLayer, MemorySettings
from langmem_layer.jobs import JOBS, Job, JobContext, JobOption, JobResult, register
from langmem_layer.types import Kind, Layer, MemoryRecord
from tests.facade.test_sessions import checkpoints, say
from tests.facade.test_working import build_graph, queue_entries
from tests.fakes import Clock


def test_registry_holds_every_job_with_its_schedule() -> None:
    assert {name: job.schedule for name, job in JOBS.items()} == {
        "index-large-users": "daily",
        "sweep-ttl": "daily",
        "purge-embedding-cache": "weekly",
        "sweep-sessions": "daily",
        "extract": None,
        "lifecycle": "daily",
        "purge-expired": "monthly",
        "reextract": None,
        "consolidate": "daily",
        "reflect": "weekly",
        "summarize": "daily",
        "procedural-profile": "weekly",
        "context-vectors": "daily",
    }
    assert all(name == job.name and job.summary for name, job in JOBS.items())
    assert {n for n, j in JOBS.items() if j.needs_embeddings} == {
        "index-large-users", "extract", "reextract", "consolidate", "reflect", "summarize",
        "context-vectors"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        JOBS["sweep-ttl"].schedule = "hourly"  # type: ignore[misc]


def test_an_option_that_extracts_needs_embeddings() -> None:
    sweep = JOBS["sweep-sessions"]
    assert not sweep.embeds({})
    assert not sweep.embeds({"extract": False, "prune": "delete"})
    assert sweep.embeds({"extract": True})


def test_registering_a_name_twice_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="already registered"):
        register("sweep-ttl", "again")(lambda ctx, *, now=None: JobResult("sweep-ttl"))
    assert JOBS["sweep-ttl"].summary == "delete items whose TTL has passed"


def test_unknown_option_is_refused_before_the_job_runs(store) -> None:
    with pytest.raises(ConfigurationError, match=r"no option 'hours'.*ttl_hours"):
        JOBS["sweep-sessions"].run(JobContext(store), hours=3)


def test_option_parsing() -> None:
    prune = JOBS["sweep-sessions"].option("prune")
    assert prune.flag == "--prune"
    assert prune.parse("delete") == "delete"
    with pytest.raises(ConfigurationError, match="one of off, keep_latest, delete"):
        prune.parse("all")
    flag = JobOption("extract", bool)
    assert [flag.parse(t) for t in ("true", "NO", "1", "off")] == [True, False, True, False]
    with pytest.raises(ConfigurationError, match="of type bool"):
        flag.parse("maybe")
    with pytest.raises(ConfigurationError, match="of type int"):
        JOBS["index-large-users"].option("threshold").parse("many")


def test_result_summary_and_failure() -> None:
    assert JobResult("x", {"deleted": 2}, "deleted {deleted} items").summary() == (
        "deleted 2 items")
    result = JobResult("x", {"done": 3, "failed": 1})
    assert result.summary() == "x: 3 done, 1 failed"
    assert result.failed == 1
    assert JobResult("x").summary() == "x: nothing to do"
    assert JobResult("x").failed == 0


def test_a_job_defined_in_code_runs_through_run(store) -> None:
    seen = {}

    def count(ctx: JobContext, *, now=None, **options) -> JobResult:
        seen.update(options, now=now)
        return JobResult("count", {"items": 0})

    job = Job("count", "count", None, False, count, (JobOption("limit", int),))
    assert job.run(JobContext(store), limit=None).summary() == "count: 0 items"
    assert seen == {"now": None}  # None means the job's default: not passed on


def test_sweep_ttl_runs_at_the_given_time(store, clock: Clock) -> None:
    rec = MemoryRecord(content="Temporary door code is 4821.", kind=Kind.PROFILE_FACT,
                       layer=Layer.SEMANTIC, occurred_at=clock.now,
                       last_accessed_at=clock.now, expires_at=clock.now + timedelta(hours=1))
    store.put(("memories", "u1", "work"), "code", rec.to_value())
    ctx = JobContext(store)
    assert JOBS["sweep-ttl"].run(ctx, now=clock.now).counts == {"deleted": 0}
    result = JOBS["sweep-ttl"].run(ctx, now=clock.now + timedelta(hours=2))
    assert (result.summary(), result.failed) == ("deleted 1 expired items", 0)


def test_purge_embedding_cache_runs_at_the_given_time(store, clock: Clock) -> None:
    store.put(("docs", "u1"), "a", {"text": "an old note"})
    ctx = JobContext(store)
    assert JOBS["purge-embedding-cache"].run(ctx, now=clock.now).counts == {"deleted": 0}
    result = JOBS["purge-embedding-cache"].run(ctx, now=clock.now + timedelta(days=31))
    assert result.summary() == "deleted 1 stale cached embeddings"


def test_index_large_users_takes_a_threshold(store, clock: Clock) -> None:
    user = f"u-{uuid.uuid4().hex[:8]}"
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    for n in range(3):
        layer.remember(user, f"Fact number {n} about the garden.")
    ctx = JobContext(store, layer=layer)
    assert JOBS["index-large-users"].run(ctx, threshold=4).counts == {"indexed": 0}
    result = JOBS["index-large-users"].run(ctx, threshold=3)
    assert (result.summary(), result.detail) == ("indexed 1 large users", [user])
    assert JOBS["index-large-users"].run(ctx, threshold=3).detail == []  # idempotent


def test_extract_is_one_pass_of_the_queue(store, clock: Clock) -> None:
    queued = MemoryLayer(store, settings=MemorySettings(extract_every_n_turns=1000), clock=clock)
    queued.admin.submit("u1", [HumanMessage("I live in Lisbon.", id="j1")], thread_id="t")
    ctx = JobContext(store)  # builds its own layer, inline, from the environment
    result = JOBS["extract"].run(ctx)
    assert (result.summary(), result.failed) == ("extracted 1 turns, 0 failed (kept for retry)", 0)
    assert [r.record.content for r in queued.list("u1")] == ["Lives in Lisbon."]
    assert JOBS["extract"].run(ctx).counts == {"extracted": 0, "failed": 0}


@pytest.mark.usefixtures("clean_working_tables")
def test_sweep_sessions_closes_idle_threads(store, saver, pg_uri: str, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    graph = build_graph(layer, extract=False).compile(store=store, checkpointer=saver)
    thread = uuid.uuid4().hex
    say(graph, "u-job", thread, "I live in Oslo.", clock=clock)
    ctx = JobContext(store, database_url=pg_uri, layer=layer)
    job = JOBS["sweep-sessions"]
    assert job.run(ctx, now=clock.now).counts["closed"] == 0
    result = job.run(ctx, now=clock.now + timedelta(days=2), prune="keep_latest")
    assert result.summary().startswith(
        "closed 1 idle threads, queued 1 turns for extraction, pruned 1, failed 0; purged ")
    assert result.detail.closed == [("u-job", thread)]
    assert len(queue_entries(pg_uri, "u-job")) == 1  # not extracted: no extract option
    assert checkpoints(saver, thread) == 1
