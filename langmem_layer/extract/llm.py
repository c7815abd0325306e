"""`LLMExtractor`: any LangChain chat model with structured output proposes operations.

Malformed or invalid output is retried once with the validation error shown to the
model; if that fails too (or the model cannot be reached), the rule extractor takes
over, so a turn is never lost to a model's bad day. Its result says so
(``FallbackOperations``): the write path keeps such
a turn, and the ``reextract`` job runs it through the model again once it is back.
Every failure is logged with the raw output.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from datetime import datetime
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, Field, ValidationError

from langmem_layer.extract.extractor import Extractor, FallbackOperations, MemoryOperation
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.sanitize import fingerprint, headline
from langmem_layer.types import Kind, LoopStatus, Recalled, utc_iso

__all__ = ["ExtractionOutput", "LLMExtractor"]

logger = logging.getLogger("langmem_layer.write")

SYSTEM_PROMPT = """You maintain long-term memory about ONE user for an AI assistant.
Read the new messages and the user's existing memories, and propose operations.

Memory kinds: profile_fact (stable facts: name, job, home, relationships, health),
preference (likes, dislikes, habits: how they like things done), episodic_event
(something that happened, with its time), open_loop (a plan, promise or question still
open; give due_at when a date is stated or implied, resolved against the current time),
shared_lore (running jokes, shared references), protocol (how the user wants the
assistant to behave; boundaries such as "never mention X" use policy "avoid"),
reflection, temporal_summary.

Operations: add (new memory), update (a correction of an existing memory: give its
target_id and the corrected content), reinforce (an existing memory restated: give its
target_id, no new content), contradict (an existing memory is no longer true),
close_open_loop (a plan or question was resolved), forget (the user asks you to forget
something: target_id or target_hint).

When the user reports that something an existing open_loop memory planned is done
("I called my mom yesterday" while a memory says "Plans to call mom"), propose
close_open_loop with that open loop's id as target_id, and add nothing for it: do not
store "Called mom" as a new memory. Only a report that it happened closes a loop; a
question ("Did I call mom?"), a renewed intention ("I still need to call mom") or a
postponement does not.

Keep what will matter in weeks: durable facts, preferences, plans, boundaries. Do not keep
transient states as traits ("I'm tired today" is not a trait; mark such content
ephemeral with low salience if at all). Write content as a short third-person statement
("Prefers morning meetings."). Use confidence for how sure you are it is true and
salience for how much it will matter. Propose nothing when nothing is worth keeping."""


class ExtractionOutput(BaseModel):
    """The structured output requested from the model."""

    operations: list[MemoryOperation] = Field(default_factory=list)


def _loop_state(r: Recalled) -> str:
    """An open loop's state and due date, so the model knows what a turn can close."""
    rec = r.record
    if rec.kind != Kind.OPEN_LOOP:
        return ""
    state = f" loop_status={(rec.loop_status or LoopStatus.OPEN).value}"
    return state + (f" due_at={utc_iso(rec.due_at)}" if rec.due_at else "")


def _render(messages: Sequence[BaseMessage], existing: Sequence[Recalled], now: datetime) -> str:
    lines = [f"Current time: {utc_iso(now)}", "", "Existing memories:"]
    if not existing:
        lines.append("(none)")
    for r in existing:
        lines.append(f"- id={r.key} kind={r.record.kind}{_loop_state(r)} :: "
                     f"{r.record.content}")
    lines += ["", "New messages:"]
    for m in messages:
        role = "user" if isinstance(m, HumanMessage) else m.type
        lines.append(f"[{role} id={m.id}] {m.text}")
    return "\n".join(lines)


