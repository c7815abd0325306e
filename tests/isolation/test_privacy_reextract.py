"""When the chat model is down the rules take the turn, and the turn is kept (per user,
queryable) until the ``reextract`` job has run it through the model again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.extractor import FallbackOperations
from langmem_layer.extract.llm import LLMExtractor
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.store import ops as mops
from tests.fakes import Clock

MODEL_OPS = {"operations": [
    {"op": "add", "content": "Sister is called Maria.", "kind": "profile_fact",
     "source_message_id": "a1"},
]}


class FlakyModel(BaseChatModel):
    """Raises ConnectionError while ``down``; then proposes MODEL_OPS for a turn that
    names Maria, nothing for others."""

    down: bool = True
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "flaky"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("unused"))])

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        def reply(prompt: list[BaseMessage]) -> dict[str, Any]:
            self.calls += 1
            if self.down:
                raise ConnectionError("model unreachable")
            ops = MODEL_OPS if "Maria" in prompt[-1].text else {"operations": []}
            return {"raw": AIMessage(json.dumps(ops)), "parsed": ops, "parsing_error": None}

        return RunnableLambda(reply)


@pytest.fixture
def model() -> FlakyModel:
    return FlakyModel()


@pytest.fixture
def layer(store: PostgresMemoryStore, pg_uri: str, clock: Clock, model: FlakyModel
          ) -> Iterator[MemoryLayer]:
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("TRUNCATE langmem_reextract")
    yield MemoryLayer(store, extractor=LLMExtractor(model), extraction="inline", clock=clock)


def _kept(store: PostgresMemoryStore, user: str) -> list[mops.FallbackTurn]:
    (turns,) = store.batch([mops.FallbackTurnsOp(user)])
    return turns  # type: ignore[no-any-return]


def _reextract(store: PostgresMemoryStore, layer: MemoryLayer) -> dict[str, int]:
    return JOBS["reextract"].run(JobContext(store, layer=layer)).counts


def test_the_fallback_says_so() -> None:
    from datetime import UTC, datetime

    ops = LLMExtractor(FlakyModel()).extract(
        [HumanMessage("I prefer green tea.", id="x")], now=datetime(2026, 1, 1, tzinfo=UTC))
    assert isinstance(ops, FallbackOperations)
    assert ops.extractor.startswith("rules (fallback: ConnectionError: model unreachable")
    assert [o.content for o in ops] == ["Prefers green tea."]


def test_fallback_turns_are_kept_and_reextracted_once_the_model_is_back(
        layer: MemoryLayer, store: PostgresMemoryStore, model: FlakyModel) -> None:
    turn = [HumanMessage("I prefer green tea. My sister is called Maria.", id="a1")]
    layer.ingest("ann", turn, thread_id="t1")
    layer.admin.submit("ann", [HumanMessage("I live in Lisbon.", id="a2")], thread_id="t2")
    layer.ingest("ben", [HumanMessage("I prefer coffee.", id="b1")])
    model.down = False
    layer.ingest("ann", [HumanMessage("Nothing new.", id="a3")])  # the model answered
    model.down = True

    kept = _kept(store, "ann")
    assert sorted(t.thread_id or "" for t in kept) == ["t1", "t2"]
    assert all(t.extractor.startswith("rules (fallback: ConnectionError") for t in kept)
    assert [t.attempts for t in kept] == [1, 1]
    assert len(_kept(store, "ben")) == 1
    contents = {r.record.content for r in layer.list("ann")}
    assert "Prefers green tea." in contents and "Sister is called Maria." not in contents

    # Still down: the turns fall back again, stay kept, and nothing stored changes.
    before = layer.export("ann")
    assert _reextract(store, layer) == {"reextracted": 0, "again": 3, "failed": 0}
    assert layer.export("ann") == before
    assert [t.attempts for t in _kept(store, "ann")] == [2, 2]

    # Back: every kept turn goes through the model; the rules' replayed ops change nothing.
    model.down = False
    assert _reextract(store, layer) == {"reextracted": 3, "again": 0, "failed": 0}
    assert _kept(store, "ann") == [] and _kept(store, "ben") == []
    contents = [r.record.content for r in layer.list("ann")]
    assert contents.count("Sister is called Maria.") == 1
    assert contents.count("Prefers green tea.") == 1

    # Idempotent: nothing left to do, nothing changes.
    after = layer.export("ann")
    assert _reextract(store, layer) == {"reextracted": 0, "again": 0, "failed": 0}
    assert layer.export("ann") == after


def test_one_users_turns_only(layer: MemoryLayer, store: PostgresMemoryStore,
                              model: FlakyModel) -> None:
    layer.ingest("ann", [HumanMessage("I prefer tea.", id="a1")])
    layer.ingest("ben", [HumanMessage("I prefer coffee.", id="b1")])
    model.down = False
    result = JOBS["reextract"].run(JobContext(store, layer=layer), user="ben")
    assert result.counts["reextracted"] == 1
    assert len(_kept(store, "ann")) == 1 and _kept(store, "ben") == []
