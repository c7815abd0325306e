"""Input that is too large: a turn of megabytes is handled, what reads it reads a bounded
part, it is kept whole, and no error quotes more than a short prefix of it."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.graph import END, START, StateGraph

from langmem_layer import (
    InvalidContentError,
    MemoryLayer,
    MemoryState,
    MissingUserError,
    memory_prompt,
)
from langmem_layer.errors import InvalidInputError
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.offline_chat import OfflineChatModel
from langmem_layer.read import query as query_module
from langmem_layer.read.query import MAX_QUERY_CHARS, bounded
from langmem_layer.refs import _sentence_initial, extract_refs
from langmem_layer.sql.candidates import cap_terms
from langmem_layer.store.db_errors import translate
from tests.fakes import Clock

PROSE = ("I walked to the Market with Dana on Sunday. We talked about New York and the "
         "weather. It was a long day, but good. ")
BIG = (PROSE * (3_000_000 // len(PROSE) + 1))[:3_000_000]  # 3 MB of ordinary prose


class RecordingExtractor(RuleExtractor):
    """The rule extractor, keeping the length of every message text it was given."""

    seen: list[int]

    def extract(self, messages: Any, **kw: Any) -> Any:
        self.seen = [*getattr(self, "seen", []), *(len(m.text) for m in messages)]
        return super().extract(messages, **kw)


def _graph(memory: MemoryLayer) -> Any:
    model, prompt = OfflineChatModel(), memory_prompt()

    def agent(state: MemoryState) -> dict:
        return {"messages": [model.invoke(prompt(state))]}

    builder = StateGraph(MemoryState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return memory.wire(builder, agent="agent").compile()


def test_a_3mb_turn_is_handled_reading_a_bounded_part(store, clock: Clock, pg_uri: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    searched: list[int] = []
    understand = query_module.understand

    def spy(text: str | None, now: datetime, **kw: Any) -> Any:
        info = understand(text, now, **kw)
        searched.append(len(info.text))
        return info

    monkeypatch.setattr("langmem_layer.read.recall.understand", spy)
    extractor = RecordingExtractor()
    memory = MemoryLayer(store, extractor=extractor, extraction="inline", clock=clock)
    thread = uuid.uuid4().hex
    config = {"configurable": {"user_id": "big", "thread_id": thread}}
    out = _graph(memory).invoke({"messages": [HumanMessage(BIG + " I work at Initech.")]},
                                config)
    assert out["messages"][-1].text  # answered
    assert searched and max(searched) <= MAX_QUERY_CHARS + 3
    assert extractor.seen and max(extractor.seen) <= memory.settings.max_extract_chars
    # Nothing lost: the whole message is in the user's message log.
    with psycopg.connect(pg_uri) as conn:
        (length,) = conn.execute(
            "SELECT max(length(text)) FROM langmem_messages WHERE user_id = 'big'"
        ).fetchone()
    assert length == len(BIG) + len(" I work at Initech.")


async def test_a_3mb_turn_is_handled_async(astore, clock: Clock) -> None:
    memory = MemoryLayer(astore, extraction="inline", clock=clock)
    config = {"configurable": {"user_id": "abig", "thread_id": uuid.uuid4().hex}}
    out = await _graph(memory).ainvoke({"messages": [HumanMessage(BIG)]}, config)
    assert out["messages"][-1].text
    assert await memory.arecall("abig", BIG) is not None  # recall of any length works


def test_recall_and_context_block_take_any_length(store, clock: Clock) -> None:
    memory = MemoryLayer(store, extraction="inline", clock=clock)
    memory.remember("r", "Dana lives in New York.")
    assert memory.recall("r", BIG + " Where does Dana live?")
    assert memory.context_block("r", BIG)


def test_errors_quote_a_short_prefix(store, clock: Clock) -> None:
    memory = MemoryLayer(store, clock=clock)
    with pytest.raises(InvalidContentError) as caught:
        memory.remember("r", BIG)
    assert len(str(caught.value)) < 1_000
    with pytest.raises(MissingUserError) as caught:
        memory.remember("r" + "x" * 1_000_000, "A fact of no one.")
    assert len(str(caught.value)) < 1_000
    echoed = psycopg.errors.ProgramLimitExceeded(f"value is too big in tsquery: {BIG!r}")
    error = translate(echoed)
    assert isinstance(error, InvalidInputError) and len(str(error)) < 1_000


def test_bounded_keeps_the_beginning_and_the_end() -> None:
    assert bounded("short") == "short"
    text = "a" * 5_000 + "Where do I work?"
    kept = bounded(text)
    assert len(kept) <= MAX_QUERY_CHARS + 3 and kept.endswith("Where do I work?")


def test_cap_terms_bounds_a_long_text_of_few_words() -> None:
    kept = cap_terms(BIG).split()
    assert len(kept) <= 128
    assert {w.lower() for w in kept} == {w.lower() for w in re.findall(r"\w+", BIG)}


# The sentence-initial test as the regex it replaced defined it (quadratic over a text).
_BOUNDARY = re.compile(r"(?:^|[.!?:;\n…—–]|\s-)[\s\"'“”‘’(\[]*$")
_ALPHABET = list("ab .!?:;\n…—–-\"'“”‘’([\t )]\r,\u00a0\u2028")


@given(st.lists(st.sampled_from(_ALPHABET), max_size=14), st.data())
def test_sentence_initial_agrees_with_the_regex(chars: list[str], data: st.DataObject) -> None:
    text = "".join(chars)
    start = data.draw(st.integers(0, len(text)))
    assert _sentence_initial(text, start) == (_BOUNDARY.search(text[:start]) is not None)


def test_extract_refs_on_a_long_text() -> None:
    assert extract_refs(BIG) == ["market", "dana", "new york"]
