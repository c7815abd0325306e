"""Control of a user's memory: get, list, correct, forget, export, import, and
the decision log. Written once as flows for sync and async.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import Item, PutOp

from langmem_layer.errors import (
    InvalidContentError,
    InvalidInputError,
    MemoryNotFoundError,
    NotProceduralError,
)
from langmem_layer.flow import Env, Flow, StoreCall, require_user, scopes_for
from langmem_layer.store import ops as mops
from langmem_layer.trust_flows import trust_count
from langmem_layer.types import (
    MEMORY_ROOT,
    HistoryEntry,
    MemoryRecord,
    Policy,
    Recalled,
    Status,
    memory_namespace,
)
from langmem_layer.write.new_memory import check_content, remake_context_vectors

__all__ = [
    "browse", "correct", "decisions", "delete_user", "export", "forget", "get", "history",
    "import_", "list_memories", "record_outcome", "set_surface", "to_recalled",
]

#: History reasons of the user's own changes.
CORRECTED = "corrected by the user"
SURFACE_CHANGED = "changed by the user"
FORGOTTEN = "forgotten at the user's request"

#: The format marker of ``export``'s data, checked by ``import_``.
EXPORT_FORMAT = "langmem_layer.export/1"


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
    """Change a memory's content in place; it is re-embedded in the same write.

    The previous text stays in the memory's history (event ``"content"``). The context
    vectors holding it (the memory's own, and those of the memories it is context for)
    are deleted in the same write, then made again from the new text.
    """
    current = yield from get(user_id, memory_id)
    new_content = check_content(env, content)
    previous = current.record
    history = list(previous.history)
    if new_content != previous.content:
        history.append(HistoryEntry(at=now, event="content", old=previous.content,
                                    new=new_content, reason=CORRECTED))
    record = previous.model_copy(
        update={"content": new_content, "content_hash": "", "history": history}
    )
    record = MemoryRecord.model_validate(record.model_dump())
    # A write the user corrects counts against the agent that wrote it.
    changed = new_content != previous.content
    blame = trust_count(user_id, previous, confirmed=False, now=now) if changed else []
    # The context vectors holding the old text go in the same write (see the docstring).
    _, *dropped = yield StoreCall([
        mops.AsOfOp(user_id, (PutOp(current.namespace, memory_id, record.to_value()),
                              *blame), now),
        *([mops.DropContextVectorsOp(user_id, current.namespace, memory_id)]
          if changed else [])])
    if dropped:
        yield from remake_context_vectors(env, user_id, current.namespace, dropped[0],
                                          now=now)
    return Recalled(memory_id, current.namespace, record)


def browse(user_id: str, *, query: str | None, profile: str | None,
           layers: Sequence[str], kinds: Sequence[str], statuses: Sequence[str] | None,
           limit: int, offset: int, floors: tuple[float, float] = (0.0, 0.0)
           ) -> Flow[list[Recalled]]:
    """One page of the user's memories across every scope (or one ``profile``), filtered
    by layer, kind and status; newest change first, or with ``query`` only those that
    match it, best first (``MatchOp``): a word in common,
    or a similarity reaching ``floors`` (a search's floor, then the one for episodic
    memories), so a search shows what matches rather than every memory reordered. In
    a search a memory's history comes after what is current: active and stale memories
    first, then archived, then contradicted ones, so a superseded memory never ranks
    above the one that replaced it. Each result's ``similarity`` is its similarity to
    ``query`` (None without a vector)."""
    from langgraph.store.base import SearchOp

    user_id = require_user(user_id)
    namespace: tuple[str, ...] = (MEMORY_ROOT, user_id)
    if profile:
        namespace = (*namespace, profile)
    # kind is set on typed memories only: other items under the root are not memories.
    filt: dict[str, Any] = {"kind": {"$in": list(kinds)}}
    if layers:
        filt["layer"] = {"$in": list(layers)}
    if statuses:
        filt["status"] = {"$in": list(statuses)}
    op: Any = SearchOp(namespace, filt, limit, offset)
    if query and query.strip():
        op = mops.MatchOp(user_id, namespace, filt, query, floor=floors[0],
                          episodic_floor=floors[1], limit=limit, offset=offset)
    (found,) = yield StoreCall([op])
    return [
        Recalled(i.key, tuple(i.namespace), MemoryRecord.model_validate(i.value),
                 similarity=i.score)
        for i in found
    ]


def set_surface(user_id: str, memory_id: str, *, pinned: bool | None, policy: Policy | None,
                now: datetime) -> Flow[Recalled]:
    """Pin or unpin a memory and change how it may surface; each change is in its history.

    Raises:
        MemoryNotFoundError: No such memory for the user.
    """
    current = yield from get(user_id, memory_id)
    previous = current.record
    history = list(previous.history)
    update: dict[str, Any] = {}
    if pinned is not None and pinned != previous.pinned:
        update["pinned"] = pinned
        history.append(HistoryEntry(at=now, event="pinned", old=str(previous.pinned).lower(),
                                    new=str(pinned).lower(), reason=SURFACE_CHANGED))
    if policy is not None and policy != previous.policy:
        update["policy"] = policy
        history.append(HistoryEntry(at=now, event="policy", old=previous.policy.value,
                                    new=policy.value, reason=SURFACE_CHANGED))
    if not update:
        return current
    record = MemoryRecord.model_validate(
        previous.model_copy(update={**update, "history": history}).model_dump())
    yield StoreCall([mops.AsOfOp(
        user_id, (PutOp(current.namespace, memory_id, record.to_value()),), now)])
    return Recalled(memory_id, current.namespace, record)


def forget(user_id: str, memory_id: str, *, hard: bool, now: datetime) -> Flow[bool]:
    """Archive a memory (kept for audit), or with ``hard`` delete it, its vectors and links."""
    user_id = require_user(user_id)
    if hard:
        (deleted,) = yield StoreCall([mops.DeleteMemoryOp(user_id, memory_id)])
    else:
        (changed,) = yield StoreCall(
            [mops.SetStatusOp(user_id, (memory_id,), Status.ARCHIVED, now, FORGOTTEN)]
        )
        deleted = bool(changed)
    if not deleted:
        yield from get(user_id, memory_id)  # raises when it does not exist
    return True


def history(user_id: str, memory_id: str) -> Flow[list[HistoryEntry]]:
    """One memory's history, oldest first, whatever its status; raises
    MemoryNotFoundError."""
    (entries,) = yield StoreCall([mops.MemoryHistoryOp(require_user(user_id), memory_id)])
    if entries is None:
        raise MemoryNotFoundError(f"No memory {memory_id!r} for user {user_id!r}.")
    return list(entries)


def record_outcome(user_id: str, memory_id: str, *, success: bool, now: datetime
                   ) -> Flow[tuple[int, int]]:
    """Count one outcome of following a procedural habit; returns (successes, failures).

    Raises:
        MemoryNotFoundError: No such memory for the user.
        NotProceduralError: The memory is not a procedural habit.
    """
    if not isinstance(success, bool):
        raise InvalidInputError(
            f"success must be True or False, got {type(success).__name__}: pass "
            "success=True when following the habit worked, success=False when it did not.")
    user_id = require_user(user_id)
    (counts,) = yield StoreCall([mops.RecordOutcomeOp(user_id, memory_id, success, now)])
    if counts is None:
        found = yield from get(user_id, memory_id)  # raises when it does not exist
        raise NotProceduralError(
            f"Memory {memory_id!r} is a {found.record.layer.value} memory "
            f"({found.record.kind.value}); outcomes are counted for procedural habits "
            "only. Record outcomes of memories whose layer is 'procedural'.")
    successes, failures = counts
    return int(successes), int(failures)


def export(user_id: str) -> Flow[dict[str, Any]]:
    """All of a user's items and links as JSON-ready data."""
    (data,) = yield StoreCall([mops.ExportOp(require_user(user_id))])
    return {
        "format": EXPORT_FORMAT,
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


def delete_user(user_id: str, *, keep_keys: bool = False) -> Flow[mops.UserDeletion]:
    """Erase everything stored for the user, in every per-user table, in one transaction
    (their API keys excepted with ``keep_keys``)."""
    (deleted,) = yield StoreCall([mops.DeleteUserOp(require_user(user_id), keep_keys)])
    return deleted


def _bad_export(what: str) -> InvalidContentError:
    return InvalidContentError(
        f"Not a langmem_layer export: {what}. Pass the dict MemoryLayer.export() "
        "returned (or the JSON file `langmem-layer export` wrote), unmodified."
    )


def _parse_time(raw: Mapping[str, Any], field: str, where: str) -> datetime:
    text = raw.get(field)
    if not isinstance(text, str):
        raise _bad_export(f"{where} has no {field!r} time")
    try:
        return datetime.fromisoformat(text)
    except ValueError as e:
        raise _bad_export(f"{where} has an invalid {field!r}: {text!r}") from e


def _parse_item(raw: Any, n: int, source_user: str | None, user_id: str
                ) -> mops.ExportedItem:
    where = f"item {n}"
    if not isinstance(raw, Mapping):
        raise _bad_export(f"{where} is not an object")
    namespace = raw.get("namespace")
    if (not isinstance(namespace, list) or not namespace
            or not all(isinstance(label, str) for label in namespace)):
        raise _bad_export(f"{where} has no namespace (a list of strings)")
    key, value = raw.get("key"), raw.get("value")
    if not isinstance(key, str) or not key:
        raise _bad_export(f"{where} has no key (a string)")
    if not isinstance(value, dict):
        raise _bad_export(f"{where} ({key}) has no value (an object)")
    ttl = raw.get("ttl_minutes")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))
                            or not ttl > 0):
        raise _bad_export(f"{where} ({key}) has an invalid ttl_minutes: {ttl!r}")
    ns = tuple(namespace)
    if source_user and len(ns) > 1 and ns[1] == source_user:
        ns = (ns[0], user_id, *ns[2:])
    if ns[0] == MEMORY_ROOT and (len(ns) < 2 or ns[1] != user_id):
        raise _bad_export(f"{where} ({key}) belongs to another user than the export's "
                          f"({source_user!r}): {list(namespace)}")
    return mops.ExportedItem(
        namespace=ns, key=key, value=value, is_memory=bool(raw.get("is_memory")),
        created_at=_parse_time(raw, "created_at", where),
        updated_at=_parse_time(raw, "updated_at", where), ttl_minutes=ttl,
    )


