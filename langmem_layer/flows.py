"""What the memory layer does, written once for sync and async.

Each flow is a generator that yields requests — :class:`StoreCall` (a batch of store
ops) or :class:`ExtractCall` (run the extractor) — and returns its result. The
:class:`~langmem_layer.MemoryLayer` drives a flow with ``store.batch`` and
``extractor.extract`` in sync code, or with ``abatch`` / ``aextract`` in async code.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage
from langgraph.store.base import Item, PutOp

from langmem_layer import ops as mops
from langmem_layer.context import ContextBlock, build_context_block
from langmem_layer.errors import InvalidContentError, MemoryNotFoundError, MissingUserError
from langmem_layer.gate import WriteGate
from langmem_layer.query import understand
from langmem_layer.retrieval import rank_candidates
from langmem_layer.settings import MemorySettings
from langmem_layer.tokens import TokenCounter
from langmem_layer.types import (
    IDENTITY_SCOPE,
    Kind,
    Layer,
    LinkType,
    LoopStatus,
    MemoryRecord,
    Policy,
    Recalled,
    Source,
    Status,
    memory_namespace,
    normalize_ref,
)

__all__ = ["Env", "ExtractCall", "Flow", "StoreCall"]


class StoreCall(NamedTuple):
    """Request: run these ops in one store batch (one transaction)."""

    ops: list[Any]


class ExtractCall(NamedTuple):
    """Request: run the extractor."""

    messages: Sequence[BaseMessage]
    existing: Sequence[Recalled]
    now: datetime


Flow = Generator[StoreCall | ExtractCall, Any, Any]

#: Kinds written global to the user (R1.2) unless the extractor says otherwise.
_IDENTITY_PREDICATES = frozenset({"name", "speaks", "values", "relationship"})
_DEFAULT_LAYER = {
    Kind.PROFILE_FACT: Layer.SEMANTIC,
    Kind.PREFERENCE: Layer.PROCEDURAL,
    Kind.PROTOCOL: Layer.PROCEDURAL,
    Kind.EPISODIC_EVENT: Layer.EPISODIC,
    Kind.OPEN_LOOP: Layer.EPISODIC,
    Kind.SHARED_LORE: Layer.EPISODIC,
    Kind.REFLECTION: Layer.SEMANTIC,
    Kind.TEMPORAL_SUMMARY: Layer.SEMANTIC,
}


@dataclass
class Env:
    """What flows need besides I/O: settings, the gate, the token counter, agent trust."""

    settings: MemorySettings
    gate: WriteGate
    counter: TokenCounter
    trust: Mapping[str, float] = field(default_factory=dict)

    def trust_of(self, agent_id: str | None) -> float:
        """An agent's trust: correct / total predictions, 0.5 with no history (R7.2)."""
        return self.trust.get(agent_id or "", 0.5)


def require_user(user_id: str | None) -> str:
    """Validate a user id; the error says how to pass one."""
    if not user_id or not isinstance(user_id, str):
        raise MissingUserError(
            "No user_id: pass it per run as "
            "graph.invoke(inputs, config={'configurable': {'user_id': 'alice'}}) "
            "or as the first argument of the MemoryLayer method."
        )
    if "." in user_id:
        raise MissingUserError(f"user_id {user_id!r} must not contain '.'.")
    return user_id


def scopes_for(env: Env, profile: str | None) -> tuple[str, str]:
    """A run sees its profile and the user's global identity memories."""
    return (profile or env.settings.default_profile, IDENTITY_SCOPE)


def check_content(env: Env, content: str) -> str:
    """Reject empty or oversized content with an error that says the limit."""
    text = (content or "").strip()
    if not text:
        raise InvalidContentError("Memory content is empty.")
    limit = env.settings.gate.max_content_chars
    if len(text) > limit:
        raise InvalidContentError(
            f"Memory content is {len(text)} characters; the limit is {limit} "
            "(MemorySettings.gate.max_content_chars). Split it or summarise it."
        )
    return text


def new_record(
    content: str,
    *,
    kind: Kind,
    layer: Layer | None,
    now: datetime,
    policy: Policy = Policy.SPEAK,
    pinned: bool = False,
    confidence: float = 0.8,
    salience: float = 0.5,
    refs: Sequence[str] = (),
    due_at: datetime | None = None,
    subject: str | None = None,
    predicate: str | None = None,
    obj: str | None = None,
    source: Source | None = None,
    metadata: dict[str, Any] | None = None,
) -> MemoryRecord:
    """Build a fresh active record."""
    if layer is None:
        layer = Layer.IDENTITY if predicate in _IDENTITY_PREDICATES else _DEFAULT_LAYER[kind]
    return MemoryRecord(
        content=content,
        kind=kind,
        layer=layer,
        policy=policy,
        pinned=pinned,
        confidence=confidence,
        salience=salience,
        refs=list(refs),
        due_at=due_at,
        loop_status=LoopStatus.OPEN if kind == Kind.OPEN_LOOP else None,
        subject=subject,
        predicate=predicate,
        object=obj,
        occurred_at=now,
        last_accessed_at=now,
        source=source or Source(),
        metadata=metadata or {},
    )


def put_record(user_id: str, profile: str, key: str, record: MemoryRecord) -> PutOp:
    """The PutOp storing ``record``: identity memories go global, the rest to the profile."""
    scope = IDENTITY_SCOPE if record.layer == Layer.IDENTITY else profile
    return PutOp(memory_namespace(user_id, scope), key, record.to_value())


