"""LLMExtractor with a scripted chat model: good, malformed and invalid output, failures."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer.extract.extractor import OpType
from langmem_layer.extract.llm import ExtractionOutput, LLMExtractor
from tests.fakes import ScriptedStructuredModel

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
GOOD = {"operations": [{"op": "add", "content": "Prefers green tea.", "kind": "preference"}]}


MSGS = [HumanMessage("I prefer green tea.", id="m1")]


def test_good_output_is_used() -> None:
    model = ScriptedStructuredModel(script=[GOOD], prompts=[])
    ops = LLMExtractor(model).extract(MSGS, now=NOW)
    assert [(o.op, o.content) for o in ops] == [(OpType.ADD, "Prefers green tea.")]
    assert "I prefer green tea." in model.prompts[0][-1].text


def test_malformed_then_good_retries_with_the_error_shown() -> None:
    model = ScriptedStructuredModel(script=["{not json", GOOD], prompts=[])
    ops = LLMExtractor(model).extract(MSGS, now=NOW)
    assert ops[0].content == "Prefers green tea."
    assert "invalid JSON" in model.prompts[1][-1].text


def test_invalid_schema_twice_falls_back_to_rules(caplog: pytest.LogCaptureFixture) -> None:
    bad = {"operations": [{"op": "explode", "content": "x"}]}
    model = ScriptedStructuredModel(script=[bad, bad], prompts=[])
    ops = LLMExtractor(model).extract(MSGS, now=NOW)
    assert [o.reason for o in ops] == ["rule:prefer"]
    # The raw output is logged by its fingerprint, never its text (the user's words).
    assert "raw output:" in caplog.text and "sha256" in caplog.text
    assert "explode" not in caplog.text


async def test_async_model_error_falls_back() -> None:
    model = ScriptedStructuredModel(script=[RuntimeError("503"), RuntimeError("503")], prompts=[])
    ops = await LLMExtractor(model).aextract(MSGS, now=NOW)
    assert ops and ops[0].reason == "rule:prefer"


def test_existing_memories_reach_the_prompt() -> None:
    from langmem_layer.types import Kind, Layer, MemoryRecord, Recalled

    rec = MemoryRecord(content="Prefers coffee.", kind=Kind.PREFERENCE, layer=Layer.PROCEDURAL,
                       occurred_at=NOW, last_accessed_at=NOW)
    model = ScriptedStructuredModel(script=[ExtractionOutput().model_dump()], prompts=[])
    LLMExtractor(model).extract(MSGS, existing=[Recalled("k1", ("memories", "u", "work"), rec)],
                                now=NOW)
    assert "id=k1" in model.prompts[0][-1].text and "Prefers coffee." in model.prompts[0][-1].text
