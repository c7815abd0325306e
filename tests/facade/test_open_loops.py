"""Open loops that come back when due, are followed up after, close after the grace
period, and close when a later turn reports them done."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.read.block import OPEN_THREADS, SILENT, build_context_block
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.tokens import get_token_counter
from langmem_layer.types import Kind, Layer, LoopStatus, MemoryRecord, Policy, Recalled, Status
from tests.fakes import Clock

MONDAY = datetime(2026, 11, 16, 9, 0, tzinfo=UTC)


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> MemoryLayer:
    clock.now = MONDAY
    return MemoryLayer(store, extraction="inline", clock=clock)


def test_interview_comes_back_when_due_then_as_follow_up_then_closes(
        layer: MemoryLayer, store: PostgresMemoryStore) -> None:
    result = layer.ingest("u1", [HumanMessage("I have a job interview on Friday")], now=MONDAY)
    (key,) = result.written
    loop = layer.get("u1", key).record
    assert loop.kind == Kind.OPEN_LOOP and loop.due_at == MONDAY + timedelta(days=4)
    question = "How is my week going?"

    def block(days: float) -> tuple[str | None, str]:
        b = layer.context_block("u1", question, now=MONDAY + timedelta(days=days))
        return b.placements.get(key), b.text

    # Monday: Friday is 96 hours away, beyond the 72-hour window; the question does
    # not resemble the loop, so nothing comes back.
    assert block(0)[0] is None
    # Tuesday (72 h ahead) and Thursday: in OPEN THREADS whatever the question.
    assert block(1)[0] == OPEN_THREADS
    section, text = block(3)
    assert section == OPEN_THREADS
    assert ("### OPEN THREADS (pick up)\n- Has a job interview on Friday (Fri 2026-11-20). "
            "[due 2026-11-20]") in text
    assert "follow up" not in text
    # The next Monday, past the due date within the grace period: a follow-up.
    section, text = block(7)
    assert section == OPEN_THREADS
    assert text.endswith("[due 2026-11-20] [overdue] [follow up: ask how it went]")
    # After the grace period (7 days after Friday) the lifecycle job closes it.
    ctx = JobContext(store, settings=MemorySettings())
    lifecycle = JOBS["lifecycle"].function
    assert lifecycle(ctx, "u1", now=MONDAY + timedelta(days=10))["loops_closed"] == 0
    assert lifecycle(ctx, "u1", now=MONDAY + timedelta(days=11))["loops_closed"] == 1
    closed = layer.get("u1", key).record
    assert (closed.status, closed.loop_status) == (Status.ARCHIVED, LoopStatus.CLOSED)
    assert closed.history[-1].reason == "open loop: due date passed over 7 days ago"
    assert block(11)[0] is None


def test_due_loops_respect_limit_window_and_avoid(layer: MemoryLayer, clock: Clock) -> None:
    keys = [layer.remember("u1", f"Needs to file form number {n}.", kind=Kind.OPEN_LOOP,
                           due_at=MONDAY + timedelta(hours=10 * n)).key for n in range(1, 6)]
    far = layer.remember("u1", "Has a wedding to attend.", kind=Kind.OPEN_LOOP,
                         due_at=MONDAY + timedelta(days=30)).key
    hidden = layer.remember("u1", "Has a custody hearing.", kind=Kind.OPEN_LOOP,
                            policy=Policy.AVOID, due_at=MONDAY + timedelta(hours=5)).key
    b = layer.context_block("u1", "What's the weather like?", now=MONDAY)
    # At most due_limit (3) a turn, soonest first; the avoid one stays unspeakable.
    assert b.placements == {hidden: "DO NOT SURFACE UNLESS THE USER DOES",
                            keys[0]: OPEN_THREADS, keys[1]: OPEN_THREADS}
    assert far not in b.placements
    off = MemoryLayer(layer.store, extraction="inline", clock=clock,
                      settings=MemorySettings(due_limit=0))
    assert off.context_block("u1", "What's the weather like?", now=MONDAY).placements == {}


def test_a_due_loop_spoken_twice_is_demoted() -> None:
    rec = MemoryRecord(content="Has a job interview on Friday.", kind=Kind.OPEN_LOOP,
                       layer=Layer.EPISODIC, policy=Policy.CONTINUE, occurred_at=MONDAY,
                       last_accessed_at=MONDAY, due_at=MONDAY + timedelta(days=1))
    due = Recalled("k", ("memories", "u1", "work"), rec, sources={"due": 0})
    counter = get_token_counter("o200k_base")
    first = build_context_block([due], budget_tokens=500, counter=counter, now=MONDAY)
    again = build_context_block([due], budget_tokens=500, counter=counter, now=MONDAY,
                                recently_spoken=["k"])
    assert first.placements == {"k": OPEN_THREADS}
    assert again.placements == {"k": SILENT} and again.demoted == ("k",)
    # A speak-policy loop found as due also goes to OPEN THREADS.
    speak = Recalled("k", due.namespace, rec.model_copy(update={"policy": Policy.SPEAK}),
                     sources={"due": 0})
    assert build_context_block([speak], budget_tokens=500, counter=counter,
                               now=MONDAY).placements == {"k": OPEN_THREADS}


def _loop(key: str, content: str, **kw: object) -> Recalled:
    rec = MemoryRecord(content=content, kind=Kind.OPEN_LOOP, layer=Layer.EPISODIC,
                       policy=Policy.CONTINUE, occurred_at=MONDAY, last_accessed_at=MONDAY,
                       **kw)  # type: ignore[arg-type]
    return Recalled(key, ("memories", "u1", "work"), rec)


EXISTING = [
    _loop("mom", "Needs to call their mom tomorrow (Tue 2026-11-17).",
          due_at=MONDAY + timedelta(days=1)),
    _loop("dentist", "Has a dentist appointment on Wednesday (Wed 2026-11-18)."),
    _loop("report", "Needs to finish the quarterly report by Thursday (Thu 2026-11-19)."),
    _loop("email", "Needs to send the email to Bob tomorrow (Tue 2026-11-17).", refs=["bob"]),
    _loop("interview", "Has a job interview on Friday (Fri 2026-11-20)."),
    _loop("closed", "Needs to renew the passport.", loop_status=LoopStatus.CLOSED),
    Recalled("fact", ("memories", "u1", "work"), MemoryRecord(
        content="Their mom lives in Porto.", kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC,
        occurred_at=MONDAY, last_accessed_at=MONDAY)),
]


def _closed_by(text: str) -> list[str]:
    from langmem_layer.extract.extractor import OpType
    from langmem_layer.extract.rules import RuleExtractor

    ops = RuleExtractor().extract([HumanMessage(text)], existing=EXISTING,
                                  now=MONDAY + timedelta(days=2))
    return [str(op.target_id) for op in ops if op.op == OpType.CLOSE_OPEN_LOOP]


@pytest.mark.parametrize(("text", "closes"), [
    ("I called my mom yesterday.", ["mom"]),
    ("I finally called my mom", ["mom"]),
    ("I've called my mom.", ["mom"]),
    ("Done with the dentist appointment!", ["dentist"]),
    ("I'm done with the dentist appointment.", ["dentist"]),
    ("The dentist appointment is done.", ["dentist"]),
    ("I finished the report", ["report"]),
    ("I finished the quarterly report this morning.", ["report"]),
    ("I sent the email to Bob.", ["email"]),
    ("I just sent Bob the email", ["email"]),
    ("I had the interview today, it went well.", ["interview"]),
    ("I called my mom and I sent the email to Bob.", ["mom", "email"]),
    # Answers to the follow-up ("ask how it went"): it happened.
    ("The interview went great!", ["interview"]),
    ("My dentist appointment was fine.", ["dentist"]),
    ("The interview went really well, thanks.", ["interview"]),
    # Negatives: plans, questions, negations, hedges, vague or unrelated statements.
    ("I should call my mom.", []),
    ("I need to call my mom tomorrow.", []),
    ("Did I call my mom?", []),
    ("Have I sent the email to Bob?", []),
    ("I didn't call my mom.", []),
    ("I haven't called my mom yet.", []),
    ("I never called my mom back.", []),
    ("I forgot to call my mom.", []),
    ("I needed to call my mom.", []),
    ("I wanted to finish the report.", []),
    ("I did it.", []),
    ("I called the plumber.", []),
    ("I renewed the passport.", []),  # that loop is closed already
    ("I finished the book about Porto.", []),
    ("My mom called me.", []),
    ("How did the interview go?", []),
    ("I hope the interview goes well.", []),
    ("The weekend was great.", []),
])
def test_a_turn_reporting_a_loop_done_closes_it(text: str, closes: list[str]) -> None:
    assert _closed_by(text) == closes


def test_closing_a_loop_end_to_end(layer: MemoryLayer) -> None:
    loop = layer.remember("u1", "Promised to call their mom.", kind=Kind.OPEN_LOOP,
                          policy=Policy.CONTINUE)
    other = layer.remember("u1", "Needs to book a table for the anniversary.",
                           kind=Kind.OPEN_LOOP, policy=Policy.CONTINUE)
    kept = layer.ingest("u1", [HumanMessage("I should call my mom this week.")],
                        now=MONDAY + timedelta(days=1))
    assert loop.key not in kept.changed
    done = layer.ingest("u1", [HumanMessage("I called my mom yesterday.")],
                        now=MONDAY + timedelta(days=2))
    assert done.changed == [loop.key]
    assert layer.get("u1", loop.key).record.status == Status.ARCHIVED
    assert layer.get("u1", other.key).record.status == Status.ACTIVE


def test_a_due_loop_goes_quiet_on_the_third_turn_of_a_thread(
        layer: MemoryLayer, store: PostgresMemoryStore, clock: Clock) -> None:
    from langgraph.graph import END, START, StateGraph

    from langmem_layer import MemoryState

    key = layer.remember("u1", "Needs to call the plumber.", kind=Kind.OPEN_LOOP,
                         due_at=MONDAY + timedelta(hours=20)).key
    builder = StateGraph(MemoryState)
    builder.add_node("agent", lambda state: {})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    graph = layer.wire(builder).compile(store=store)
    config = {"configurable": {"user_id": "u1", "thread_id": "t1"}}
    state: dict = {"messages": []}
    sections = []
    for text in ("Good morning.", "What's for lunch?", "Any plans tonight?"):
        state = graph.invoke({**state, "messages": [*state["messages"], HumanMessage(text)]},
                             config)
        sections.append({r["key"]: r["section"] for r in state["recalled"]}.get(key))
    # Surfaced unasked twice, then used silently, as a "speak" memory would be.
    assert sections == [OPEN_THREADS, OPEN_THREADS, SILENT]
