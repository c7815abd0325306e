"""A new memory: its record, its scope and its enrichment, alike for every way it is written
(``remember`` here, the write path's add and update in ``langmem_layer.write.apply``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import PutOp

from langmem_layer.errors import InvalidContentError
from langmem_layer.extract.gate import content_problem
from langmem_layer.flow import Env, Flow, StoreCall, require_user
from langmem_layer.refs import extract_refs
from langmem_layer.sanitize import reject_nul
from langmem_layer.store import ops as mops
from langmem_layer.types import (
    IDENTITY_SCOPE,
    Kind,
    Layer,
    LoopStatus,
    MemoryRecord,
    Policy,
    Recalled,
    Source,
    memory_namespace,
)

__all__ = [
    "Written", "check_content", "context_before_ops", "context_vector_ops", "links_thread",
    "memory_ops", "new_record", "put_context_vectors", "put_record", "remake_context_vectors",
    "remember", "thread_link_ops",
]

#: Kinds written global to the user unless the extractor says otherwise.
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
    """``content`` stripped, or an error saying how to fix it: the content rule
    (``content_problem``) every way in applies.

    Raises:
        InvalidContentError: Empty, too short or too long once stripped, or holding a
            NUL character.
    """
    if problem := content_problem(content, env.settings.gate):
        raise InvalidContentError(problem)
    return content.strip()


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


def links_thread(env: Env, thread_id: str | None) -> bool:
    """Whether a memory written from ``thread_id`` is linked into the thread's chain."""
    return bool(thread_id) and env.settings.link_thread_memories


def thread_link_ops(env: Env, user_id: str, key: str, thread_id: str | None,
                    now: datetime, *, locked: bool = False) -> list[mops.LinkThreadTailOp]:
    """The link of memory ``key`` to its thread's last memory, which it elaborates.

    The tail is read and the link written in one step of the transaction writing the
    memory, under a per-(user, thread) lock: concurrent writers of a thread make one
    chain, never a fork. ``locked``: the transaction takes that lock itself
    (``LockUserWritesOp(thread_id=)``). Empty unless ``links_thread``.
    """
    if not thread_id or not links_thread(env, thread_id):
        return []
    return [mops.LinkThreadTailOp(user_id, key, thread_id, now, locked=locked)]


def memory_ops(env: Env, user_id: str, profile: str, key: str, content: str, *,
               now: datetime, thread_id: str | None = None, refs: Sequence[str] = (),
               thread_locked: bool = False, **fields: Any) -> tuple[MemoryRecord, list[Any]]:
    """A new memory and the store ops writing it, enriched alike by every entry point.

    * the content is checked (``check_content``: not empty, within the length
      limits, no NUL character), and so are the references;
    * its references are the given ones plus those its content names
      (``langmem_layer.refs.extract_refs``), so the reference strategy finds it
      whoever wrote it;
    * it elaborates the last memory of ``thread_id`` (``thread_link_ops``), so the
      link walk finds a thread's memories in order.

    Args:
        env: The layer's settings.
        user_id: The tenant.
        profile: The profile of a memory that is not identity (see ``put_record``).
        key: The memory's id.
        content: What it says.
        now: Its creation time.
        thread_id: The thread whose chain it joins (None: none).
        refs: References given with it (an extractor's, a caller's).
        thread_locked: The batch takes the thread's lock itself (see
            ``thread_link_ops``).
        **fields: The rest of ``new_record``'s fields (``kind`` required).

    Returns:
        The record, and its ``PutOp`` followed by the thread link.
    """
    text = check_content(env, content)
    for ref in refs:
        reject_nul(ref, "A reference")
    record = new_record(text, now=now, refs=[*refs, *extract_refs(text)], **fields)
    ops: list[Any] = [put_record(user_id, profile, key, record)]
    ops.extend(thread_link_ops(env, user_id, key, thread_id, now, locked=thread_locked))
    return record, ops


