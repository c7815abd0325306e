"""Temporal summaries, the procedural profile and learned agent trust
 on the real database: offline and with a scripted chat model, privacy, the
narrative arc in the block, and a 90-day scenario through the graph."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.errors import InvalidInputError
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.jobs.runs import run
from langmem_layer.jobs.temporal_summaries import periods_ending
from langmem_layer.read.block import NARRATIVE
from langmem_layer.read.rank import decay_score
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.synth import ModelSynthesizer, OfflineSynthesizer
from langmem_layer.types import Kind, Layer, MemoryRecord, Policy, Source, Status
from langmem_layer.write.apply import ingest
from langmem_layer.write.profile_record import explicit_preference
from tests.facade.test_working import build_graph
from tests.fakes import Clock, ScriptedStructuredModel

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday


def put(store: PostgresMemoryStore, key: str, content: str, at: datetime, thread: str,
        *, user: str = "u1", refs: tuple[str, ...] = (), agent: str | None = None,
        kind: Kind = Kind.EPISODIC_EVENT, layer: Layer = Layer.EPISODIC, **extra: Any) -> None:
    rec = MemoryRecord(content=content, kind=kind, layer=layer, occurred_at=at,
                       last_accessed_at=at, refs=list(refs),
                       source=Source(thread_id=thread, agent_id=agent), **extra)
    store.put(("memories", user, "work"), key, rec.to_value())


def log(layer: MemoryLayer, user: str, thread: str, text: str, at: datetime) -> None:
    n = uuid.uuid4().hex[:8]
    layer.threads.record_turn(user, [HumanMessage(text, id=f"h{n}"), AIMessage(f"Noted: {text}",
                                                                          id=f"a{n}")],
                      thread_id=thread, profile="work", now=at)


def summaries(pg_uri: str, user: str = "u1", period: str | None = None,
              status: str = "active") -> dict[str, MemoryRecord]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT key, value FROM langmem_items WHERE user_id = %s AND is_memory "
            "AND value -> 'metadata' ->> 'synthesis' = 'temporal_summary' "
            "AND value ->> 'status' = %s", (user, status)).fetchall()
    out = {k: MemoryRecord.model_validate(v) for k, v in rows}
    return {k: r for k, r in out.items() if period is None or r.metadata["period"] == period}


def kitchen_week(store: PostgresMemoryStore, layer: MemoryLayer) -> None:
    """A week of conversations about repainting the kitchen, and one boundary."""
    put(store, "k1", "Wants to repaint the kitchen before spring.", T0, "t1",
        refs=("kitchen",))
    put(store, "k2", "Wonders whether to hire a painter for the kitchen?",
        T0 + timedelta(days=1), "t2", refs=("kitchen", "painter"))
    put(store, "k3", "Decided to paint the kitchen sage green.", T0 + timedelta(days=3), "t3",
        refs=("kitchen",))
    log(layer, "u1", "t1", "I want to repaint the kitchen before spring.", T0)
    log(layer, "u1", "t3", "Sage green it is for the kitchen.", T0 + timedelta(days=3))


def summarize(ctx: JobContext, now: datetime, user: str = "u1", **kw: Any) -> dict[str, int]:
    return JOBS["summarize"].function(ctx, user, now=now, **kw)


def test_jobs_are_registered() -> None:
    assert (JOBS["summarize"].schedule, JOBS["summarize"].per_user) == ("daily", True)
    assert (JOBS["procedural-profile"].schedule,
            JOBS["procedural-profile"].per_user) == ("weekly", True)


def test_periods_are_complete_days_weeks_and_months() -> None:
    now = datetime(2026, 3, 11, 9, tzinfo=UTC)  # a Wednesday
    assert periods_ending("week", now, 10)[-1] == (datetime(2026, 3, 2, tzinfo=UTC),
                                                   datetime(2026, 3, 9, tzinfo=UTC))
    assert periods_ending("month", now, 12) == [(datetime(2026, 2, 1, tzinfo=UTC),
                                                 datetime(2026, 3, 1, tzinfo=UTC))]
    assert periods_ending("day", now, 1.5)[-1][1] == datetime(2026, 3, 11, tzinfo=UTC)
    with pytest.raises(ValueError):
        periods_ending("year", now, 10)


def test_a_weekly_summary_is_written_decays_and_reaches_the_block(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    kitchen_week(store, layer)
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    now = T0 + timedelta(days=8)
    counts = summarize(ctx, now)
    assert counts["created"] >= 2 and "failed" not in counts
    ((key, week),) = summaries(pg_uri, period="week").items()
    assert week.kind == Kind.TEMPORAL_SUMMARY and week.policy == Policy.SPEAK
    assert week.metadata["start"].startswith("2026-03-02")
    text = week.content
    assert text.startswith("Week of 2 March 2026:") and "kitchen" in text
    assert "decided: to paint the kitchen sage green" in text
    assert "still open: wonders whether to hire a painter" in text
    # A synthesis, not a concatenation of what was said.
    assert "I want to repaint" not in text
    # Half-life decay: half the score after 180 days without access.
    later = now + timedelta(days=180)
    assert decay_score(week, later) == pytest.approx(week.confidence * 0.5, rel=1e-3)
    # Re-run: nothing new, nothing written.
    assert set(summarize(ctx, now + timedelta(hours=1))) == {"unchanged"}
    # The block shows it when asked about that week, in its own section.
    clock.now = T0 + timedelta(days=10)
    block = layer.context_block("u1", "What did we talk about last week?", profile="work")
    assert block.placements.get(key) == NARRATIVE
    assert f"### {NARRATIVE}" in block.text and "sage green" in block.text
    # Without a named period, the latest recent summary; none once it is old.
    clock.now = T0 + timedelta(days=60)
    assert key not in layer.context_block("u1", "Hello", profile="work").placements
    layer.close()


def test_the_model_sees_the_period_chunked_and_the_output_is_stored(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    kitchen_week(store, layer)
    reply = {"content": "Talked about repainting the kitchen; settled on sage green.",
             "topics": ["kitchen"], "decisions": ["sage green"], "open_questions": []}
    model = ScriptedStructuredModel(script=[reply] * 10)
    ctx = JobContext(store, synthesizer=ModelSynthesizer(model))
    result = run(ctx, "summarize", user="u1", now=T0 + timedelta(days=8),
                 options={"periods": "week", "budget_tokens": 40})
    assert result.counts.get("created") == 1 and result.tokens > 100
    # The period in chunks, then the partial summaries merged in one last call.
    chunks = len(model.prompts) - 1
    assert chunks >= 2
    first = "\n".join(m.text for m in model.prompts[0])
    assert f"Week of 2 March 2026 (part 1 of {chunks})" in first and "id=k1" in first
    last = "\n".join(m.text for m in model.prompts[-1])
    assert "Topic: Week of 2 March 2026\n" in last and reply["content"] in last
    every = "\n".join(m.text for p in model.prompts for m in p)
    for text in ("repaint the kitchen before spring", "hire a painter", "Sage green it is"):
        assert text in every
    (week,) = summaries(pg_uri, period="week").values()
    assert week.content == reply["content"] and week.metadata["synthesizer"].startswith("model")
    layer.close()


@pytest.mark.parametrize("with_model", [False, True])
def test_a_summary_never_repeats_a_boundary_or_private_data(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock, with_model: bool) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    kitchen_week(store, layer)
    # The user set a boundary that week; archived and other users' data exist too.
    put(store, "b0", "Do not bring up the divorce.", T0 + timedelta(days=2), "tb",
        kind=Kind.PROTOCOL, layer=Layer.PROCEDURAL, policy=Policy.AVOID, refs=("divorce",))
    put(store, "d1", "Talked about the divorce paperwork.", T0 + timedelta(days=2), "tb",
        refs=("divorce",))
    log(layer, "u1", "tb", "The divorce paperwork is killing me.", T0 + timedelta(days=2))
    put(store, "s1", "Went to a salsa class with Ana.", T0 + timedelta(days=4), "ts",
        refs=("salsa",), status=Status.ARCHIVED)
    put(store, "o1", "Secret garden plan.", T0 + timedelta(days=4), "to", user="u2",
        refs=("garden",))
    log(layer, "u2", "to", "My secret garden plan.", T0 + timedelta(days=4))
    reply = {"content": "Talked about repainting the kitchen in sage green.",
             "topics": ["kitchen"]}
    model = ScriptedStructuredModel(script=[reply] * 10)
    synth = ModelSynthesizer(model) if with_model else OfflineSynthesizer()
    ctx = JobContext(store, synthesizer=synth)
    summarize(ctx, T0 + timedelta(days=8), periods="week")
    (week,) = summaries(pg_uri, period="week").values()
    written = [week.content.lower(), *(m.text.lower() for p in model.prompts for m in p)]
    for text in written:
        assert "divorce" not in text and "salsa" not in text and "garden" not in text
    assert summaries(pg_uri, user="u2") == {}
    layer.close()


# -- learned trust ------------------------------------------------------------------------


def test_a_corrected_agent_loses_trust_and_ranks_lower(store: PostgresMemoryStore,
                                                       clock: Clock) -> None:
    clock.now = T0
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    assert layer.trust.agent_trust("u1").by_agent == {}
    put(store, "a1", "The user's car is a red Volvo.", T0, "t1", agent="scout",
        kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC, refs=("car",))
    put(store, "b1", "The user's car is parked in the garage.", T0, "t2", agent="helper",
        kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC, refs=("car",))
    put(store, "a2", "The user's bike is a blue Trek.", T0, "t1", agent="scout",
        kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC, refs=("bike",))
    before = [r.key for r in layer.recall("u1", "car", profile="work")]
    assert before[0] == "a1"  # equal trust (0.5 each): the closer match first
    layer.correct("u1", "a2", "The user's bike is a green Trek.")
    trust = layer.trust.agent_trust("u1")
    assert trust.counts["scout"] == (0, 1) and trust.of("scout") == 0.0
    assert trust.of("helper") == 0.5  # no history
    layer.trust.feedback("u1", True, memory_id="b1")
    assert layer.trust.agent_trust("u1").of("helper", "profile_fact") == 1.0
    after = [r.key for r in layer.recall("u1", "car", profile="work")]
    assert after.index("b1") < after.index("a1") if "a1" in after else after[0] == "b1"
    with pytest.raises(InvalidInputError):
        layer.trust.feedback("u1", True)
    layer.close()


def test_the_trust_policy_uses_learned_trust(store: PostgresMemoryStore, clock: Clock) -> None:
    clock.now = T0
    layer = MemoryLayer(store, extraction="inline", clock=clock,
                        settings=MemorySettings(conflict_policy="trust"))
    put(store, "c1", "Lives in Berlin.", T0, "t1", agent="good", kind=Kind.PROFILE_FACT,
        layer=Layer.SEMANTIC, refs=("berlin",), subject="user", predicate="lives_in",
        object="Berlin")
    layer.trust.feedback("u1", False, agent_id="bad")
    layer.trust.feedback("u1", True, agent_id="good")
    op = MemoryOperation(op=OpType.UPDATE, target_id="c1", content="Lives in Paris.",
                         kind=Kind.PROFILE_FACT, subject="user", predicate="lives_in",
                         object="Paris")
    target = layer.get("u1", "c1")
    result = layer.runner.run(ingest(layer.env, "u1", [HumanMessage("I live in Paris.")],
                                      profile="work", thread_id=None, agent_id="bad",
                                      now=T0, operations=[op], targets=[target]))
    assert not result.written
    assert any("outranks" in (d.reason or "") for d in result.decisions)
    layer.close()


# -- procedural profile ---------------------------------------------------------------------


def test_explicit_preferences_are_recognised() -> None:
    assert explicit_preference("Please keep your answers short.") == {"answer_length": "short"}
    assert explicit_preference("Can you go into more detail?") == {
        "answer_length": "detailed"}
    assert explicit_preference("I like short walks.") is None


def test_the_profile_is_inferred_weekly_loaded_every_turn_and_updated_at_once(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    kitchen_week(store, layer)
    log(layer, "u1", "t3", "And the ceiling too?", T0 + timedelta(days=3, minutes=20))
    ctx = JobContext(store)
    assert JOBS["procedural-profile"].function(ctx, "u1", now=T0 + timedelta(days=7)) == {
        "created": 1}
    clock.now = T0 + timedelta(days=7, hours=1)
    block = layer.context_block("u1", "Something unrelated entirely", profile="work")
    (line,) = [ln for ln in block.text.splitlines() if "How this user works" in ln]
    assert "most-discussed topics: kitchen" in line and "follows up in 50%" in line
    assert "(UTC)" in line and "sessions typically ~" in line
    assert "keep answers short" in line and "asked explicitly" not in line  # inferred
    # An explicit preference applies at once, not at next week's inference.
    layer.ingest("u1", [HumanMessage("From now on, please give more detailed answers.")],
                 profile="work")
    block = layer.context_block("u1", "Something unrelated entirely", profile="work")
    (line,) = [ln for ln in block.text.splitlines() if "How this user works" in ln]
    assert "give detailed answers (asked explicitly)" in line
    assert block.tokens < 1000
    # Next week's inference keeps the explicit preference.
    JOBS["procedural-profile"].function(ctx, "u1", now=T0 + timedelta(days=14))
    block = layer.context_block("u1", "Something unrelated entirely", profile="work")
    assert "give detailed answers (asked explicitly)" in block.text
    layer.close()


# -- 90 days through the graph --------------------------------------------------------------


def test_ninety_days_through_the_graph(store: PostgresMemoryStore, saver: Any,
                                       clock: Clock, pg_uri: str) -> None:
    clock.now = T0
    layer = MemoryLayer(store, clock=clock, extraction="inline")
    graph = build_graph(layer, extract=True).compile(store=store, checkpointer=saver)

    def say(thread: str, text: str) -> dict[str, Any]:
        clock.advance(minutes=1)
        return graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {
            "user_id": "u9", "thread_id": thread, "profile": "work"}})

    for day in range(0, 90, 3):
        clock.now = T0 + timedelta(days=day, hours=9)
        say(f"t{day}", f"Day {day}: I am working on the greenhouse project.")
        if day == 63:
            say(f"t{day}", "I decided to build the greenhouse from cedar.")
    ctx = JobContext(store, synthesizer=OfflineSynthesizer())
    end = T0 + timedelta(days=90)
    summarize(ctx, end, user="u9", lookback_days=95)
    JOBS["procedural-profile"].function(ctx, "u9", now=end)
    weeks = summaries(pg_uri, user="u9", period="week")
    assert len(weeks) >= 12
    clock.now = end + timedelta(hours=1)
    out = say("tq", "What did we talk about last week?")
    assert f"### {NARRATIVE}" in out["memory_context"]
    assert "greenhouse" in out["memory_context"].split(f"### {NARRATIVE}")[1]
    assert "How this user works with you" in out["memory_context"]
    out = say("tq", "Keep answers short, please.")
    out = say("tq", "Anything else?")
    assert "keep answers short (asked explicitly)" in out["memory_context"]
    layer.close()

