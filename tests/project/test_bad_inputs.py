"""Bad input gets a library error that says what to fix, and changes nothing stored.

The cases are data (tests/data/bad_inputs.json): a call on the façade or the store,
its arguments, the LangmemError subclass expected and words its message must contain.
JSON cannot hold every bad value, so a few markers stand for them: ``{"$float": "nan"}``,
``{"$repeat": [text, n]}``, ``{"$human": text}`` (a HumanMessage), ``{"$broken_tz":
iso}`` (a datetime whose timezone cannot tell its offset); namespaces are lists
(tuples in the call), and ``"$seed"`` is the id of a memory the user already has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda

import langmem_layer
from langmem_layer import LangmemError, MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.extractor import FallbackOperations
from langmem_layer.extract.llm import LLMExtractor
from langmem_layer.extract.rules import RuleExtractor
from tests.fakes import Clock

ALL_CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "data" / "bad_inputs.json").read_text(encoding="utf-8"))
#: Calls on the façade or the store; the REST API's cases run in test_bad_inputs_http.py.
CASES = [c for c in ALL_CASES if c["api"] in ("layer", "store")]
#: A chat model's output for the LLM extractor.
MODEL_CASES = [c for c in ALL_CASES if c["api"] == "extractor"]


class _BrokenZone(tzinfo):
    def utcoffset(self, dt: datetime | None) -> timedelta:
        raise ValueError("this zone cannot tell its offset")

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(0)


def _decode(value: Any, seed: str) -> Any:
    if isinstance(value, list):
        return [_decode(v, seed) for v in value]
    if isinstance(value, dict):
        if "$float" in value:
            return float(value["$float"])
        if "$repeat" in value:
            text, n = value["$repeat"]
            return text * n
        if "$human" in value:
            return HumanMessage(value["$human"])
        if "$broken_tz" in value:
            return datetime.fromisoformat(value["$broken_tz"]).replace(tzinfo=_BrokenZone())
        return {k: _decode(v, seed) for k, v in value.items()}
    return seed if value == "$seed" else value


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> Iterator[MemoryLayer]:
    yield MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)


def _snapshot(layer: MemoryLayer) -> bytes:
    return json.dumps(layer.export("alice"), sort_keys=True).encode()


def test_the_corpus_is_large_and_well_formed() -> None:
    by_api = {api: sum(c["api"] == api for c in ALL_CASES)
              for api in ("layer", "store", "extractor", "http")}
    print(f"bad-input corpus: {len(ALL_CASES)} cases {by_api}")
    assert len(ALL_CASES) >= 100 and sum(by_api.values()) == len(ALL_CASES)
    assert len({c["id"] for c in ALL_CASES}) == len(ALL_CASES)
    for case in CASES:
        assert issubclass(getattr(langmem_layer, case["error"]), LangmemError), case["id"]
        assert case["mentions"], case["id"]
    for case in MODEL_CASES:
        assert case["reply"] is not None and case["mentions"], case["id"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(case: dict[str, Any], layer: MemoryLayer,
                                                  store: PostgresMemoryStore) -> None:
    seed = layer.remember("alice", "Likes tea.", now=datetime(2026, 1, 1, tzinfo=UTC)).key
    store.put(("memories", "alice", "notes"), "k", {"a": 1})
    before = _snapshot(layer)
    args = _decode(case["args"], seed)
    kwargs = _decode(case["kwargs"], seed)
    if case["api"] == "store":
        args[0] = tuple(args[0])
    target = layer if case["api"] == "layer" else store
    expected = getattr(langmem_layer, case["error"])

    with pytest.raises(LangmemError) as caught:
        call: Any = target
        for name in case["call"].split("."):  # "admin.submit": a part's method
            call = getattr(call, name)
        call(*args, **kwargs)

    assert type(caught.value) is expected, repr(caught.value)
    assert case["mentions"].lower() in str(caught.value).lower()
    assert _snapshot(layer) == before


def test_aingest_of_no_messages_is_the_same_error(layer: MemoryLayer) -> None:
    import asyncio

    with pytest.raises(langmem_layer.InvalidInputError, match="messages is empty"):
        asyncio.run(layer.aingest("alice", []))


def test_a_string_is_one_ref_and_one_status(layer: MemoryLayer) -> None:
    memory = layer.remember("alice", "Works at Acme.", refs="acme")
    assert memory.record.refs == ["acme"]
    assert [m.key for m in layer.list("alice", statuses="active")] == [memory.key]


def test_limit_none_is_the_default(layer: MemoryLayer) -> None:
    layer.remember("alice", "Likes tea.")
    assert len(layer.recall("alice", "tea", limit=None)) == 1


class _Replies(BaseChatModel):
    """A chat model whose structured output is always ``reply``: a dict (parsed) or a
    string (raw text that did not parse)."""

    reply: Any = None

    @property
    def _llm_type(self) -> str:
        return "bad-output"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("unused"))])

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        def reply(prompt: list[BaseMessage]) -> dict[str, Any]:
            if isinstance(self.reply, str):
                return {"raw": AIMessage(self.reply), "parsed": None,
                        "parsing_error": ValueError(f"invalid json output: {self.reply!r}")}
            return {"raw": AIMessage(repr(self.reply)), "parsed": self.reply,
                    "parsing_error": None}

        return RunnableLambda(reply)


@pytest.mark.parametrize("case", MODEL_CASES, ids=[c["id"] for c in MODEL_CASES])
def test_bad_model_output_is_refused_and_changes_nothing(
        case: dict[str, Any], layer: MemoryLayer, store: PostgresMemoryStore,
        clock: Clock) -> None:
    layer.remember("alice", "Likes tea.", now=datetime(2026, 1, 1, tzinfo=UTC))
    before = _snapshot(layer)
    model = _Replies(reply=_decode(case["reply"], ""))
    llm = MemoryLayer(store, extractor=LLMExtractor(model), extraction="inline", clock=clock)
    turn = [HumanMessage("Hello there, how are you?", id="m1")]  # nothing for the rules

    ops = llm.extractor.extract(turn, now=clock.now)
    llm.ingest("alice", turn)

    assert isinstance(ops, FallbackOperations) and list(ops) == [], ops
    assert case["mentions"].lower() in ops.extractor.lower(), ops.extractor
    assert _snapshot(layer) == before
