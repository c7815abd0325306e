"""The reflection jobs on the real database: consolidation (episodic → semantic) and
reflections, with the offline synthesizer and with a scripted chat model; privacy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.jobs.runs import run
from langmem_layer.jobs.status import status
from langmem_layer.store import ops as mops
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.synth import ModelSynthesizer, OfflineSynthesizer
from langmem_layer.types import Kind, Layer, MemoryRecord, Policy, Source, Status
from tests.fakes import Clock, ScriptedStructuredModel

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def put(store: PostgresMemoryStore, key: str, content: str, at: datetime, thread: str,
        *, user: str = "u1", refs: tuple[str, ...] = (), kind: Kind = Kind.EPISODIC_EVENT,
        layer: Layer = Layer.EPISODIC, **extra: Any) -> None:
    rec = MemoryRecord(content=content, kind=kind, layer=layer, occurred_at=at,
                       last_accessed_at=at, refs=list(refs), source=Source(thread_id=thread),
                       **extra)
    store.put(("memories", user, "work"), key, rec.to_value())


def get(store: PostgresMemoryStore, key: str, user: str = "u1") -> MemoryRecord:
    (item,) = store.batch([mops.FindMemoryOp(user, key)])
    assert item is not None, key
    return MemoryRecord.model_validate(item.value)


def synthesized(pg_uri: str, user: str = "u1", kind: str = "consolidation",
                status: str = "active") -> dict[str, MemoryRecord]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT key, value FROM langmem_items WHERE user_id = %s AND is_memory "
            "AND value -> 'metadata' ->> 'synthesis' = %s AND value ->> 'status' = %s",
            (user, kind, status)).fetchall()
    return {k: MemoryRecord.model_validate(v) for k, v in rows}


def links(store: PostgresMemoryStore, key: str, user: str = "u1") -> set[str]:
    (found,) = store.batch([mops.LinksOp(user, (key,))])
    return {li.dst_key for li in found if li.src_key == key and li.link_type == "derived_from"}


def vector(pg_uri: str, key: str) -> str | None:
    with psycopg.connect(pg_uri) as conn:
        row = conn.execute("SELECT embedding::text FROM langmem_embeddings "
                           "WHERE user_id = 'u1' AND key = %s", (key,)).fetchone()
    return row[0] if row else None


def consolidate(ctx: JobContext, now: datetime, user: str = "u1") -> dict[str, int]:
    return JOBS["consolidate"].function(ctx, user, now=now)


def reflect(ctx: JobContext, now: datetime, user: str = "u1") -> dict[str, int]:
    return JOBS["reflect"].function(ctx, user, now=now)


def romans(store: PostgresMemoryStore) -> list[str]:
    """A topic engaged in three sessions over two months, and unrelated noise."""
    put(store, "e1", "Studied Romans 8 and the promise that all things work together.",
        T0, "t1", refs=("romans 8",))
    put(store, "e2", "Came back to Romans 8: wonders whether verse 28 covers suffering?",
        T0 + timedelta(days=20), "t2", refs=("romans 8",))
    put(store, "e3", "Decided Romans 8 is about hope in suffering, not prosperity.",
        T0 + timedelta(days=55), "t3", refs=("romans 8",))
    put(store, "n1", "Bought a new bicycle helmet.", T0 + timedelta(days=3), "t9")
    return ["e1", "e2", "e3"]


# -- registry ---------------------------------------------------------------------------


def test_jobs_are_registered_per_user_on_a_schedule() -> None:
    assert (JOBS["consolidate"].schedule, JOBS["consolidate"].per_user) == ("daily", True)
    assert (JOBS["reflect"].schedule, JOBS["reflect"].per_user) == ("weekly", True)


# -- consolidation, offline ----------------------------------------------------------------


def test_a_topic_in_three_sessions_becomes_one_semantic_record(
        store: PostgresMemoryStore, pg_uri: str) -> None:
    episodes = romans(store)
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    now = T0 + timedelta(days=60)
    assert consolidate(ctx, now) == {"created": 1}
    ((key, rec),) = synthesized(pg_uri).items()
    assert rec.layer == Layer.SEMANTIC and rec.policy == Policy.SPEAK
    assert links(store, key) == set(episodes)
    assert vector(pg_uri, key) is not None
    text = rec.content
    assert "3 sessions between March and April 2026" in text
    assert "Has discussed Romans 8 in 3 sessions" in text
    assert "settled on: Romans 8 is about hope in suffering" in text
    assert "still open: wonders whether verse 28 covers suffering" in text
    assert "bicycle" not in text
    # A synthesis, not the episodes glued together.
    assert sum(get(store, e).content.rstrip(".") in text for e in episodes) <= 1
    # Re-run: nothing new, no duplicate.
    assert consolidate(ctx, now + timedelta(days=1)) == {"unchanged": 1}
    assert len(synthesized(pg_uri)) == 1


def test_a_new_session_rewrites_the_record_in_place_with_history(
        store: PostgresMemoryStore, pg_uri: str) -> None:
    romans(store)
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    consolidate(ctx, T0 + timedelta(days=60))
    ((key, before),) = synthesized(pg_uri).items()
    vec_before = vector(pg_uri, key)
    put(store, "e4", "Read Romans 8 with a friend who lost her job.",
        T0 + timedelta(days=70), "t4", refs=("romans 8",))
    assert consolidate(ctx, T0 + timedelta(days=71)) == {"rewritten": 1}
    ((key2, after),) = synthesized(pg_uri).items()
    assert key2 == key
    assert "4 sessions" in after.content
    assert after.history[-1].event == "content" and after.history[-1].old == before.content
    assert after.reinforcement_count == 1
    assert vector(pg_uri, key) != vec_before
    assert "e4" in links(store, key)


def test_paraphrases_merge_and_rerun_makes_no_duplicate(store: PostgresMemoryStore,
                                                        pg_uri: str) -> None:
    put(store, "p1", "Lives in Berlin.", T0, "t1", refs=("berlin",))
    put(store, "p2", "Is based in Berlin these days.", T0 + timedelta(days=9), "t2",
        refs=("berlin",))
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    assert consolidate(ctx, T0 + timedelta(days=10)) == {"created": 1}
    assert consolidate(ctx, T0 + timedelta(days=11)) == {"unchanged": 1}
    ((key, rec),) = synthesized(pg_uri).items()
    assert links(store, key) == {"p1", "p2"}
    assert "berlin" in rec.content.lower()


def test_an_extracted_fact_is_reinforced_not_duplicated(store: PostgresMemoryStore,
                                                        pg_uri: str) -> None:
    put(store, "f1", "Lives in Berlin.", T0, "t0", kind=Kind.PROFILE_FACT,
        layer=Layer.SEMANTIC)
    put(store, "p1", "Lives in Berlin.", T0 + timedelta(days=1), "t1", refs=("berlin",))
    put(store, "p2", "Is based in Berlin now.", T0 + timedelta(days=9), "t2",
        refs=("berlin",))
    put(store, "p3", "Moved to Berlin last year.", T0 + timedelta(days=12), "t3",
        refs=("berlin",))
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    assert consolidate(ctx, T0 + timedelta(days=20)) == {"reinforced": 1}
    assert synthesized(pg_uri) == {}
    fact = get(store, "f1")
    assert fact.content == "Lives in Berlin." and fact.reinforcement_count == 1
    assert links(store, "f1") == {"p1", "p2", "p3"}


def test_one_session_without_conclusion_is_not_consolidated(store: PostgresMemoryStore,
                                                            pg_uri: str) -> None:
    put(store, "a", "Talked about sourdough starters.", T0, "t1", refs=("sourdough",))
    put(store, "b", "More sourdough: hydration levels.", T0, "t1", refs=("sourdough",))
    put(store, "c", "Old sourdough chat.", T0 - timedelta(days=200), "t0",
        refs=("sourdough",))  # outside the 90-day window
    put(store, "d", "Decided to switch to a standing desk.", T0, "t2")
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    assert consolidate(ctx, T0 + timedelta(days=1)) == {"created": 1}
    ((key, rec),) = synthesized(pg_uri).items()
    assert links(store, key) == {"d"} and "standing desk" in rec.content


# -- consolidation with a chat model -------------------------------------------------------


def good(text: str) -> dict[str, Any]:
    return {"content": text, "topic": "romans 8", "settled": ["hope"], "open_questions": []}


def test_the_model_sees_the_evidence_and_the_existing_record(
        store: PostgresMemoryStore, pg_uri: str) -> None:
    episodes = romans(store)
    model = ScriptedStructuredModel(script=[
        good("Has worked through Romans 8 in three sessions; reads it as hope."),
        good("Has worked through Romans 8 in four sessions; reads it as hope in loss.")])
    ctx = JobContext(store, synthesizer=ModelSynthesizer(model))
    result = run(ctx, "consolidate", user="u1", now=T0 + timedelta(days=60))
    assert result.counts == {"created": 1} and result.tokens > 100
    prompt = model.text(0)
    for e in episodes:
        assert f"id={e}" in prompt and get(store, e).content in prompt
    assert "bicycle" not in prompt
    ((key, rec),) = synthesized(pg_uri).items()
    assert rec.content.startswith("Has worked through Romans 8 in three")
    assert links(store, key) == set(episodes) and vector(pg_uri, key) is not None
    put(store, "e4", "Read Romans 8 with a friend who lost her job.",
        T0 + timedelta(days=70), "t4", refs=("romans 8",))
    run(ctx, "consolidate", user="u1", now=T0 + timedelta(days=71))
    assert "Existing record to rewrite" in model.text(1) and rec.content in model.text(1)
    after = get(store, key)
    assert after.history[-1].old == rec.content and "four sessions" in after.content
    (st,) = [s for s in status(ctx, now=T0 + timedelta(days=71)) if s.job == "consolidate"]
    assert st.tokens > 100


def test_invalid_output_is_retried_once_with_the_error_shown(store: PostgresMemoryStore,
                                                             pg_uri: str) -> None:
    romans(store)
    model = ScriptedStructuredModel(
        script=[{"content": "short"}, good("Settled on Romans 8 as hope.")])
    ctx = JobContext(store, synthesizer=ModelSynthesizer(model))
    assert consolidate(ctx, T0 + timedelta(days=60))["created"] == 1
    assert len(model.prompts) == 2
    assert "That output was invalid" in model.text(1) and "content" in model.text(1)


def test_a_failed_synthesis_keeps_the_evidence_and_logs_the_raw_output(
        store: PostgresMemoryStore, pg_uri: str) -> None:
    episodes = romans(store)
    before = {e: get(store, e) for e in episodes}
    model = ScriptedStructuredModel(script=["{not json", RuntimeError("503 from the model")])
    ctx = JobContext(store, synthesizer=ModelSynthesizer(model))
    result = run(ctx, "consolidate", user="u1", now=T0 + timedelta(days=60))
    assert result.counts == {"failed": 1}
    assert synthesized(pg_uri) == {}
    assert {e: get(store, e) for e in episodes} == before
    (entry,) = store.batch([mops.IngestLogOp("u1", 5)])[0]
    (decision,) = entry.decisions
    assert decision["action"] == "failed" and "503" in decision["error"]
    assert decision["raw"][0] == "{not json"
    # The next run, with the model back, consolidates them.
    model.script.append(good("Has worked through Romans 8; reads it as hope."))
    assert consolidate(ctx, T0 + timedelta(days=61))["created"] == 1


# -- reflections ---------------------------------------------------------------------------


def humour(store: PostgresMemoryStore) -> list[str]:
    put(store, "h1", "After a stressful deadline a joke about spreadsheets lifted the mood.",
        T0, "t1", refs=("humour", "stress"))
    put(store, "h2", "Laughed at a pun after a hard day of reviews.",
        T0 + timedelta(days=8), "t2", refs=("humour", "stress"))
    put(store, "h3", "Asked for something funny after a tense meeting.",
        T0 + timedelta(days=15), "t3", refs=("humour", "stress"))
    return ["h1", "h2", "h3"]


def test_a_reflection_is_linked_to_its_episodes_and_revalidated(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    evidence = humour(store)
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    now = T0 + timedelta(days=20)
    assert reflect(ctx, now) == {"created": 1}
    ((key, rec),) = synthesized(pg_uri, kind="reflection").items()
    assert rec.kind == Kind.REFLECTION and rec.policy == Policy.ADAPT
    assert links(store, key) == set(evidence) and rec.confidence == pytest.approx(0.7)
    assert "3 conversations" in rec.content and vector(pg_uri, key) is not None
    assert reflect(ctx, now + timedelta(days=7)) == {"unchanged": 1}
    # One piece forgotten: re-validated, confidence down; two forgotten: retired.
    layer_forget(store, "h1", now)
    counts = reflect(ctx, now + timedelta(days=8))
    assert counts["revalidated"] == 1
    rec = get(store, key)
    assert rec.confidence == pytest.approx(0.6) and rec.history[-1].event == "confidence"
    store.batch([mops.SetStatusOp("u1", ("h2",), Status.CONTRADICTED, now, "corrected")])
    assert reflect(ctx, now + timedelta(days=9))["retired"] == 1
    assert get(store, key).status == Status.ARCHIVED


def layer_forget(store: PostgresMemoryStore, key: str, now: datetime) -> None:
    from langmem_layer.control import FORGOTTEN

    store.batch([mops.SetStatusOp("u1", (key,), Status.ARCHIVED, now, FORGOTTEN)])


def test_reflection_with_a_model_checks_the_cited_evidence(store: PostgresMemoryStore,
                                                           pg_uri: str) -> None:
    humour(store)
    bad = {"insights": [{"content": "Responds well to humour after stress.",
                         "evidence": ["h1", "zzz"], "confidence": 0.9}]}
    ok = {"insights": [{"content": "Responds well to humour after a stressful day.",
                        "evidence": ["h1", "h2", "h3"], "confidence": 0.8}]}
    model = ScriptedStructuredModel(script=[bad, ok])
    ctx = JobContext(store, synthesizer=ModelSynthesizer(model))
    counts = reflect(ctx, T0 + timedelta(days=20))
    assert counts["created"] == 1 and counts["tokens"] > 0
    assert "id=h2" in model.text(0) and "zzz" in model.text(1)
    ((key, rec),) = synthesized(pg_uri, kind="reflection").items()
    assert rec.content == "Responds well to humour after a stressful day."
    assert rec.confidence == pytest.approx(0.7)  # capped by its three pieces of evidence
    assert links(store, key) == {"h1", "h2", "h3"}


# -- privacy -------------------------------------------------------------------------------


def private_world(store: PostgresMemoryStore) -> None:
    put(store, "b0", "Do not bring up the divorce.", T0, "t0", kind=Kind.PROTOCOL,
        layer=Layer.PROCEDURAL, policy=Policy.AVOID, refs=("divorce",))
    for n in range(3):
        put(store, f"d{n}", f"Talked about the divorce paperwork, part {n}.",
            T0 + timedelta(days=n * 5), f"td{n}", refs=("divorce",))
        put(store, f"s{n}", f"Went to a salsa class with Ana, week {n}.",
            T0 + timedelta(days=n * 5), f"ts{n}", refs=("salsa",), status=Status.ARCHIVED)
        put(store, f"o{n}", f"Other user's secret garden plan {n}.",
            T0 + timedelta(days=n * 5), f"to{n}", user="u2", refs=("garden",))
    humour(store)


@pytest.mark.parametrize("with_model", [False, True])
def test_nothing_private_reaches_a_synthesis(store: PostgresMemoryStore, pg_uri: str,
                                             with_model: bool) -> None:
    private_world(store)
    reply = {"insights": [{"content": "Responds well to humour after a stressful day.",
                           "evidence": ["h1", "h2"], "confidence": 0.8}]}
    model = ScriptedStructuredModel(script=[good("Likes humour after stress."), reply])
    synth = ModelSynthesizer(model) if with_model else OfflineSynthesizer()
    ctx = JobContext(store, synthesizer=synth)
    now = T0 + timedelta(days=20)
    consolidate(ctx, now)
    reflect(ctx, now)
    written = {**synthesized(pg_uri), **synthesized(pg_uri, kind="reflection")}
    assert written
    for key, rec in written.items():
        text = rec.content.lower()
        assert "divorce" not in text and "salsa" not in text and "garden" not in text
        assert links(store, key) <= {"h1", "h2", "h3"}
    for prompt in model.prompts:
        text = "\n".join(m.text for m in prompt).lower()
        assert "divorce" not in text and "salsa" not in text and "garden" not in text


def test_a_new_boundary_retires_what_it_covers(store: PostgresMemoryStore,
                                               pg_uri: str) -> None:
    romans(store)
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    consolidate(ctx, T0 + timedelta(days=60))
    ((key, _),) = synthesized(pg_uri).items()
    put(store, "b1", "Never mention Romans 8 again.", T0 + timedelta(days=61), "t9",
        kind=Kind.PROTOCOL, layer=Layer.PROCEDURAL, policy=Policy.AVOID, refs=("romans 8",))
    counts = consolidate(ctx, T0 + timedelta(days=62))
    assert counts == {"retired": 1}
    assert get(store, key).status == Status.ARCHIVED
    assert synthesized(pg_uri) == {}
