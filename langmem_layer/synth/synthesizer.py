"""The synthesizer interface shared by every reflection job.

A job gathers ``Evidence`` (a user's memories, with their vectors), describes what
it wants in a ``SynthesisTask`` (instructions, the evidence, the record being
rewritten, the pydantic schema of the answer) and hands it to a ``Synthesizer``:

* ``ModelSynthesizer`` asks any LangChain chat model with structured output. The
  answer is validated by the schema (and the task's own ``check``); an invalid answer
  is retried once with the error shown to the model; the raw output of every attempt
  and the tokens sent are kept in the ``SynthesisOutcome``. A model that fails
  twice (or cannot be reached) gives an outcome with ``output=None`` and the error:
  the job records it and leaves its evidence untouched.
* ``OfflineSynthesizer`` writes the same schema
  through templates, with no model (the default when no model is configured).

A new job adds a task name, a schema, and an offline writer for that name
(``offline_writer``).
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from langmem_layer.sanitize import fingerprint, headline
from langmem_layer.tokens import get_token_counter
from langmem_layer.types import utc_iso

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

__all__ = ["Evidence", "ModelSynthesizer", "SynthesisOutcome", "SynthesisTask", "Synthesizer",
           "render_task"]

logger = logging.getLogger("langmem_layer.synth")

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Evidence:
    """One memory a synthesis may draw on.

    Attributes:
        key: The memory id (links point at it).
        content: Its text.
        at: When it happened (``occurred_at``).
        kind: Its kind (``episodic_event`` ...).
        refs: Its normalised references.
        session: The thread it came from (or another session marker).
        vector: Its embedding, unit length, when known (offline centrality).
        conclusion: Whether it states a conclusion the user reached.
    """

    key: str
    content: str
    at: datetime
    kind: str = "episodic_event"
    refs: tuple[str, ...] = ()
    session: str | None = None
    vector: Any = field(default=None, repr=False, compare=False)
    conclusion: bool = False


@dataclass(slots=True)
class SynthesisTask(Generic[T]):
    """What a job asks a synthesizer for.

    Attributes:
        name: The task (``"consolidate"``, ``"reflect"``); selects the offline writer.
        instructions: The system prompt for a model.
        schema: The pydantic model of the answer.
        evidence: The memories to synthesize from, most central first.
        existing: The text of the record being rewritten, if any.
        topic: A short label for what the evidence is about (may be empty).
        now: The time of the run.
        check: Further validation of a parsed answer (e.g. evidence ids must be among
            those given); raises ``ValueError`` with a message for the model.
    """

    name: str
    instructions: str
    schema: type[T]
    evidence: list[Evidence]
    existing: str | None = None
    topic: str = ""
    now: datetime | None = None
    check: Callable[[T], None] | None = None


@dataclass(slots=True)
class SynthesisOutcome(Generic[T]):
    """What a synthesizer produced.

    Attributes:
        output: The validated answer, or None when every attempt failed.
        synthesizer: Which synthesizer wrote it (``"model:<name>"``, ``"offline"``).
        raw: The raw output of each attempt (for the decision log).
        tokens: Tokens sent to a model (0 offline), counted with tiktoken: every
            attempt's messages and the answer's JSON schema.
        attempts: Attempts made.
        error: The last error when ``output`` is None.
    """

    output: T | None
    synthesizer: str
    raw: list[str] = field(default_factory=list)
    tokens: int = 0
    attempts: int = 0
    error: str | None = None


class Synthesizer(ABC):
    """Writes a ``SynthesisTask``'s answer; never raises for a bad answer."""

    #: A short name for logs and the decision log.
    name: str = "synthesizer"

    @abstractmethod
    def synthesize(self, task: SynthesisTask[T]) -> SynthesisOutcome[T]:
        """Answer ``task``; a failure is an outcome with ``output=None`` and the error."""


def render_task(task: SynthesisTask[Any]) -> str:
    """The user-message text of ``task``: time, topic, evidence (with ids), existing record."""
    lines = []
    if task.now is not None:
        lines.append(f"Current time: {utc_iso(task.now)}")
    if task.topic:
        lines.append(f"Topic: {task.topic}")
    lines += ["", "Evidence (one memory a line, oldest first):"]
    for e in sorted(task.evidence, key=lambda e: e.at):
        marks = " [conclusion]" if e.conclusion else ""
        refs = f" refs={', '.join(e.refs)}" if e.refs else ""
        lines.append(f"- id={e.key} date={e.at.date().isoformat()} "
                     f"session={e.session or '-'}{refs}{marks} :: {e.content}")
    if task.existing:
        lines += ["", "Existing record to rewrite (keep what still holds, update the rest):",
                  task.existing]
    return "\n".join(lines)


