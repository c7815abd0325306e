"""One write path for a memory written directly (``remember``): the record, its scope,
its enrichment.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import PutOp

from langmem_layer.errors import InvalidContentError
from langmem_layer.runner import Env, Flow, StoreCall, require_user
from langmem_layer.store import ops as mops
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
    memory_namespace,
)

__all__ = ["check_content", "new_record", "put_record", "remember"]

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


def remember(env: Env, user_id: str, content: str, *, profile: str | None, now: datetime,
             thread_id: str | None = None, **fields: Any) -> Flow[Recalled]:
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


