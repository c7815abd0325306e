"""`OfflineChatModel`: a deterministic chat model for demos and tests without an API key.

It does not understand language. It answers by quoting every section of the memory
block in its system message that it may speak from — ALWAYS-KNOWN, RELEVANT FOR THIS
TURN, OPEN THREADS, the retrieved documents, and the DO NOT CONTRADICT facts the
question asks about (sharing a word with it) — so a demo or a test can see exactly what
reached the agent. The rest it shows it used without stating it as something it
knows: USE SILENTLY memories are named as "used silently"; the DO NOT CONTRADICT facts
not asked about, the memories it must not surface, the narrative arc and the recent
conversations of other threads are only counted, never quoted. Only an empty block
gives "nothing relevant yet".

With tools bound (``OfflineChatModel.bind_tools``, as prebuilt agents do) it calls
them deterministically, only the tools bound to it: a request to keep something
("remember that …", "note that …", "don't forget …") or a statement of a personal fact
the rule extractor recognises ("I'm allergic to peanuts.") calls ``remember`` with the
fact in the rule extractor's words ("Is allergic to peanuts.") and its ``kind`` when the
tool takes one; a question calls ``recall`` with the question as its query. Once the
tools have answered, it replies with their results. With ``OPENAI_API_KEY`` set, use a
real model instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from langmem_layer.extract.extractor import OpType
from langmem_layer.extract.phrases import clean, person
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.read.block import (
    ALWAYS_KNOWN,
    AVOID,
    DOCUMENTS,
    FACTCHECK,
    NARRATIVE,
    OPEN_THREADS,
    RECENT_HISTORY,
    RELEVANT,
    SILENT,
)

__all__ = ["OfflineChatModel"]

_SPEAKABLE = (ALWAYS_KNOWN, RELEVANT, OPEN_THREADS, FACTCHECK, DOCUMENTS)
_LABELS = {FACTCHECK: "facts you asked about", DOCUMENTS: "documents"}
_WORD = re.compile(r"[a-z0-9]{4,}")
#: Words too common to show a question is about a fact.
_COMMON = frozenset({"what", "where", "when", "which", "that", "this", "have", "with",
                     "about", "anything", "something", "there", "does", "your", "from"})
#: A request to keep something; group 1 is what to keep.
_KEEP = re.compile(r"^\W*(?:(?:please|ok(?:ay)?|also|and)[\s,]+)*(?:remember|note|"
                   r"keep\s+in\s+mind|(?:make|take)\s+a\s+note|don['’]t\s+forget|"
                   r"do\s+not\s+forget|save|store)\b(?:\s+(?:that|this))?[\s:,]*(.*)$",
                   re.IGNORECASE | re.DOTALL)
_QUESTION = re.compile(r"^\W*(?:what|where|when|who|whom|whose|which|why|how|do|does|did|"
                       r"am|is|are|was|were|can|could|should|would|will|have|has)\b",
                       re.IGNORECASE)
#: The tool argument that takes the text, in order of preference.
_TEXT_ARGS = ("content", "query", "text", "memory", "fact")
_RULES = RuleExtractor()


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


def _count(n: int, noun: str) -> str:
    return f"{n} {noun if n == 1 else {'memory': 'memories'}.get(noun, noun + 's')}"


def _from_memory(system: str, human: str) -> str:
    """What it says of its memory block: the speakable sections quoted, the rest shown
    as used; "nothing relevant yet" only when the block holds nothing."""
    parts = []
    for section in _SPEAKABLE:
        items = _section_lines(system, section)
        if section == FACTCHECK:  # a fact to keep straight: stated only when asked
            items = [item for item in items if _asked_about(item, human)]
        if items:
            parts.append(f"{_LABELS.get(section) or section.split(' (')[0].lower()}: "
                         + "; ".join(items))
    if silent := _section_lines(system, SILENT):
        parts.append("used silently: " + "; ".join(silent))
    used = []  # memory it may not quote: counted, so a reader sees it was there
    if unasked := [i for i in _section_lines(system, FACTCHECK) if not _asked_about(i, human)]:
        used.append(_count(len(unasked), "fact") + " kept straight")
    if avoid := _section_lines(system, AVOID):
        used.append(_count(len(avoid), "memory") + " kept out of this reply")
    if f"### {NARRATIVE}" in system:
        used.append("a summary of earlier conversations")
    if history := _section_lines(system, RECENT_HISTORY):
        used.append(_count(len(history), "line") + " from other threads")
    if used:
        parts.append("also used: " + ", ".join(used))
    return " | ".join(parts) if parts else "nothing relevant yet"


# -- tool calls -----------------------------------------------------------------------


def _schemas(tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    """Bound tool name -> its JSON schema of arguments (OpenAI tool format)."""
    found: dict[str, Mapping[str, Any]] = {}
    for tool in tools or ():
        function = tool.get("function") or {}
        if function.get("name"):
            found[function["name"]] = function.get("parameters") or {}
    return found


def _arguments(schema: Mapping[str, Any], text: str, **optional: str) -> dict[str, Any]:
    """Arguments for a tool of ``schema``: ``text`` in its text argument, and each
    ``optional`` value the schema takes (and allows, when it lists the values)."""
    props: Mapping[str, Any] = schema.get("properties") or {}
    strings = [name for name, p in props.items() if p.get("type", "string") == "string"]
    target = next((n for n in _TEXT_ARGS if n in props), None) or next(
        (n for n in schema.get("required") or () if n in strings), None) or (
        strings[0] if strings else "input")
    args: dict[str, Any] = {target: text}
    for name, value in optional.items():
        allowed = (props.get(name) or {}).get("enum")
        if name in props and (allowed is None or value in allowed):
            args[name] = value
    return args


def _facts(text: str) -> list[tuple[str, str]]:
    """(content, kind) of each fact the rule extractor finds stated in ``text``."""
    ops = _RULES.extract([HumanMessage(text)], now=datetime.now(UTC))
    found: list[tuple[str, str]] = []
    for op in ops:
        if op.op in (OpType.ADD, OpType.UPDATE) and op.content:
            found.append((op.content, op.kind.value))
    return found


def _to_keep(what: str) -> str:
    """A request's rest as a third-person sentence ("my dog is Rex" -> "Their dog is Rex.")."""
    text = person(clean(what))
    return f"{text[:1].upper()}{text[1:]}." if text else ""


