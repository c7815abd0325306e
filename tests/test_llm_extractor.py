"""LLMExtractor with a scripted chat model: good, malformed and invalid output, failures."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from pydantic import Field

from langmem_layer import LLMExtractor, OpType
from langmem_layer.write.llm import ExtractionOutput

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
GOOD = {"operations": [{"op": "add", "content": "Prefers green tea.", "kind": "preference"}]}


class ScriptedModel(BaseChatModel):
    """Replies from a script; each entry is a dict (parsed), a str (raw, unparsable) or an error."""

    script: list[Any]
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("unused"))])

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        def reply(prompt: list[BaseMessage]) -> dict[str, Any]:
            self.prompts.append(prompt)
            entry = self.script.pop(0)
            if isinstance(entry, Exception):
                raise entry
            if isinstance(entry, str):
                return {"raw": AIMessage(entry), "parsed": None,
                        "parsing_error": ValueError("invalid JSON: " + entry)}
            return {"raw": AIMessage(str(entry)), "parsed": entry, "parsing_error": None}

        return RunnableLambda(reply)


MSGS = [HumanMessage("I prefer green tea.", id="m1")]


def test_good_output_is_used() -> None:
    model = ScriptedModel(script=[GOOD], prompts=[])
    ops = LLMExtractor(model).extract(MSGS, now=NOW)
    assert [(o.op, o.content) for o in ops] == [(OpType.ADD, "Prefers green tea.")]
    assert "I prefer green tea." in model.prompts[0][-1].text


def test_malformed_then_good_retries_with_the_error_shown() -> None:
    model = ScriptedModel(script=["{not json", GOOD], prompts=[])
    ops = LLMExtractor(model).extract(MSGS, now=NOW)
    assert ops[0].content == "Prefers green tea."
    assert "invalid JSON" in model.prompts[1][-1].text


def test_invalid_schema_twice_falls_back_to_rules(caplog: pytest.LogCaptureFixture) -> None:
    bad = {"operations": [{"op": "explode", "content": "x"}]}
    model = ScriptedModel(script=[bad, bad], prompts=[])
    ops = LLMExtractor(model).extract(MSGS, now=NOW)
    assert [o.reason for o in ops] == ["rule:prefer"]
    assert "explode" in caplog.text  # the raw output is logged


async def test_async_model_error_falls_back() -> None:
    model = ScriptedModel(script=[RuntimeError("503"), RuntimeError("503")], prompts=[])
    ops = await LLMExtractor(model).aextract(MSGS, now=NOW)
    assert ops and ops[0].reason == "rule:prefer"


def test_existing_memories_reach_the_prompt() -> None:
    from langmem_layer.types import Kind, Layer, MemoryRecord, Recalled

    rec = MemoryRecord(content="Prefers coffee.", kind=Kind.PREFERENCE, layer=Layer.PROCEDURAL,
                       occurred_at=NOW, last_accessed_at=NOW)
    model = ScriptedModel(script=[ExtractionOutput().model_dump()], prompts=[])
    LLMExtractor(model).extract(MSGS, existing=[Recalled("k1", ("memories", "u", "work"), rec)],
                                now=NOW)
    assert "id=k1" in model.prompts[0][-1].text and "Prefers coffee." in model.prompts[0][-1].text
