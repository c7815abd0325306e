"""The temporal summary task: its answer schema, model instructions and offline
writer (a template, no model)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from langmem_layer.synth.offline_synthesizer import (
    clause,
    conclusion,
    offline_writer,
    open_part,
    open_questions,
    sessions,
    topic_label,
)
from langmem_layer.synth.synthesizer import Evidence, SynthesisTask, central

__all__ = ["SUMMARIZE", "SummaryOutput"]

SUMMARIZE = """You maintain long-term memory about ONE user for an AI assistant.
Below is what happened in one period (given as the topic): the user's messages and the
memories recorded then, oldest first. Write a short summary of the period for the
assistant to recall later ("what did we talk about last week?"): the topics discussed,
what was decided, what is still open, in the third person, at most five sentences. Do
not list messages one by one; do not invent anything; use only the evidence given."""


class SummaryOutput(BaseModel):
    """One period's summary."""

    model_config = ConfigDict(extra="ignore")

    content: str = Field(min_length=8, max_length=1500,
                         description="The summary of the period, at most five sentences.")
    topics: list[str] = Field(default_factory=list, max_length=8,
                              description="The topics discussed, most discussed first.")
    decisions: list[str] = Field(default_factory=list, description="What was decided.")
    open_questions: list[str] = Field(default_factory=list, description="What is still open.")


def _topics(ev: list[Evidence], limit: int = 4) -> list[str]:
    """The period's topics: its most shared references as written, else content words."""
    counts = Counter(r for e in ev for r in set(e.refs))
    found = []
    for ref, _ in counts.most_common(limit):
        for e in ev:
            at = e.content.lower().find(ref)
            if at >= 0:
                found.append(e.content[at:at + len(ref)])
                break
        else:
            found.append(ref)
    if not found and ev:
        found.append(topic_label(ev))
    return found


def _listing(items: list[str]) -> str:
    if len(items) < 2:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


@offline_writer("summarize")
def _summarize(task: SynthesisTask[Any]) -> dict[str, Any]:
    ev = sorted(task.evidence, key=lambda e: e.at)
    memories = [e for e in ev if e.kind != "message"]
    n = sessions(ev)
    topics = _topics(memories or ev)
    settled = [e for e in ev if e.conclusion]
    still_open = open_questions(memories or ev)
    pool = [e for e in (memories or ev) if e not in settled and e not in still_open]
    notable = central(pool, 2)
    head = f"{task.topic}: " if task.topic else ""
    head += f"{n} conversation{'s' if n != 1 else ''}"
    parts = [head + (f" about {_listing(topics)}" if topics else "")]
    if notable:
        parts.append("notably " + " and ".join(f"“{clause(e.content)}”" for e in notable))
    if settled:
        parts.append("decided: " + conclusion(settled[-1].content))
    if still_open:
        parts.append("still open: " + open_part(still_open[-1].content))
    return {"content": "; ".join(parts) + ".", "topics": topics,
            "decisions": [conclusion(e.content) for e in settled],
            "open_questions": [open_part(e.content) for e in still_open]}