def _call_ids(messages: Sequence[BaseMessage]) -> str:
    """A stem for this model call's tool-call ids, unique within a thread.

    Agents match a tool's result to its call by id (``create_react_agent`` treats a call
    whose id already has a result as answered and never runs it), so an id must not
    repeat across a thread's turns. Derived from the conversation so far, it differs at
    every call and stays deterministic for a replayed conversation.
    """
    digest = hashlib.sha1(usedforsecurity=False)
    for message in messages:
        digest.update(f"{message.type}\0{message.text}\0".encode())
    return f"offline-{len(messages)}-{digest.hexdigest()[:10]}"


def _calls(human: str, tools: Mapping[str, Mapping[str, Any]], stem: str) -> list[ToolCall]:
    """The tool calls a turn's request makes, among the bound tools (none: a reply);
    their ids are ``stem`` followed by the call's place and tool name."""
    text = human.strip()
    calls: list[tuple[str, dict[str, Any]]] = []
    if (text.endswith("?") or _QUESTION.match(text)) and "recall" in tools:
        calls.append(("recall", _arguments(tools["recall"], text.rstrip("?").strip())))
    elif "remember" in tools:
        facts = _facts(text)
        keep = _KEEP.match(text)
        if not facts and keep and (content := _to_keep(keep.group(1))):
            facts = [(content, "")]  # kept in the user's words, made third person
        for content, kind in facts:
            extra = {"kind": kind} if kind else {}
            calls.append(("remember", _arguments(tools["remember"], content, **extra)))
    return [ToolCall(name=name, args=args, id=f"{stem}-{i}-{name}", type="tool_call")
            for i, (name, args) in enumerate(calls)]


def _tool_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The tool results of the current turn (after its last human message)."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, ToolMessage):
            results.append(message)
    return results[::-1]


def _summary(results: Sequence[ToolMessage]) -> str:
    said = []
    for r in results:
        failed = " (failed)" if r.status == "error" else ""
        said.append(f"{r.name or 'tool'}{failed}: {' / '.join(r.text.splitlines())}")
    return " | ".join(said)


class OfflineChatModel(BaseChatModel):
    """Replies with what it may speak from in its memory block, and calls the memory
    tools bound to it; never calls a network."""

    @property
    def _llm_type(self) -> str:
        return "langmem-offline"

    def bind_tools(self, tools: Sequence[Mapping[str, Any] | type | Callable[..., Any] | BaseTool],
                   *, tool_choice: Any = None, **kwargs: Any
                   ) -> Runnable[LanguageModelInput, AIMessage]:
        """This model with ``tools`` bound: it may call ``remember`` and ``recall``.

        Args:
            tools: Tools in any form LangChain converts (``BaseTool``, a function, a
                pydantic model, an OpenAI tool dict).
            tool_choice: Ignored: it calls a tool when the request asks for one.
            **kwargs: Passed on to ``bind``.
        """
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        system = "\n".join(m.text for m in messages if isinstance(m, SystemMessage))
        human = next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        results = _tool_results(messages)
        if results:  # the tools have answered: say what they did
            reply = AIMessage(f'Noted: "{human[:80]}". {_summary(results)}')
        elif calls := _calls(human, _schemas(kwargs.get("tools")), _call_ids(messages)):
            reply = AIMessage("", tool_calls=calls)
        else:
            recalled = _from_memory(system, human)
            reply = AIMessage(f'Noted: "{human[:80]}". From memory — {recalled.rstrip(".")}.')
        return ChatResult(generations=[ChatGeneration(message=reply)])
