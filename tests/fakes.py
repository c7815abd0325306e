"""Test doubles: a deterministic embedder, a movable clock, a scripted chat model and a
scripted extractor. Never a fake database."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from pydantic import Field

if TYPE_CHECKING:
    from langmem_layer.extract.extractor import MemoryOperation
    from langmem_layer.types import Recalled

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({
    "a", "an", "the", "i", "me", "my", "you", "your", "is", "are", "was", "were", "am", "be",
    "to", "of", "in", "on", "at", "for", "and", "or", "it", "that", "this", "what", "do",
    "does", "did", "about", "with",
})


class BagOfWordsEmbeddings(Embeddings):
    """Hashes content words into buckets, so texts sharing words have high cosine.

    Deterministic and instant; stands in for a real model in unit tests only.
    """

    def __init__(self, dims: int = 64) -> None:
        self.dims = dims
        self.calls = 0

    def _vec(self, text: str) -> list[float]:
        v = [0.0] * self.dims
        for word in _WORD.findall(text.lower()):
            if word in _STOP:
                continue
            h = int(hashlib.md5(word.encode()).hexdigest(), 16)
            v[h % self.dims] += 1.0 if (h >> 64) & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        if norm == 1.0 and not any(v):
            v[0] = 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self._vec(text)


class CountingEmbeddings(BagOfWordsEmbeddings):
    """:class:`BagOfWordsEmbeddings` that keeps the texts of every call, in order:
    ``batches[i]`` is call i's texts (queries too)."""

    def __init__(self, dims: int = 64) -> None:
        super().__init__(dims)
        self.batches: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(list(texts))
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.batches.append([text])
        return super().embed_query(text)

    @property
    def texts(self) -> list[str]:
        """Every text embedded, in order, repeats included."""
        return [t for batch in self.batches for t in batch]


class Clock:
    """A clock tests move by hand: ``clock.advance(days=3)``."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 18, 15, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> datetime:
        self.now += timedelta(**kwargs)
        return self.now


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and records what it was sent.

    ``script`` is a list of replies, one per call: an ``AIMessage`` (which may carry
    ``tool_calls``), a string, or a function of the messages returning either. Past
    the end it answers ``"ok"``. ``bind_tools`` returns the model itself, so prebuilt
    agents can use it; ``seen`` holds every call's input messages.
    """

    script: list[Any] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        step = self.script[len(self.seen) - 1] if len(self.seen) <= len(self.script) else "ok"
        if callable(step):
            step = step(messages)
        reply = step if isinstance(step, AIMessage) else AIMessage(str(step))
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def system_text(self, call: int = -1) -> str:
        """The system message of one recorded call (the last by default)."""
        return "\n".join(m.text for m in self.seen[call] if isinstance(m, SystemMessage))


def tool_call(name: str, call_id: str, **args: Any) -> AIMessage:
    """A model reply calling one tool."""
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id,
                                      "type": "tool_call"}])


class ScriptedStructuredModel(BaseChatModel):
    """A chat model with structured output that replies from a script and keeps prompts.

    Each script entry is a dict (a valid parse), a str (raw text that did not parse) or an
    exception (the call fails). ``prompts`` holds every prompt sent, in order.
    """

    script: list[Any]
    prompts: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-structured"

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
            return {"raw": AIMessage(json.dumps(entry)), "parsed": entry,
                    "parsing_error": None}

        return RunnableLambda(reply)

    def text(self, n: int = -1) -> str:
        """All the text of prompt ``n``."""
        return "\n".join(m.text for m in self.prompts[n])


class ScriptedExtractor:
    """Returns the operations it is given; can be told to fail."""

    def __init__(self, ops: Sequence[MemoryOperation] = (), fail: int = 0) -> None:
        self.ops = list(ops)
        self.fail = fail
        self.seen: list[list[Recalled]] = []

    def extract(self, messages: Sequence[BaseMessage], *, existing: Sequence[Recalled] = (),
                now: datetime) -> list[MemoryOperation]:
        self.seen.append(list(existing))
        if self.fail:
            self.fail -= 1
            raise RuntimeError("model unavailable")
        return [op.model_copy() for op in self.ops]

    async def aextract(self, messages: Sequence[BaseMessage], *,
                       existing: Sequence[Recalled] = (), now: datetime) -> list[MemoryOperation]:
        return self.extract(messages, existing=existing, now=now)
