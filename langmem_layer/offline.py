"""`OfflineChatModel`: a deterministic chat model for demos and tests without an API key.

It does not understand language. It answers by quoting every section of the memory
block in its system message that it may speak from — ALWAYS-KNOWN, RELEVANT FOR THIS
TURN, OPEN THREADS, the retrieved documents, and the DO NOT CONTRADICT facts the
question asks about (sharing a word with it) — so a demo or a test can see exactly what
reached the agent. It never quotes USE SILENTLY, DO NOT SURFACE UNLESS THE USER DOES or
the recent conversations. With ``OPENAI_API_KEY`` set, use a real model instead.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langmem_layer.read.block import ALWAYS_KNOWN, DOCUMENTS, FACTCHECK, OPEN_THREADS, RELEVANT

__all__ = ["OfflineChatModel"]

_SPEAKABLE = (ALWAYS_KNOWN, RELEVANT, OPEN_THREADS, FACTCHECK, DOCUMENTS)
_LABELS = {FACTCHECK: "facts you asked about", DOCUMENTS: "documents"}
_WORD = re.compile(r"[a-z0-9]{4,}")
#: Words too common to show a question is about a fact.
_COMMON = frozenset({"what", "where", "when", "which", "that", "this", "have", "with",
                     "about", "anything", "something", "there", "does", "your", "from"})


def _stems(text: str) -> set[str]:
    # A five-letter prefix stands in for a stem: "allergic" / "allergies" meet.
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _COMMON}


def _asked_about(line: str, question: str) -> bool:
    return bool(_stems(line) & _stems(question))


def _section_lines(block: str, section: str) -> list[str]:
    lines: list[str] = []
    inside = False
    for line in block.splitlines():
        if line.startswith("### "):
            inside = line[4:].strip() == section
        elif inside and line.startswith("- "):
            lines.append(line[2:])
    return lines


class OfflineChatModel(BaseChatModel):
    """Replies with what it may speak from in its memory block; never calls a network."""

    @property
    def _llm_type(self) -> str:
        return "langmem-offline"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        system = "\n".join(m.text for m in messages if isinstance(m, SystemMessage))
        human = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        parts = []
        for section in _SPEAKABLE:
            items = _section_lines(system, section)
            if section == FACTCHECK:  # a fact to keep straight: stated only when asked
                items = [item for item in items if _asked_about(item, human)]
            if items:
                parts.append(f"{_LABELS.get(section) or section.split(' (')[0].lower()}: "
                             + "; ".join(items))
        recalled = " | ".join(parts) if parts else "nothing relevant yet"
        text = f'Noted: "{human[:80]}". From memory — {recalled.rstrip(".")}.'
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