class LLMExtractor(Extractor):
    """Extraction by a chat model, validated by pydantic, with a rule-based fallback.

    Args:
        model: Any LangChain chat model that supports ``with_structured_output``.
        fallback: Used when the model fails twice; the offline rules by default.
    """

    def __init__(self, model: BaseChatModel, *, fallback: Extractor | None = None) -> None:
        self.model = model
        self.fallback = fallback or RuleExtractor()
        self._structured = model.with_structured_output(ExtractionOutput, include_raw=True)

    def _prompt(self, messages: Sequence[BaseMessage], existing: Sequence[Recalled],
                now: datetime) -> list[BaseMessage]:
        return [SystemMessage(SYSTEM_PROMPT), HumanMessage(_render(messages, existing, now))]

    @staticmethod
    def _parse(reply: Any) -> tuple[list[MemoryOperation] | None, str, str]:
        """Return (operations or None, error text, raw text)."""
        raw_msg = reply.get("raw") if isinstance(reply, dict) else None
        raw = raw_msg.text if isinstance(raw_msg, AIMessage) else repr(raw_msg)
        parsed = reply.get("parsed") if isinstance(reply, dict) else None
        if isinstance(parsed, ExtractionOutput):
            return parsed.operations, "", raw
        error = reply.get("parsing_error") if isinstance(reply, dict) else None
        if parsed is not None:
            try:
                return ExtractionOutput.model_validate(parsed).operations, "", raw
            except ValidationError as e:
                error = e
        return None, str(error or "no structured output"), raw

    def _retry_prompt(self, prompt: list[BaseMessage], raw: str, error: str) -> list[BaseMessage]:
        return [*prompt, AIMessage(raw), HumanMessage(
            "That output was invalid:\n" + error + "\nReply again with valid operations only."
        )]

    def _attempts(self, messages: Sequence[BaseMessage], existing: Sequence[Recalled],
                  now: datetime) -> Generator[list[BaseMessage], Any, list[MemoryOperation] | str]:
        """Yield prompts, receive replies (or the exception a call raised); return the
        operations, or the last error when every attempt failed."""
        prompt = self._prompt(messages, existing, now)
        error = ""
        for attempt in range(2):
            reply = yield prompt
            if isinstance(reply, Exception):  # the model or its transport failed
                ops, error, raw = None, f"{type(reply).__name__}: {reply}", ""
            else:
                ops, error, raw = self._parse(reply)
            if ops is not None:
                return ops
            # The raw output holds the user's words: logged by its fingerprint only.
            logger.warning("LLM extraction attempt %d invalid: %s; raw output: %s",
                           attempt + 1, headline(error), fingerprint(raw))
            prompt = self._retry_prompt(prompt, raw, error)
        return error

    def _fell_back(self, error: str, operations: Sequence[MemoryOperation]
                   ) -> FallbackOperations:
        name = "rules" if isinstance(self.fallback, RuleExtractor) else type(self.fallback).__name__
        logger.warning("LLM extraction failed (%s); the turn was extracted by %s and is kept "
                       "for the reextract job", headline(error), name)
        return FallbackOperations(operations, f"{name} (fallback: {error[:500]})")

    def extract(self, messages: Sequence[BaseMessage], *, existing: Sequence[Recalled] = (),
                now: datetime) -> list[MemoryOperation]:
        """Propose operations; falls back to the rules after two invalid replies."""
        attempts = self._attempts(messages, existing, now)
        prompt = next(attempts)
        while True:
            try:
                reply: Any = self._structured.invoke(prompt)
            except Exception as e:
                reply = e
            try:
                prompt = attempts.send(reply)
            except StopIteration as done:
                if isinstance(done.value, list):
                    return done.value
                return self._fell_back(done.value, self.fallback.extract(
                    messages, existing=existing, now=now))

    async def aextract(self, messages: Sequence[BaseMessage], *,
                       existing: Sequence[Recalled] = (), now: datetime
                       ) -> list[MemoryOperation]:
        """Async twin of ``extract``."""
        attempts = self._attempts(messages, existing, now)
        prompt = next(attempts)
        while True:
            try:
                reply: Any = await self._structured.ainvoke(prompt)
            except Exception as e:
                reply = e
            try:
                prompt = attempts.send(reply)
            except StopIteration as done:
                if isinstance(done.value, list):
                    return done.value
                return self._fell_back(done.value, await self.fallback.aextract(
                    messages, existing=existing, now=now))

