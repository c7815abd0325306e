"""The LLM extractor closes an open loop the user reports done: the prompt shows the open
loop with its id and says what to do, and the close the model returns is applied (loop
archived, loop_status closed, both in the history)."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from pydantic import Field

from langmem_layer import Kind, MemoryLayer, Status
from langmem_layer.extract.llm import SYSTEM_PROMPT, ExtractionOutput, LLMExtractor
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import LoopStatus
from tests.fakes import Clock

_LOOP_LINE = re.compile(r"^- id=(?P<id>\S+) kind=open_loop loop_status=open"
                        r"(?: due_at=\S+)? :: Plans to call mom\.$", re.MULTILINE)


class LoopCloser(BaseChatModel):
    """A chat model with structured output that reads the open loop's id from the prompt
    and closes it, as a model following the prompt would."""

    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "loop-closer"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("unused"))])

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        assert schema is ExtractionOutput

        def reply(prompt: list[BaseMessage]) -> dict[str, Any]:
            self.prompts.append(prompt)
            found = _LOOP_LINE.search(prompt[-1].text)
            ops = ([{"op": "close_open_loop", "target_id": found["id"], "confidence": 0.9}]
                   if found else [])
            parsed = ExtractionOutput.model_validate({"operations": ops})
            return {"raw": AIMessage(parsed.model_dump_json()), "parsed": parsed,
                    "parsing_error": None}

        return RunnableLambda(reply)


def test_the_prompt_says_a_reported_done_plan_closes_its_loop() -> None:
    text = " ".join(SYSTEM_PROMPT.split())
    assert "close_open_loop with that open loop's id as target_id" in text
    assert "I called my mom yesterday" in text


def test_a_loop_reported_done_is_closed_by_the_llm_extractor(store: PostgresMemoryStore,
                                                             clock: Clock) -> None:
    model = LoopCloser()
    layer = MemoryLayer(store, extractor=LLMExtractor(model), extraction="inline",
                        clock=clock)
    loop = layer.remember("u1", "Plans to call mom.", kind=Kind.OPEN_LOOP,
                          due_at=clock.now.replace(hour=18))
    at = clock.advance(days=1)
    result = layer.ingest("u1", [HumanMessage("I called my mom yesterday.", id="m1")])

    (prompt,) = model.prompts
    assert prompt[0].text == SYSTEM_PROMPT
    (line,) = [m for m in _LOOP_LINE.finditer(prompt[-1].text)]
    assert line["id"] == loop.key
    assert "[user id=m1] I called my mom yesterday." in prompt[-1].text
    assert [(d.operation.op.value, d.accepted) for d in result.decisions] == [
        ("close_open_loop", True)]
    assert result.changed == [loop.key] and result.written == []
    record = layer.get("u1", loop.key).record
    assert (record.status, record.loop_status) == (Status.ARCHIVED, LoopStatus.CLOSED)
    reason = "closed: the user reported it done"
    changes = layer.admin.history("u1", loop.key)
    assert [(h.at, h.event, h.old, h.new, h.reason) for h in changes] == [
        (at, "status", "active", "archived", reason),
        (at, "loop_status", "open", "closed", reason)]
    # Closed, it is out of retrieval and is not offered to the model again.
    layer.ingest("u1", [HumanMessage("Mom says hi.", id="m2")])
    assert not _LOOP_LINE.search(model.prompts[-1][-1].text)
