"""The offline synthesizer: a synthesis written through templates, with no model.

It does not concatenate its evidence: it picks the most central statements of the
cluster by embedding (``central``), merges references and
dates, separates what was settled from what is still open, and writes them through a
template per task ("Has discussed X in 4 sessions between March and May; settled on …;
still open: …"). Each task name has one writer, registered with
``offline_writer``; a writer returns a dict the task's schema validates.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from langmem_layer.synth.synthesizer import Evidence, SynthesisOutcome, SynthesisTask, Synthesizer

__all__ = ["OfflineSynthesizer", "clause", "conclusion", "date_span", "offline_writer",
           "open_part", "open_questions", "topic_label"]

T = TypeVar("T", bound=BaseModel)

Writer = Callable[[SynthesisTask[Any]], dict[str, Any]]

#: Offline writers by task name.
WRITERS: dict[str, Writer] = {}

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
_STOP = frozenset(str.split("""a an the and or but of in on at to for with about from by as is
are was were be been being has have had do does did not no it its this that these those they them
their there here what which who whom whose when where why how user users i me my we our you
your he she his her him into over under than then so very more most some any all each much
many also just still again talked discussed discussing said says asked asks thinks think
wants want would could should will shall may might can session sessions today yesterday
tomorrow week month year"""))
_OPEN = re.compile(r"\?\s*$|\b(wonders?|unsure|not sure|undecided|open question|still "
                   r"deciding|considering|might|whether)\b", re.IGNORECASE)
_LEAD = re.compile(r"^(the\s+)?(user\s+)?(has\s+)?(decided|concluded|settled on|agreed)"
                   r"(\s+that)?\s+", re.IGNORECASE)


def offline_writer(name: str) -> Callable[[Writer], Writer]:
    """Register the decorated function as the offline writer of task ``name``."""

    def decorate(fn: Writer) -> Writer:
        WRITERS[name] = fn
        return fn

    return decorate


def clause(text: str) -> str:
    """A statement as a clause: trimmed, without its final period, first letter lowered
    unless it starts a name or an acronym."""
    text = text.strip().rstrip(".!?").strip()
    first = text.split()[0] if text else ""
    verb = first.endswith("ed") or first in _VERBS
    if len(text) > 1 and text[0].isupper() and text[1].islower() and verb:
        return text[0].lower() + text[1:]
    return text


_VERBS = frozenset({
            "Has", "Had", "Is", "Was", "Prefers", "Likes", "Discussed", "Talked", "Decided",
            "Wants", "Thinks", "Plans", "Asked", "Worked", "Studied", "Read", "Lives",
            "Settled", "Concluded", "Keeps", "Still", "The", "A", "An", "Wonders", "Asks",
            "Got", "Spent", "Made", "Went", "Took", "Found", "Gets", "Shares", "Reads"})


def conclusion(text: str) -> str:
    """What a conclusion settled, without its "Decided ..." lead."""
    return clause(_LEAD.sub("", text.strip(), count=1)) or clause(text)


def open_part(text: str) -> str:
    """The open part of a statement ("wonders whether ..."), as a clause."""
    found = _OPEN.search(text)
    if found and found.group(1):
        return clause(text[found.start():])
    return clause(text.rsplit(": ", 1)[-1])


def _as_written(ref: str, evidence: Sequence[Evidence]) -> str:
    """A normalised reference as the statements spell it ("Romans 8" for "romans 8")."""
    for e in evidence:
        at = e.content.lower().find(ref)
        if at >= 0:
            return e.content[at:at + len(ref)]
    return ref


def topic_label(evidence: Sequence[Evidence]) -> str:
    """A short name for what the evidence shares: its most shared reference, else its
    most frequent content word."""
    refs = Counter(r for e in evidence for r in set(e.refs))
    if refs:
        ref, n = refs.most_common(1)[0]
        if n >= 2 or len(evidence) == 1:
            return _as_written(ref, evidence)
    words = Counter(w.lower() for e in evidence for w in set(_WORD.findall(e.content))
                    if w.lower() not in _STOP and len(w) > 3)
    return words.most_common(1)[0][0] if words else "this topic"


def date_span(dates: Sequence[datetime]) -> str:
    """``"in March 2026"``, ``"between March and May 2026"`` or across years."""
    first, last = min(dates), max(dates)
    if (first.year, first.month) == (last.year, last.month):
        return f"in {first:%B %Y}"
    if first.year == last.year:
        return f"between {first:%B} and {last:%B %Y}"
    return f"between {first:%B %Y} and {last:%B %Y}"


def open_questions(evidence: Sequence[Evidence]) -> list[Evidence]:
    """The statements that leave something open (a question, "wonders whether ...")."""
    return [e for e in evidence if not e.conclusion and _OPEN.search(e.content)]


def sessions(evidence: Sequence[Evidence]) -> int:
    """Distinct sessions among the evidence (a statement without one counts by its day)."""
    return len({e.session or e.at.date().isoformat() for e in evidence})


class OfflineSynthesizer(Synthesizer):
    """Writes each task through its registered template; no model, no tokens."""

    name = "offline"

    def synthesize(self, task: SynthesisTask[T]) -> SynthesisOutcome[T]:
        """Write ``task``'s answer with its offline writer."""
        writer = WRITERS.get(task.name)
        outcome: SynthesisOutcome[T] = SynthesisOutcome(None, self.name, attempts=1)
        if writer is None:
            outcome.error = (f"No offline writer for task {task.name!r}; register one with "
                             "langmem_layer.synth.offline_synthesizer.offline_writer.")
            return outcome
        try:
            raw = writer(task)
            answer = task.schema.model_validate(raw)
            if task.check is not None:
                task.check(answer)
        except (ValidationError, ValueError) as e:
            outcome.error = str(e)
            return outcome
        outcome.output = answer
        outcome.raw.append(answer.model_dump_json())
        return outcome
