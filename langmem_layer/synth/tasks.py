"""The reflection jobs' tasks: the answer schemas, the model instructions, and the
offline writers (templates) of ``consolidate`` and ``reflect``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from langmem_layer.synth.offline_synthesizer import (
    clause,
    conclusion,
    date_span,
    offline_writer,
    open_part,
    open_questions,
    sessions,
    topic_label,
)
from langmem_layer.synth.synthesizer import SynthesisTask, central

__all__ = ["CONSOLIDATE", "REFLECT", "ConsolidationOutput", "Insight", "ReflectionOutput"]

CONSOLIDATE = """You maintain long-term memory about ONE user for an AI assistant.
The evidence below are episodic memories about one topic, from several sessions. Write
ONE semantic record: a synthesis of what this user now knows, holds or has settled on
about the topic, and what is still open for them. Be specific to this user, not a
generic description of the topic; do not list the sessions one by one. Write in the
third person ("Has worked through ...; settled on ...; still open: ..."), at most three
sentences. If an existing record is given, rewrite it: keep what still holds, update
what the evidence changes. Use only the evidence given."""

REFLECT = """You maintain long-term memory about ONE user for an AI assistant.
From the memories below, infer at most three higher-level insights about the person: a
pattern in how they work, what they care about, or how they respond ("responds well to
humour after a stressful day"). Each insight must be supported by at least two of the
memories: give their ids as evidence. An insight is for the assistant to adapt its
behaviour silently, not to be quoted to the user. Use only the evidence given; propose
nothing when no pattern is supported."""


class ConsolidationOutput(BaseModel):
    """One topic's semantic record."""

    model_config = ConfigDict(extra="ignore")

    content: str = Field(min_length=8, max_length=800,
                         description="The synthesized record, at most three sentences.")
    topic: str = Field(default="", max_length=80, description="A short topic label.")
    settled: list[str] = Field(default_factory=list, description="What the user settled on.")
    open_questions: list[str] = Field(default_factory=list,
                                      description="What is still open for them.")


class Insight(BaseModel):
    """One higher-level insight and its evidence."""

    model_config = ConfigDict(extra="ignore")

    content: str = Field(min_length=8, max_length=400)
    evidence: list[str] = Field(min_length=2, description="Ids of the supporting memories.")
    confidence: float = Field(default=0.6, ge=0.0, le=1.0)


class ReflectionOutput(BaseModel):
    """The insights of one reflection pass."""

    model_config = ConfigDict(extra="ignore")

    insights: list[Insight] = Field(default_factory=list, max_length=3)


def _join(parts: list[str]) -> str:
    return "; ".join(p for p in parts if p)


@offline_writer("consolidate")
def _consolidate(task: SynthesisTask[Any]) -> dict[str, Any]:
    ev = task.evidence
    topic = task.topic or topic_label(ev)
    ranked = central(ev, len(ev))
    settled = [e for e in ranked if e.conclusion]
    still_open = open_questions(ranked)
    plain = [e for e in ranked if e not in settled and e not in still_open]
    n = sessions(ev)
    lead = clause(plain[0].content) if plain else ""
    head = (f"Has discussed {topic} in {n} sessions {date_span([e.at for e in ev])}"
            if n > 1 else f"Discussed {topic} {date_span([e.at for e in ev])}")
    body = _join([head + (f": {lead}" if lead else ""),
                  (f"also {clause(plain[1].content)}" if len(plain) > 1 else ""),
                  (f"settled on: {conclusion(settled[-1].content)}" if settled else ""),
                  (f"still open: {open_part(still_open[0].content)}" if still_open else "")])
    refs = sorted({r for e in ev for r in e.refs} - {topic.lower()})
    if refs:
        body += f" (see also: {', '.join(refs[:5])})"
    return {"content": body + ".", "topic": topic,
            "settled": [conclusion(e.content) for e in settled],
            "open_questions": [open_part(e.content) for e in still_open]}


@offline_writer("reflect")
def _reflect(task: SynthesisTask[Any]) -> dict[str, Any]:
    ev = task.evidence
    ranked = central(ev, 2)
    topic = task.topic or topic_label(ev)
    n = sessions(ev)
    when = date_span([e.at for e in ev])
    if n > 1:
        text = f"Keeps coming back to {topic} ({n} conversations {when})"
    else:
        text = f"Returned to {topic} several times {when}"
    text += ": " + " and ".join(f"“{clause(e.content)}”" for e in ranked)
    text += f"; worth keeping in mind, without quoting it, when {topic} comes up."
    confidence = min(0.95, 0.4 + 0.1 * len(ev))
    return {"insights": [{"content": text, "evidence": [e.key for e in ev],
                          "confidence": confidence}]}
