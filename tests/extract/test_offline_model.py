"""The offline chat model: its replies from the memory block, and its deterministic tool
calls (remember, recall, then a reply from the tools' results) in a prebuilt agent."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from langmem_layer import Kind, Layer, MemoryLayer
from langmem_layer.offline_chat import OfflineChatModel
from langmem_layer.read.block import build_context_block
from langmem_layer.tokens import TokenCounter
from langmem_layer.types import MemoryRecord, Policy, Recalled
from tests.fakes import Clock

_RUN = uuid.uuid4().hex[:8]


def _cfg(thread: str, user: str = "alice") -> dict:
    return {"configurable": {"user_id": user, "thread_id": f"{thread}-{_RUN}"}}


def _reply(model: object, *messages: object) -> AIMessage:
    out = model.invoke(list(messages))  # type: ignore[attr-defined]
    assert isinstance(out, AIMessage)
    return out


@pytest.fixture
def memory(store, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline", clock=clock)


# -- tool calls --------------------------------------------------------------------------


def test_remember_then_recall_then_answer(memory: MemoryLayer) -> None:
    agent = create_agent(OfflineChatModel(), memory.tools())
    out = agent.invoke({"messages": [("user", "Remember that I'm allergic to peanuts.")]},
                       _cfg("a"))
    asked, result, answer = out["messages"][1:]
    assert [(c["name"], c["args"]) for c in asked.tool_calls] == [
        ("remember", {"content": "Is allergic to peanuts.", "kind": "profile_fact"})]
    assert isinstance(result, ToolMessage) and result.text.startswith("Remembered [")
    assert not answer.tool_calls and answer.text.startswith(
        'Noted: "Remember that I\'m allergic to peanuts.". remember: Remembered [')
    (stored,) = memory.list("alice")
    assert (stored.record.content, stored.record.kind) == ("Is allergic to peanuts.",
                                                          Kind.PROFILE_FACT)

    out = agent.invoke({"messages": [("user", "What am I allergic to?")]}, _cfg("b"))
    asked, result, answer = out["messages"][1:]
    assert [(c["name"], c["args"]) for c in asked.tool_calls] == [
        ("recall", {"query": "What am I allergic to"})]
    assert f"[{stored.key}] (profile_fact) Is allergic to peanuts." in result.text
    assert "recall: " in answer.text and "Is allergic to peanuts." in answer.text


def test_requests_and_statements_it_keeps(memory: MemoryLayer) -> None:
    agent = create_agent(OfflineChatModel(), memory.tools())
    for text in ("Note that my locker code is 4512.",  # no rule: the user's words
                 "Please remember: the wifi password is tulip42",
                 "I work at Initech and I live in Porto.",  # stated facts, one call each
                 "hello there", "Forget that I live in Porto."):  # nothing to keep
        agent.invoke({"messages": [("user", text)]}, _cfg("c"))
    assert sorted(r.record.content for r in memory.list("alice")) == [
        "Lives in Porto.", "The wifi password is tulip42.", "Their locker code is 4512.",
        "Works at Initech."]


def test_only_bound_tools_are_called() -> None:
    @tool
    def recall(query: str) -> str:
        """Search memory."""
        return query

    @tool
    def remember(text: str) -> str:
        """Keep a fact (its argument is named differently from the memory tools')."""
        return text

    keep = HumanMessage("Remember that I'm allergic to peanuts.")
    ask = HumanMessage("What am I allergic to?")
    only_recall = OfflineChatModel().bind_tools([recall])
    assert not _reply(only_recall, keep).tool_calls
    assert _reply(only_recall, ask).tool_calls[0]["args"] == {"query": "What am I allergic to"}
    only_remember = OfflineChatModel().bind_tools([remember])
    assert not _reply(only_remember, ask).tool_calls
    (call,) = _reply(only_remember, keep).tool_calls
    assert (call["name"], call["args"]) == ("remember", {"text": "Is allergic to peanuts."})
    for model in (OfflineChatModel(), OfflineChatModel().bind_tools([])):  # no tools
        reply = _reply(model, keep)
        assert not reply.tool_calls
        assert reply.text == ('Noted: "Remember that I\'m allergic to peanuts.". '
                              "From memory — nothing relevant yet.")


# -- replies from the memory block ---------------------------------------------------------


def _block(*memories: tuple[str, Policy]) -> SystemMessage:
    now = datetime(2026, 11, 18, tzinfo=UTC)
    recalled = [Recalled(f"k{i}", ("memories", "u", "work"), MemoryRecord(
        content=text, kind=Kind.PREFERENCE, policy=policy, layer=Layer.PROCEDURAL,
        occurred_at=now, last_accessed_at=now)) for i, (text, policy) in enumerate(memories)]
    block = build_context_block(recalled, budget_tokens=2000,
                                counter=TokenCounter("o200k_base"))
    return SystemMessage(f"You are a helpful assistant.\n\n{block.text}")


def test_a_block_it_may_not_quote_still_shows_it_was_used() -> None:
    model = OfflineChatModel()
    ask = HumanMessage("When should we meet?")
    silent = _reply(model, _block(("Prefers morning meetings.", Policy.ADAPT)), ask)
    assert silent.text == ('Noted: "When should we meet?". From memory — used silently: '
                           "Prefers morning meetings.")
    avoid = _reply(model, _block(("Going through a divorce.", Policy.AVOID),
                                 ("Prefers short answers.", Policy.ADAPT)), ask)
    assert "divorce" not in avoid.text  # never quoted, only counted
    assert avoid.text.endswith("used silently: Prefers short answers. | also used: "
                               "1 memory kept out of this reply.")
    facts = _reply(model, _block(("Is allergic to peanuts.", Policy.FACTCHECK)), ask)
    assert facts.text.endswith("From memory — also used: 1 fact kept straight.")
    asked = _reply(model, _block(("Is allergic to peanuts.", Policy.FACTCHECK)),
                   HumanMessage("Any allergies I should mention?"))
    assert asked.text.endswith("facts you asked about: Is allergic to peanuts.")
    empty = _reply(model, SystemMessage("You are a helpful assistant."), ask)
    assert empty.text.endswith("From memory — nothing relevant yet.")
