"""`OfflineChatModel`: a deterministic chat model for demos and tests without an API key.

It does not understand language. It answers by quoting what the memory block in its
system message says is relevant for this turn, so a demo or a test can see exactly
what memory reached the agent. With ``OPENAI_API_KEY`` set, use a real model instead.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from langmem_layer.read.block import ALWAYS_KNOWN, OPEN_THREADS, RELEVANT

__all__ = ["OfflineChatModel"]

_SPEAKABLE = (ALWAYS_KNOWN, RELEVANT, OPEN_THREADS)


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
    """Replies with the speakable memories it was given; never calls a network."""

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
            if items:
                parts.append(f"{section.split(' (')[0].lower()}: " + "; ".join(items))
        recalled = " | ".join(parts) if parts else "nothing relevant yet"
        text = f'Noted: "{human[:80]}". From memory — {recalled}.'
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
