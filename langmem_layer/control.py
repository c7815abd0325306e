"""Control of a user's memory (R9.1): get, list, correct, forget, export, import, and
the decision log. Written once as flows for sync and async.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import Item, PutOp

from langmem_layer.errors import InvalidContentError, MemoryNotFoundError
from langmem_layer.runner import Env, Flow, StoreCall, require_user, scopes_for
from langmem_layer.store import ops as mops
from langmem_layer.types import (
    MemoryRecord,
    Recalled,
    Status,
    memory_namespace,
)
from langmem_layer.write.memory import check_content

__all__ = [
    "correct", "decisions", "export", "forget", "get", "import_", "list_memories",
    "to_recalled",
]


def to_recalled(item: Item) -> Recalled:
    """Wrap a stored memory item."""
    return Recalled(item.key, tuple(item.namespace), MemoryRecord.model_validate(item.value))



def decisions(user_id: str, *, thread_id: str | None, limit: int
              ) -> Flow[list[mops.IngestLogEntry]]:
    """The latest ingests' gate decisions, newest first."""
    (entries,) = yield StoreCall([mops.IngestLogOp(require_user(user_id), limit, thread_id)])
    return entries


def get(user_id: str, memory_id: str) -> Flow[Recalled]:
    """One memory by id, whatever its status; raises MemoryNotFoundError."""
    (item,) = yield StoreCall([mops.FindMemoryOp(require_user(user_id), memory_id)])
    if item is None:
        raise MemoryNotFoundError(f"No memory {memory_id!r} for user {user_id!r}.")
    return to_recalled(item)


def list_memories(env: Env, user_id: str, *, profile: str | None,
                  statuses: Sequence[str] | None, limit: int) -> Flow[list[Recalled]]:
    """The user's memories in a profile plus identity, newest first."""
    user_id = require_user(user_id)
    ops = [
        mops_search(memory_namespace(user_id, scope), statuses, limit)
        for scope in scopes_for(env, profile)
    ]
    found = yield StoreCall(ops)
    items = [to_recalled(i) for group in found for i in group if i.value.get("kind")]
    items.sort(key=lambda r: r.record.occurred_at, reverse=True)
    return items[:limit]


def mops_search(namespace: tuple[str, ...], statuses: Sequence[str] | None, limit: int) -> Any:
    """A plain BaseStore search over one memory namespace, optionally by status."""
    from langgraph.store.base import SearchOp

    filt = {"status": {"$in": list(statuses)}} if statuses else None
    return SearchOp(namespace, filt, limit)


def correct(env: Env, user_id: str, memory_id: str, content: str, *, now: datetime
            ) -> Flow[Recalled]:
    """Change a memory's content in place; it is re-embedded in the same write (R9.1)."""
    current = yield from get(user_id, memory_id)
    record = current.record.model_copy(
        update={"content": check_content(env, content), "content_hash": ""}
    )
    record = MemoryRecord.model_validate(record.model_dump())
    yield StoreCall([PutOp(current.namespace, memory_id, record.to_value())])
    return Recalled(memory_id, current.namespace, record)


def forget(user_id: str, memory_id: str, *, hard: bool, now: datetime) -> Flow[bool]:
    """Archive a memory (kept for audit), or with ``hard`` delete it, its vectors and links."""
    user_id = require_user(user_id)
    if hard:
        (deleted,) = yield StoreCall([mops.DeleteMemoryOp(user_id, memory_id)])
    else:
        (changed,) = yield StoreCall(
            [mops.SetStatusOp(user_id, (memory_id,), Status.ARCHIVED, now)]
        )
        deleted = bool(changed)
    if not deleted:
        yield from get(user_id, memory_id)  # raises when it does not exist
    return True


def export(user_id: str) -> Flow[dict[str, Any]]:
    """All of a user's items and links as JSON-ready data (R9.1)."""
    (data,) = yield StoreCall([mops.ExportOp(require_user(user_id))])
    return {
        "format": "langmem_layer.export/1",
        "user_id": data.user_id,
        "items": [
            {
                "namespace": list(i.namespace),
                "key": i.key,
                "value": i.value,
                "is_memory": i.is_memory,
                "created_at": i.created_at.isoformat(),
                "updated_at": i.updated_at.isoformat(),
                "ttl_minutes": i.ttl_minutes,
            }
            for i in data.items
        ],
        "links": [
            {
                "src_key": link.src_key,
                "link_type": link.link_type,
                "dst_key": link.dst_key,
                "created_at": link.created_at.isoformat(),
                "metadata": link.metadata,
            }
            for link in data.links
        ],
    }


def import_(user_id: str, data: Mapping[str, Any]) -> Flow[int]:
    """Load an :func:`export` into the store for ``user_id``; returns the item count."""
    user_id = require_user(user_id)
    if data.get("format") != "langmem_layer.export/1":
        raise InvalidContentError(
            "Not a langmem_layer export (expected format 'langmem_layer.export/1')."
        )
    source_user = data.get("user_id")
    items = []
    for raw in data.get("items", []):
        namespace = tuple(raw["namespace"])
        if source_user and len(namespace) > 1 and namespace[1] == source_user:
            namespace = (namespace[0], user_id, *namespace[2:])
        items.append(mops.ExportedItem(
            namespace=namespace, key=raw["key"], value=raw["value"],
            is_memory=bool(raw.get("is_memory")),
            created_at=datetime.fromisoformat(raw["created_at"]),
            updated_at=datetime.fromisoformat(raw["updated_at"]),
            ttl_minutes=raw.get("ttl_minutes"),
        ))
    links = [
        mops.Link(ln["src_key"], ln["link_type"], ln["dst_key"],
                  datetime.fromisoformat(ln["created_at"]), ln.get("metadata") or {})
        for ln in data.get("links", [])
    ]
    (count,) = yield StoreCall([mops.ImportOp(user_id, mops.UserExport(user_id, items, links))])
    return count