def remember(env: Env, user_id: str, content: str, *, profile: str | None, now: datetime,
             thread_id: str | None = None, kind: Kind = Kind.EPISODIC_EVENT,
             **fields: Any) -> Flow[Recalled]:
    """Write one memory directly (no extractor, no gate); returns it as Recalled.

    Enriched as the write path's (``memory_ops``). Without a ``kind`` it is an
    episodic event: raw text kept as what was said, which does not fade like a fact.
    With ``thread_id`` the memory records its thread and is linked to the thread's
    previous memory (``link_thread_memories``); it then gets a context vector
    (``context_before_ops``, ``put_context_vectors``), unless it is the thread's first.
    """
    user_id = require_user(user_id)
    if thread_id is not None:
        fields["source"] = Source(thread_id=thread_id)
    key = str(uuid.uuid4())
    record, ops = memory_ops(env, user_id, profile or env.settings.default_profile, key,
                             content, now=now, thread_id=thread_id, kind=kind, **fields)
    made = [(ops[0].namespace, key, record.content)]
    # The context read joins the write's transaction, after the link it reads.
    _, *befores = yield StoreCall([mops.AsOfOp(user_id, tuple(ops), now),
                                   *context_before_ops(env, user_id, made, thread_id=thread_id)])
    yield from put_context_vectors(user_id, made, befores, now=now)
    return Recalled(key, ops[0].namespace, record)


#: What a context vector is made of, per memory just written: namespace, key, content.
Written = tuple[tuple[str, ...], str, str]


def context_before_ops(env: Env, user_id: str, written: Sequence[Written], *,
                       thread_id: str | None) -> list[mops.ContextBeforeOp]:
    """Reads of the memories before each of ``written`` in ``thread_id``'s chain
    (``context_turns``), for their context vectors (``langmem_layer.store.ops.context``).

    Run them in the batch that writes the memories, after its ops: each then reads the
    chain its memory's link made, in the same transaction. None for an unlinked thread
    or ``context_turns=0``; a memory not written (an identical one was reinforced) reads
    an empty chain.
    """
    if (not written or not thread_id or not links_thread(env, thread_id)
            or not env.settings.context_turns):
        return []
    return [mops.ContextBeforeOp(user_id, ns, key, thread_id, env.settings.context_turns)
            for ns, key, _ in written]


def context_vector_ops(user_id: str, written: Sequence[Written],
                       befores: Sequence[tuple[tuple[str, str], ...]], *,
                       now: datetime) -> list[mops.PutContextVectorOp]:
    """The ops that keep the context vectors of ``written``, each embedded with the
    memories ``befores`` read for it (in order; fewer: none for the rest). None for a
    memory whose chain is empty (a thread's first)."""
    return [mops.PutContextVectorOp(user_id, ns, key, content, before, now)
            for (ns, key, content), before in zip(written, befores, strict=False) if before]


def put_context_vectors(user_id: str, written: Sequence[Written],
                        befores: Sequence[tuple[tuple[str, str], ...]], *,
                        now: datetime) -> Flow[int]:
    """Embed each of ``written`` with the memories ``befores`` read for it
    (``context_before_ops``' results, in order; fewer: none for the rest) and keep the
    vectors, in one batch (one model call). How many were kept: none for a thread's
    first memory or a store without vectors."""
    puts = context_vector_ops(user_id, written, befores, now=now)
    if not puts:
        return 0
    kept = yield StoreCall(puts)
    return sum(1 for k in kept if k)


def remake_context_vectors(env: Env, user_id: str, namespace: tuple[str, ...],
                           dropped: Sequence[tuple[str, str, str]], *,
                           now: datetime) -> Flow[int]:
    """Make again the context vectors a change of content deleted (``dropped``: the
    result of ``DropContextVectorsOp``, each memory's key, content and thread), from
    the memories as they are now. How many were made."""
    if not dropped or not env.settings.context_turns:
        return 0
    befores = yield StoreCall([
        mops.ContextBeforeOp(user_id, namespace, key, thread, env.settings.context_turns)
        for key, _, thread in dropped])
    return (yield from put_context_vectors(
        user_id, [(namespace, key, content) for key, content, _ in dropped], befores,
        now=now))