def _validate(task: SynthesisTask[T], reply: Any) -> tuple[T | None, str, str]:
    """(answer or None, error, raw text) of one structured-output reply."""
    from langchain_core.messages import AIMessage

    raw_msg = reply.get("raw") if isinstance(reply, dict) else None
    raw = raw_msg.text if isinstance(raw_msg, AIMessage) else repr(raw_msg)
    parsed = reply.get("parsed") if isinstance(reply, dict) else reply
    error: Any = reply.get("parsing_error") if isinstance(reply, dict) else None
    if parsed is None:
        return None, str(error or "no structured output"), raw
    try:
        answer = parsed if isinstance(parsed, task.schema) else task.schema.model_validate(
            parsed)
        if task.check is not None:
            task.check(answer)
    except (ValidationError, ValueError) as e:
        return None, str(e), raw if raw_msg is not None else json.dumps(parsed, default=str)
    return answer, "", raw


class ModelSynthesizer(Synthesizer):
    """Synthesis by any LangChain chat model with structured output.

    Args:
        model: A chat model supporting ``with_structured_output``.
        encoding: The tiktoken encoding tokens are counted in.
    """

    def __init__(self, model: BaseChatModel, *, encoding: str = "o200k_base") -> None:
        self.model = model
        self.counter = get_token_counter(encoding)
        self.name = "model:" + str(getattr(model, "model_name", None)
                                   or getattr(model, "model", None) or type(model).__name__)

    def prompt(self, task: SynthesisTask[Any]) -> list[BaseMessage]:
        """The messages of the first attempt."""
        from langchain_core.messages import HumanMessage, SystemMessage

        return [SystemMessage(task.instructions), HumanMessage(render_task(task))]

    def synthesize(self, task: SynthesisTask[T]) -> SynthesisOutcome[T]:
        """Ask the model; retry once with the validation error; never raise for it."""
        from langchain_core.messages import AIMessage, HumanMessage

        structured = self.model.with_structured_output(task.schema, include_raw=True)
        outcome: SynthesisOutcome[T] = SynthesisOutcome(None, self.name)
        messages = self.prompt(task)
        # The schema travels with each request (as a tool or a response format).
        schema_tokens = self.counter.count(json.dumps(task.schema.model_json_schema()))
        for attempt in range(2):
            outcome.attempts += 1
            outcome.tokens += self.counter.count_messages(messages) + schema_tokens
            try:
                reply = structured.invoke(messages)
            except Exception as e:  # the model or its transport: the job keeps its evidence
                outcome.error = f"{type(e).__name__}: {e}"
                outcome.raw.append("")
                logger.warning("synthesis %s attempt %d failed: %s", task.name, attempt + 1,
                               outcome.error)
                continue
            answer, error, raw = _validate(task, reply)
            outcome.raw.append(raw)
            if answer is not None:
                outcome.output, outcome.error = answer, None
                return outcome
            outcome.error = error
            # The raw output holds the user's words (kept in the decision log instead).
            logger.warning("synthesis %s attempt %d invalid: %s; raw output: %s", task.name,
                           attempt + 1, headline(error), fingerprint(raw))
            messages = [*messages, AIMessage(raw), HumanMessage(
                "That output was invalid:\n" + error
                + "\nReply again with output that follows the schema.")]
        return outcome


def central(evidence: Sequence[Evidence], k: int) -> list[Evidence]:
    """The ``k`` most central items: highest mean cosine to the others (by vector).

    Items without a vector count as least central; ties keep the given order.
    """
    import numpy as np

    with_vec = [e for e in evidence if e.vector is not None]
    if len(with_vec) < 2:
        return list(evidence)[:k]
    m = np.asarray([e.vector for e in with_vec], dtype=np.float32)
    score = (m @ m.sum(axis=0)) / len(with_vec)
    order = sorted(range(len(with_vec)), key=lambda i: -float(score[i]))
    ranked = [with_vec[i] for i in order] + [e for e in evidence if e.vector is None]
    return ranked[:k]
