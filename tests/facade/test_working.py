"""Working memory: history trimming on the real database with LangGraph's own
PostgreSQL checkpointer; every trimmed turn handed to extraction exactly once."""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langmem_layer import MemoryLayer, MemorySettings, MemoryState
from langmem_layer.message_log import short_term
from langmem_layer.store.ops import EnqueueOp
from langmem_layer.tokens import get_token_counter
from langmem_layer.working.trim import plan_trim, split_turns, turn_starts
from tests.fakes import Clock

COUNTER = get_token_counter("o200k_base")
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"]


pytestmark = pytest.mark.usefixtures("clean_working_tables")


# -- a scripted agent with tools -------------------------------------------------------


def agent(state: MemoryState) -> dict[str, Any]:
    """Calls the `lookup` tool on every human message containing 'tool', else echoes."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage) and "tool" in last.text:
        call = {"id": f"call-{last.id}", "name": "lookup", "args": {"q": last.text[:30]}}
        return {"messages": [AIMessage("", tool_calls=[call])]}
    human = next(m for m in reversed(state["messages"]) if isinstance(m, HumanMessage))
    return {"messages": [AIMessage(f"Reply to: {human.text[:60]}")]}


def tools(state: MemoryState) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
    return {"messages": [ToolMessage("found " * 8, tool_call_id=call["id"])]}


def route(state: MemoryState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build_graph(layer: MemoryLayer, *, extract: bool,
                on_agent: Callable[[MemoryState], None] | None = None) -> StateGraph:
    """The agent with its tool loop; wired with all three memory nodes, or without
    ``extract_after_turn`` so that trimming is the only way turns reach extraction."""

    def watched(state: MemoryState) -> dict[str, Any]:
        if on_agent is not None and isinstance(state["messages"][-1], HumanMessage):
            on_agent(state)
        return agent(state)

    b = StateGraph(MemoryState)
    b.add_node("agent", watched)
    b.add_node("tools", tools)
    b.add_conditional_edges("agent", route, ["tools", END])
    b.add_edge("tools", "agent")
    if extract:
        b.add_edge(START, "agent")
        return layer.wire(b, "agent")
    b.add_node("load_memory", layer.load_memory)
    b.add_node("assemble_context", layer.assemble_context)
    b.add_edge(START, "load_memory")
    b.add_edge("load_memory", "assemble_context")
    b.add_edge("assemble_context", "agent")
    return b


def human_text(rng: random.Random, n: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
    return f"turn {n}: {words}" + (" please use the tool" if n % 5 == 0 else "")


def queue_entries(pg_uri: str, user: str) -> list[dict[str, Any]]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT dedupe_key, messages, attempts, done_at FROM langmem_extraction_queue "
            "WHERE user_id = %s ORDER BY id", [user]).fetchall()
    return [{"key": k, "ids": [m["data"]["id"] for m in msgs], "types": [m["type"] for m in msgs],
             "calls": {c["id"] for m in msgs for c in m["data"].get("tool_calls") or []},
             "results": {m["data"]["tool_call_id"] for m in msgs if m["type"] == "tool"},
             "attempts": a, "done": d is not None} for k, msgs, a, d in rows]


def assert_exactly_once(entries: list[dict[str, Any]], dropped: set[str]) -> None:
    """Each dropped message is in exactly one entry; each entry is one whole turn."""
    counts = Counter(i for e in entries for i in e["ids"])
    assert [i for i in dropped if counts[i] != 1] == []
    for e in entries:
        assert e["types"][0] == "human"
        assert e["results"] <= e["calls"]  # a tool result travels with its call


# -- the pure trimming -----------------------------------------------------------------


def turn(n: int, words: int = 10, tool: bool = False) -> list[BaseMessage]:
    h = HumanMessage(f"question {n} " + "word " * words, id=f"h{n}")
    if not tool:
        return [h, AIMessage(f"answer {n} " + "word " * words, id=f"a{n}")]
    call = {"id": f"c{n}", "name": "lookup", "args": {"q": "x"}}
    return [h, AIMessage("", tool_calls=[call], id=f"t{n}"),
            ToolMessage("result " * words, tool_call_id=f"c{n}", id=f"r{n}"),
            AIMessage(f"answer {n}", id=f"a{n}")]


def test_everything_fits_nothing_leaves() -> None:
    thread = turn(1) + turn(2)
    plan = plan_trim(thread, COUNTER, max_tokens=10_000)
    assert plan.kept == thread and plan.dropped == [] and plan.removals == []
    assert plan.tokens == COUNTER.count_messages(thread)


def test_oldest_whole_turns_leave_and_the_window_starts_on_a_human() -> None:
    thread = [m for n in range(10) for m in turn(n, tool=n % 3 == 0)]
    budget = COUNTER.count_messages(thread) // 2
    plan = plan_trim(thread, COUNTER, max_tokens=budget, min_turns=3)
    assert plan.tokens <= budget and not plan.over_budget
    assert plan.kept == thread[len(plan.dropped_messages):]
    assert isinstance(plan.kept[0], HumanMessage)
    assert [t[0].id for t in plan.dropped] == [f"h{n}" for n in range(len(plan.dropped))]
    assert [r.id for r in plan.removals] == [m.id for m in plan.dropped_messages]
    # the next turn would not have fitted: the cut is as late as the budget allows
    more = plan.dropped[-1] + plan.kept
    assert COUNTER.count_messages(more) > budget


def test_min_turns_kept_over_budget() -> None:
    thread = [m for n in range(6) for m in turn(n, words=200)]
    plan = plan_trim(thread, COUNTER, max_tokens=50, min_turns=3)
    assert plan.kept == thread[-6:] and plan.over_budget
    assert len(plan.dropped) == 3
    assert plan_trim(thread[:6], COUNTER, max_tokens=50, min_turns=3).dropped == []


def test_tool_call_and_result_never_split() -> None:
    # A human message between a call and its result (an interrupt answered mid-call)
    # does not start a turn: the call, the message and the result go together.
    call = {"id": "c9", "name": "lookup", "args": {}}
    odd = [HumanMessage("q9", id="h9"), AIMessage("", tool_calls=[call], id="t9"),
           HumanMessage("wait, also this", id="h9b"),
           ToolMessage("res", tool_call_id="c9", id="r9"), AIMessage("done", id="a9")]
    thread = turn(1, tool=True) + odd + turn(2) + turn(3) + turn(4)
    assert turn_starts(odd) == [0]
    call_of = {"r1": "t1", "r9": "t9"}
    for budget in range(1, COUNTER.count_messages(thread) + 2):
        plan = plan_trim(thread, COUNTER, max_tokens=budget, min_turns=1)
        kept_ids = {m.id for m in plan.kept}
        assert all(call_of[r] in kept_ids for r in call_of if r in kept_ids)
        assert all(r in kept_ids for r, t in call_of.items() if t in kept_ids)
        assert ("h9b" in kept_ids) == ("h9" in kept_ids)


def test_unanswered_tool_call_blocks_nothing() -> None:
    dangling = [HumanMessage("q", id="hq"),
                AIMessage("", tool_calls=[{"id": "cx", "name": "f", "args": {}}], id="tx")]
    thread = dangling + turn(1) + turn(2) + turn(3)
    assert len(split_turns(thread)) == 4
    plan = plan_trim(thread, COUNTER, max_tokens=1, min_turns=3)
    assert plan.dropped == [dangling]


def test_system_messages_stay_and_count() -> None:
    system = SystemMessage("You are terse. " * 20, id="s")
    thread = [system, *[m for n in range(8) for m in turn(n)]]
    budget = COUNTER.count_messages(thread) // 2
    plan = plan_trim(thread, COUNTER, max_tokens=budget, min_turns=1)
    assert plan.kept[0] is system and plan.tokens <= budget and plan.dropped
    assert system not in plan.dropped_messages


def test_messages_without_ids_replace_the_whole_list() -> None:
    thread = [HumanMessage("q " * 50), AIMessage("a " * 50), *turn(1), *turn(2), *turn(3)]
    plan = plan_trim(thread, COUNTER, max_tokens=60, min_turns=3)
    assert plan.removals[0] == RemoveMessage(id=REMOVE_ALL_MESSAGES)
    assert plan.removals[1:] == plan.kept


def test_random_threads_keep_every_invariant() -> None:
    rng = random.Random(11)
    for _ in range(150):
        thread = [m for n in range(rng.randint(0, 12))
                  for m in turn(n, words=rng.randint(1, 60), tool=rng.random() < 0.3)]
        budget, min_turns = rng.randint(1, 800), rng.randint(1, 4)
        plan = plan_trim(thread, COUNTER, max_tokens=budget, min_turns=min_turns)
        assert plan.dropped_messages + plan.kept == thread
        assert plan.tokens == COUNTER.count_messages(plan.kept)
        assert plan.over_budget == (plan.tokens > budget)
        kept_turns = len(split_turns(plan.kept))
        assert kept_turns >= min(min_turns, len(split_turns(thread)))
        if plan.over_budget:  # only ever because of the minimum
            assert kept_turns <= min_turns
        if plan.dropped:
            assert isinstance(plan.kept[0], HumanMessage)


def test_short_term_window_from_state() -> None:
    thread = [m for n in range(5) for m in turn(n, tool=True)]
    window = short_term(thread, 10)
    assert window == thread[-10:] or window == thread[-9:]
    assert not isinstance(window[0], ToolMessage) and window[-1] is thread[-1]
    assert short_term(thread, 0) == []


# -- on the real database ----------------------------------------------------------------


def run_thread(graph: Any, user: str, thread: str, turns: range, rng: random.Random,
               clock: Clock, seen: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in turns:
        clock.advance(minutes=1)
        out = graph.invoke({"messages": [HumanMessage(human_text(rng, n))]},
                           {"configurable": {"user_id": user, "thread_id": thread}})
        seen |= {m.id for m in out["messages"]}
    return out


def test_200_turn_thread_stays_in_budget_and_hands_every_turn_over_once(
        store, saver: PostgresSaver, pg_uri: str, clock: Clock) -> None:
    budget = 600
    settings = MemorySettings(history_max_tokens=budget, history_min_turns=3)
    layer = MemoryLayer(store, settings=settings, clock=clock)
    sizes: list[int] = []

    def check(state: MemoryState) -> None:
        messages = state["messages"]
        sizes.append(COUNTER.count_messages(messages))
        assert isinstance(messages[0], HumanMessage)  # whole turns only
        calls = {c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
        assert all(m.tool_call_id in calls for m in messages if isinstance(m, ToolMessage))

    graph = build_graph(layer, extract=False, on_agent=check).compile(
        store=store, checkpointer=saver)
    user, thread = f"u-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    seen: set[str] = set()
    out = run_thread(graph, user, thread, range(200), random.Random(3), clock, seen)
    assert len(sizes) == 200 and max(sizes) <= budget
    assert sum(1 for s in sizes if s > budget * 0.5) > 150  # it really was trimming
    kept = {m.id for m in out["messages"]}
    state = graph.get_state({"configurable": {"thread_id": thread}})
    assert {m.id for m in state.values["messages"]} == kept
    entries = queue_entries(pg_uri, user)
    assert len(entries) == 200 - len(split_turns(state.values["messages"]))
    assert_exactly_once(entries, seen - kept)
    assert not kept & {i for e in entries for i in e["ids"]}
    # and each entry is extracted once
    layer.drain()
    assert all(e["done"] and e["attempts"] == 1 for e in queue_entries(pg_uri, user))


def test_with_extract_after_turn_a_trimmed_turn_is_not_queued_again(
        store, saver: PostgresSaver, pg_uri: str, clock: Clock) -> None:
    settings = MemorySettings(history_max_tokens=300, extract_every_n_turns=10_000)
    layer = MemoryLayer(store, settings=settings, clock=clock)
    graph = build_graph(layer, extract=True).compile(store=store, checkpointer=saver)
    user, thread = f"u-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    seen: set[str] = set()
    out = run_thread(graph, user, thread, range(30), random.Random(5), clock, seen)
    entries = queue_entries(pg_uri, user)
    assert len(entries) == 30  # one per turn: queued at its end, a no-op when trimmed
    kept = {m.id for m in out["messages"]}
    assert kept < seen
    assert_exactly_once(entries, seen)
    layer.close()


def test_crash_between_trim_and_enqueue_and_between_enqueue_and_checkpoint(
        store, saver: PostgresSaver, pg_uri: str, clock: Clock, monkeypatch) -> None:
    settings = MemorySettings(history_max_tokens=250, history_min_turns=2)
    layer = MemoryLayer(store, settings=settings, clock=clock)
    graph = build_graph(layer, extract=False).compile(store=store, checkpointer=saver)
    user, thread = f"u-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    rng, seen = random.Random(9), set[str]()
    run_thread(graph, user, thread, range(12), rng, clock, seen)
    before = queue_entries(pg_uri, user)
    assert before  # trimming has started

    # 1. The database fails on the batch that would queue the trimmed turns: nothing is
    #    queued, nothing leaves the thread, the run fails.
    real_batch = store.batch

    def failing_batch(ops: Any) -> Any:
        ops = list(ops)
        if any(isinstance(op, EnqueueOp) for op in ops):
            raise psycopg.OperationalError("connection lost")
        return real_batch(ops)

    monkeypatch.setattr(store, "batch", failing_batch)
    with pytest.raises(Exception, match="connection lost"):
        run_thread(graph, user, thread, range(12, 13), rng, clock, seen)
    monkeypatch.setattr(store, "batch", real_batch)
    assert queue_entries(pg_uri, user) == before

    # 2. The turns are queued, then the process dies before the checkpoint drops them.
    real_load = layer.threads.load_thread
    queued_then: list[int | None] = []

    def crash_after_enqueue(*args: Any, **kwargs: Any) -> Any:
        loaded = real_load(*args, **kwargs)
        queued_then.extend(loaded.enqueued)
        raise RuntimeError("process killed")

    monkeypatch.setattr(layer.threads, "load_thread", crash_after_enqueue)
    with pytest.raises(RuntimeError, match="process killed"):
        run_thread(graph, user, thread, range(13, 14), rng, clock, seen)
    assert queued_then and all(queued_then)
    after_crash = queue_entries(pg_uri, user)
    assert len(after_crash) > len(before)
    # The state still holds them: a restarted process trims them again, as no-ops.
    state = graph.get_state({"configurable": {"thread_id": thread}}).values["messages"]
    assert set(after_crash[-1]["ids"]) <= {m.id for m in state}

    restarted = MemoryLayer(store, settings=settings, clock=clock)
    graph2 = build_graph(restarted, extract=False).compile(store=store, checkpointer=saver)
    replay = restarted.threads.load_thread(user, state, None, thread_id=thread)
    assert replay.enqueued[:len(queued_then)] == [None] * len(queued_then)
    out = run_thread(graph2, user, thread, range(14, 40), rng, clock, seen)
    kept = {m.id for m in out["messages"]}
    entries = queue_entries(pg_uri, user)
    assert_exactly_once(entries, seen - kept)
    assert not kept & {i for e in entries for i in e["ids"]}


async def test_async_graph_trims_too(astore, pg_uri: str, clock: Clock) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    settings = MemorySettings(history_max_tokens=250, history_min_turns=2)
    layer = MemoryLayer(astore, settings=settings, clock=clock, extraction="inline")
    sizes: list[int] = []
    async with AsyncPostgresSaver.from_conn_string(pg_uri) as asaver:
        await asaver.setup()
        graph = build_graph(
            layer, extract=False,
            on_agent=lambda state: sizes.append(COUNTER.count_messages(state["messages"])),
        ).compile(store=astore, checkpointer=asaver)
        user, thread = f"u-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        rng, seen = random.Random(2), set[str]()
        out: dict[str, Any] = {}
        for n in range(25):
            clock.advance(minutes=1)
            out = await graph.ainvoke(
                {"messages": [HumanMessage(human_text(rng, n))]},
                {"configurable": {"user_id": user, "thread_id": thread}})
            seen |= {m.id for m in out["messages"]}
    assert len(sizes) == 25 and max(sizes) <= 250
    kept = {m.id for m in out["messages"]}
    assert kept < seen
    assert_exactly_once(queue_entries(pg_uri, user), seen - kept)


def test_entries_carry_the_turn_in_json(store, pg_uri: str, clock: Clock) -> None:
    """A dropped turn's queue entry holds exactly that turn, in order."""
    layer = MemoryLayer(store, settings=MemorySettings(history_max_tokens=40,
                                                       history_min_turns=1), clock=clock)
    thread = turn(1, tool=True) + turn(2)
    loaded = layer.threads.load_thread("u-json", thread, "question", thread_id="tj")
    assert [m.id for m in loaded.trim.dropped_messages] == ["h1", "t1", "r1", "a1"]
    with psycopg.connect(pg_uri) as conn:
        (messages,) = conn.execute(
            "SELECT messages FROM langmem_extraction_queue WHERE user_id = 'u-json'").fetchone()
    assert [m["data"]["id"] for m in messages] == ["h1", "t1", "r1", "a1"]
    assert json.dumps(messages)  # plain JSON
