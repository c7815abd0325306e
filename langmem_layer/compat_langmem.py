"""Switching from LangMem: its stored memories, read as typed memories.

LangMem's ``create_manage_memory_tool`` puts ``{"content": "<text>"}`` under
``("memories", user_id)`` (its default namespace; a key per memory, a UUID), and its
memory managers put ``{"kind": "<schema name>", "content": {...}}`` where ``content``
is the schema's fields (``{"content": "<text>"}`` for its default ``Memory``, subject,
predicate and object for its ``Triple``). Our
store keeps them as generic items: recall, the context block and extraction never see
them. ``import_langmem`` reads them and proposes each as a new memory to the write
path (``langmem_layer.write.apply.ingest``), so the gate deduplicates them against
what is stored and the decision log records them.

It is idempotent: a memory's operation id comes from its LangMem namespace, key and
text, so importing again writes nothing new, and an item LangMem changed since is
imported as its new text. LangMem's items are left as they are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.store.base import SearchItem, SearchOp

from langmem_layer.errors import InvalidNamespaceError
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.flow import Env, Flow, StoreCall, require_user
from langmem_layer.types import MEMORY_ROOT, Kind
from langmem_layer.write import apply as write

__all__ = ["LangmemImport", "import_langmem", "langmem_text"]

#: Items read per store round trip, and memories proposed per write-path transaction.
PAGE, CHUNK = 200, 20
#: The agent recorded as the imported memories' source.
LANGMEM_AGENT = "langmem"


@dataclass
class LangmemImport:
    """What ``import_langmem`` did.

    Attributes:
        found: LangMem items read (typed memories under the prefix are not counted).
        written: Ids of the memories created.
        reinforced: Ids of existing memories an item repeated (reinforced instead).
        replayed: Items imported before, unchanged since (nothing done).
        skipped: ``namespace/key: why`` of items not imported (no text, or refused by
            the gate).
    """

    found: int = 0
    written: list[str] = field(default_factory=list)
    reinforced: list[str] = field(default_factory=list)
    replayed: int = 0
    skipped: list[str] = field(default_factory=list)


def langmem_text(value: Mapping[str, Any]) -> str | None:
    """The text of a LangMem item's value; None when it holds none.

    ``{"content": "text"}`` (its tools), ``{"kind": ..., "content": {"content": "text"}}``
    (its default manager schema), or ``{"kind": ..., "content": {fields}}`` (a custom
    schema: a triple as ``subject predicate object``, others as ``name: value`` pairs).
    """
    content = value.get("content")
    if isinstance(content, str):
        return content.strip() or None
    if isinstance(content, Mapping):
        inner = content.get("content")
        if isinstance(inner, str) and inner.strip():
            return inner.strip()
        fields = {k: str(v).strip() for k, v in content.items()
                  if isinstance(v, str | int | float) and not isinstance(v, bool)
                  and str(v).strip()}
        if {"subject", "predicate", "object"} <= fields.keys():
            triple = f"{fields['subject']} {fields['predicate']} {fields['object']}"
            return f"{triple} ({fields['context']})" if "context" in fields else triple
        # Sorted: a JSON store need not keep the schema's field order.
        return "; ".join(f"{k}: {v}" for k, v in sorted(fields.items())) or None
    return None


def _is_langmem(item: SearchItem) -> bool:
    # A typed memory (ours) has a memory kind; LangMem's have none, or a schema name.
    return item.value.get("kind") not in Kind._value2member_map_


def _source_id(item: SearchItem) -> str:
    return f"langmem:{'/'.join(item.namespace)}:{item.key}"


def import_langmem(env: Env, user_id: str, *, namespace: Sequence[str] | None,
                   profile: str | None, kind: Kind, now: datetime) -> Flow[LangmemImport]:
    """Read LangMem's items under ``namespace`` and write each as a typed memory.

    Args:
        env: The layer's settings and gate.
        user_id: The user; ``namespace`` must be theirs.
        namespace: LangMem's namespace prefix; default ``("memories", user_id)``.
        profile: Where the memories go (default ``settings.default_profile``).
        kind: Their kind (LangMem does not type them).
        now: The import's time.
    """
    user_id = require_user(user_id)
    prefix = tuple(namespace) if namespace is not None else (MEMORY_ROOT, user_id)
    if len(prefix) < 2 or prefix[1] != user_id:
        raise InvalidNamespaceError(
            f"import_langmem: namespace {prefix!r} is not user {user_id!r}'s; LangMem's "
            f"default is ('memories', '{user_id}'), i.e. (prefix, user_id, ...).")
    result = LangmemImport()
    items: list[SearchItem] = []
    offset = 0
    while True:
        (page,) = yield StoreCall([SearchOp(prefix, None, PAGE, offset)])
        items.extend(i for i in page if _is_langmem(i))
        if len(page) < PAGE:
            break
        offset += PAGE
    result.found = len(items)
    todo: list[tuple[SearchItem, str]] = []
    for item in items:
        text = langmem_text(item.value)
        if text is None:
            result.skipped.append(f"{'/'.join(item.namespace)}/{item.key}: no text")
        else:
            todo.append((item, text))
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start:start + CHUNK]
        messages = [HumanMessage(text, id=_source_id(item)) for item, text in chunk]
        ops = [MemoryOperation(op=OpType.ADD, content=text, kind=kind,
                               source_message_id=_source_id(item),
                               reason="imported from LangMem") for item, text in chunk]
        done = yield from write.ingest(env, user_id, messages, profile=profile,
                                       thread_id=None, agent_id=LANGMEM_AGENT, now=now,
                                       operations=ops)
        result.written.extend(done.written)
        result.reinforced.extend(done.changed)
        result.replayed += len(done.replayed)
        for (item, _), decision in zip(chunk, done.decisions, strict=False):
            if not decision.accepted:
                result.skipped.append(
                    f"{'/'.join(item.namespace)}/{item.key}: {decision.reason}")
    return result