def _parse_link(raw: Any, n: int) -> mops.Link:
    where = f"link {n}"
    if not isinstance(raw, Mapping):
        raise _bad_export(f"{where} is not an object")
    for name in ("src_key", "link_type", "dst_key"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise _bad_export(f"{where} has no {name!r} (a string)")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _bad_export(f"{where} has metadata that is not an object")
    return mops.Link(raw["src_key"], raw["link_type"], raw["dst_key"],
                     _parse_time(raw, "created_at", where), metadata)


def import_(user_id: str, data: Mapping[str, Any], *, max_content_chars: int | None = None
            ) -> Flow[int]:
    """Load an ``export`` into the store for ``user_id``; returns the item count.

    The whole file is checked before anything is written: its format, every item and
    link, keys unique, and every link between memories of the file or already stored.

    Args:
        user_id: The user to load it for.
        data: What ``export`` returned.
        max_content_chars: A memory with longer content refuses the file.

    Raises:
        InvalidContentError: The data is not a valid export (nothing was written).
    """
    user_id = require_user(user_id)
    if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
        raise InvalidContentError(
            f"Not a langmem_layer export (expected format {EXPORT_FORMAT!r})."
        )
    source_user = data.get("user_id")
    if source_user is not None and not isinstance(source_user, str):
        raise _bad_export("its user_id is not a string")
    raw_items, raw_links = data.get("items", []), data.get("links", [])
    if not isinstance(raw_items, list) or not isinstance(raw_links, list):
        raise _bad_export("items and links must be lists")
    items = [_parse_item(raw, n, source_user, user_id) for n, raw in enumerate(raw_items)]
    for n, item in enumerate(items):
        content = item.value.get("content") if item.is_memory else None
        if max_content_chars is not None and isinstance(content, str) and (
                len(content) > max_content_chars):
            raise _bad_export(
                f"item {n} ({item.key}) has content of {len(content)} characters, more than "
                f"max_content_chars ({max_content_chars}); shorten it or raise the setting")
    seen: set[tuple[tuple[str, ...], str]] = set()
    for item in items:
        if (item.namespace, item.key) in seen:
            raise _bad_export(f"item {item.namespace!r}/{item.key} appears twice")
        seen.add((item.namespace, item.key))
    links = [_parse_link(raw, n) for n, raw in enumerate(raw_links)]
    memories = {i.key for i in items if i.is_memory}
    outside = sorted({k for ln in links for k in (ln.src_key, ln.dst_key)} - memories)
    if outside:
        found = yield StoreCall([mops.FindMemoryOp(user_id, k) for k in outside])
        missing = [k for k, hit in zip(outside, found, strict=True) if hit is None]
        if missing:
            raise _bad_export(f"links point at memories it does not contain: {missing}")
    (count,) = yield StoreCall([mops.ImportOp(user_id, mops.UserExport(user_id, items, links))])
    return count
