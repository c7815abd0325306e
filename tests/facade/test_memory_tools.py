"""The memory tools inside a prebuilt agent: bound to the run's user, written through the
gate and the decision log, corrections kept in history, forgetting archives."""

from __future__ import annotations

import uuid

import pytest
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage

from langmem_layer import Kind, Layer, MemoryLayer, MemorySettings, MissingUserError, Status
from langmem_layer.settings import GateSettings
from tests.fakes import Clock, ScriptedChatModel, tool_call

_RUN = uuid.uuid4().hex[:8]


def _cfg(thread: str, user: str = "alice") -> dict:
    return {"configurable": {"user_id": user, "thread_id": f"{thread}-{_RUN}"}}


def _tool_replies(out: dict) -> list[str]:
    return [m.text for m in out["messages"] if isinstance(m, ToolMessage)]


@pytest.fixture
def memory(store, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline", clock=clock)


def _agent(memory: MemoryLayer, *script):
    model = ScriptedChatModel(script=list(script))
    return create_agent(model, memory.tools()), model


def test_remember_then_recall_in_another_thread(memory: MemoryLayer) -> None:
    agent, _ = _agent(memory, tool_call("remember", "c1", content="Is allergic to peanuts."),
                      "Noted.")
    out = agent.invoke({"messages": [("user", "Remember my peanut allergy.")]}, _cfg("a"))
    assert _tool_replies(out)[0].startswith("Remembered [")
    (stored,) = memory.list("alice")
    assert (stored.record.content, stored.record.kind) == ("Is allergic to peanuts.",
                                                          Kind.PROFILE_FACT)
    assert stored.record.source.thread_id == f"a-{_RUN}"
    (decision,) = memory.admin.decisions("alice")[0].decisions  # logged like extraction's
    assert decision["accepted"] and decision["op"] == "add"

    agent, model = _agent(memory, tool_call("recall", "c2", query="peanuts allergy"),
                          "You are allergic to peanuts.")
    out = agent.invoke({"messages": [("user", "Am I allergic to anything?")]}, _cfg("b"))
    assert f"[{stored.key}] (profile_fact) Is allergic to peanuts." in _tool_replies(out)[0]
    assert "Is allergic to peanuts." in model.seen[1][-1].text  # the model read it


def test_remember_twice_reinforces_through_the_gate(memory: MemoryLayer) -> None:
    agent, _ = _agent(memory, tool_call("remember", "c1", content="Prefers tea over coffee.",
                                        kind="preference"),
                      tool_call("remember", "c2", content="Prefers tea over coffee."), "ok")
    out = agent.invoke({"messages": [("user", "I like tea.")]}, _cfg("a"))
    (stored,) = memory.list("alice")
    assert _tool_replies(out)[1] == f"Already known: reinforced [{stored.key}]."
    assert stored.record.kind == Kind.PREFERENCE and stored.record.reinforcement_count == 1


def test_a_model_cannot_pass_another_users_id(memory: MemoryLayer) -> None:
    for t in memory.tools():
        assert "user_id" not in t.args and "user" not in t.args
    agent, _ = _agent(memory, tool_call("remember", "c1", content="Works at Initech.",
                                        user_id="mallory"), "ok")
    agent.invoke({"messages": [("user", "I work at Initech.")]}, _cfg("a"))
    assert [r.record.content for r in memory.list("alice")] == ["Works at Initech."]
    assert memory.list("mallory") == []

    theirs = memory.remember("mallory", "Lives in Porto.")
    agent, _ = _agent(memory, tool_call("forget", "c2", memory_id=theirs.key,
                                        user_id="mallory"),
                      tool_call("recall", "c3", query="Porto", user_id="mallory"), "ok")
    out = agent.invoke({"messages": [("user", "Forget that.")]}, _cfg("b"))
    forgot, recalled = _tool_replies(out)
    assert forgot.startswith("Error: No memory") and recalled == "No memories found."
    assert memory.get("mallory", theirs.key).record.status == Status.ACTIVE


def test_correct_keeps_history_and_forget_archives(memory: MemoryLayer) -> None:
    old = memory.remember("alice", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    agent, _ = _agent(memory, tool_call("correct", "c1", memory_id=old.key,
                                        content="Lives in Porto."), "ok")
    out = agent.invoke({"messages": [("user", "I moved to Porto.")]}, _cfg("a"))
    assert _tool_replies(out)[0].startswith(f"Corrected: [{old.key}] is superseded by [")
    (new,) = memory.list("alice")
    assert new.record.content == "Lives in Porto."
    before = memory.get("alice", old.key).record
    assert before.status == Status.CONTRADICTED and before.content == "Lives in Lisbon."
    assert any(h.new == "contradicted" and "superseded by a correction" in h.reason
               for h in memory.admin.history("alice", old.key))

    agent, _ = _agent(memory, tool_call("update", "c2", memory_id=old.key,
                                        content="Lives in Braga."),
                      tool_call("forget", "c3", memory_id=new.key), "ok")
    out = agent.invoke({"messages": [("user", "Forget where I live.")]}, _cfg("b"))
    retired, forgotten = _tool_replies(out)
    assert retired == f"Error: Memory {old.key} is contradicted, not active."
    assert forgotten == f"Forgotten: [{new.key}] Lives in Porto."
    assert memory.get("alice", new.key).record.status == Status.ARCHIVED
    assert memory.admin.history("alice", new.key)[-1].reason == "forgotten at the user's request"
    assert memory.list("alice") == []


def test_a_correction_stays_in_its_layer(memory: MemoryLayer) -> None:
    name = memory.remember("alice", "Name is Dana.", kind=Kind.PROFILE_FACT,
                           layer=Layer.IDENTITY)
    (correct,) = [t for t in memory.tools() if t.name == "correct"]
    correct.invoke({"memory_id": name.key, "content": "Name is Dana Silva."},
                   {"configurable": {"user_id": "alice", "profile": "personal"}})
    (new,) = memory.list("alice")
    assert (new.record.content, new.scope) == ("Name is Dana Silva.", "identity")


def test_refusals_are_tool_errors(memory: MemoryLayer) -> None:
    (remember, *_) = memory.tools()
    reply = remember.invoke({"content": "ok"}, _cfg("a"))
    assert reply.startswith("Error: Memory content is too short") and memory.list("alice") == []
    # As a tool call (what an agent sends) the answer is marked as an error.
    call = {"type": "tool_call", "name": "remember", "id": "c1", "args": {"content": "ok"}}
    message = remember.invoke(call, _cfg("a"))
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert message.text == reply
    # The gate's own refusal (here: a stricter confidence floor) is an error too.
    strict = MemoryLayer(memory.store, settings=MemorySettings(
        gate=GateSettings(min_confidence=0.95)), extraction="inline")
    (remember, *_) = strict.tools()
    message = remember.invoke({**call, "args": {"content": "Likes green tea."}}, _cfg("a"))
    assert message.status == "error" and message.text.startswith("Not stored: rejected: ")
    assert memory.list("alice") == []


async def test_async_tools_and_a_run_without_user(memory: MemoryLayer) -> None:
    tools = {t.name: t for t in memory.tools()}
    assert set(tools) == {"remember", "recall", "correct", "update", "forget"}
    reply = await tools["remember"].ainvoke({"content": "Speaks Portuguese."}, _cfg("a"))
    assert reply.startswith("Remembered")
    found = await tools["recall"].ainvoke({"query": "Portuguese"}, _cfg("b"))
    assert "Speaks Portuguese." in found
    personal = {"configurable": {"user_id": "alice", "profile": "personal"}}
    await tools["remember"].ainvoke({"content": "Plays the cello on Sundays."}, personal)
    assert "cello" not in await tools["recall"].ainvoke({"query": "cello"}, _cfg("c"))
    assert "cello" in await tools["recall"].ainvoke({"query": "cello"}, personal)
    with pytest.raises(MissingUserError, match="configurable"):
        await tools["recall"].ainvoke({"query": "Portuguese"}, {"configurable": {}})