def to_recalled(item: Item) -> Recalled:
    """Wrap a stored memory item."""
    return Recalled(item.key, tuple(item.namespace), MemoryRecord.model_validate(item.value))


def remember(env: Env, user_id: str, content: str, *, profile: str | None, now: datetime,
             thread_id: str | None = None, **fields: Any) -> Flow:
    """Write one memory directly (no extractor, no gate); returns it as Recalled.

    With ``thread_id`` the memory records its thread and, like the write path's, is
    linked to the thread's previous memory (``link_thread_memories``).
    """
    user_id = require_user(user_id)
    content = check_content(env, content)
    if thread_id is not None:
        fields["source"] = Source(thread_id=thread_id)
    record = new_record(content, now=now, **fields)
    key = str(uuid.uuid4())
    op = put_record(user_id, profile or env.settings.default_profile, key, record)
    ops: list[Any] = [op]
    if thread_id is not None and env.settings.link_thread_memories:
        (previous,) = yield StoreCall([mops.ThreadTailOp(user_id, thread_id)])
        if previous is not None:
            ops.append(mops.LinkOp(user_id, key, LinkType.ELABORATES, previous, now))
    yield StoreCall(ops)
    return Recalled(key, op.namespace, record)


def recall(env: Env, user_id: str, query: str | None, *, profile: str | None, limit: int,
           now: datetime, refs: Sequence[str] = (), reinforce: bool = True) -> Flow:
    """Hybrid retrieval, ranking, and reinforcement of what is returned (R4.1–R4.5).

    The query is read first (:func:`langmem_layer.query.understand`): the references it
    names join ``refs`` for exact lookup, and a period it names ("in May 2023", "last
    week") adds the memories that occurred then. One round trip fetches the candidates
    of every strategy, a second (only when the link walk found something) the links
    between them, so a memory linked to a strong hit inherits part of its score.
    """
    user_id = require_user(user_id)
    st = env.settings
    info = understand(query, now, slack_days=st.temporal_slack_days, refs=st.query_refs,
                      window=st.temporal_window)
    wanted = tuple(dict.fromkeys([normalize_ref(r) for r in refs] + list(info.refs)))
    op = mops.RecallOp(
        user_id,
        scopes_for(env, profile),
        query=query,
        refs=tuple(r for r in wanted if r),
        per_source=st.candidates_per_source,
        now=now,
        keyword=st.keyword_ranking,
        window=(info.window.start, info.window.end) if info.window else None,
        link_types=tuple(st.link_types),
        link_seeds=st.link_seeds,
        # A vector hit below the floor is dropped, so it must not pull in neighbours.
        seed_min_similarity=min(st.similarity_floor, st.episodic_similarity_floor),
        open_questions=st.open_question_limit,
        ref_max_share=st.ref_max_share,
    )
    (candidates,) = yield StoreCall([op])
    links: dict[str, set[str]] = {}
    if any("link" in c.ranks for c in candidates):
        keys = {c.key for c in candidates}
        (found,) = yield StoreCall([mops.LinksOp(user_id, tuple(sorted(keys)))])
        allowed = set(st.link_types)
        for ln in found:
            if ln.link_type in allowed and ln.src_key in keys and ln.dst_key in keys:
                links.setdefault(ln.src_key, set()).add(ln.dst_key)
                links.setdefault(ln.dst_key, set()).add(ln.src_key)
    ranked = rank_candidates(
        candidates, now=now, settings=st, limit=limit, trust=env.trust, links=links
    )
    if reinforce and ranked:
        yield StoreCall([mops.TouchOp(user_id, tuple(r.key for r in ranked), now)])
    return ranked


def context_block(env: Env, recalled: Sequence[Recalled], *, recently_spoken: Sequence[str],
                  now: datetime) -> ContextBlock:
    """The memory block for the prompt (pure; no I/O)."""
    return build_context_block(
        recalled,
        budget_tokens=env.settings.context_budget_tokens,
        counter=env.counter,
        semantic_share=env.settings.semantic_share,
        recently_spoken=recently_spoken,
        now=now,
    )


def decisions(user_id: str, *, thread_id: str | None, limit: int) -> Flow:
    """The latest ingests' gate decisions, newest first."""
    (entries,) = yield StoreCall([mops.IngestLogOp(require_user(user_id), limit, thread_id)])
    return entries


def get(user_id: str, memory_id: str) -> Flow:
    """One memory by id, whatever its status; raises MemoryNotFoundError."""
    (item,) = yield StoreCall([mops.FindMemoryOp(require_user(user_id), memory_id)])
    if item is None:
        raise MemoryNotFoundError(f"No memory {memory_id!r} for user {user_id!r}.")
    return to_recalled(item)


def list_memories(env: Env, user_id: str, *, profile: str | None,
                  statuses: Sequence[str] | None, limit: int) -> Flow:
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


def correct(env: Env, user_id: str, memory_id: str, content: str, *, now: datetime) -> Flow:
    """Change a memory's content in place; it is re-embedded in the same write (R9.1)."""
    current = yield from get(user_id, memory_id)
    record = current.record.model_copy(
        update={"content": check_content(env, content), "content_hash": ""}
    )
    record = MemoryRecord.model_validate(record.model_dump())
    yield StoreCall([PutOp(current.namespace, memory_id, record.to_value())])
    return Recalled(memory_id, current.namespace, record)


def forget(user_id: str, memory_id: str, *, hard: bool, now: datetime) -> Flow:
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


def export(user_id: str) -> Flow:
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


def import_(user_id: str, data: Mapping[str, Any]) -> Flow:
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
