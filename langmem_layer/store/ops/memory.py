"""A user's memories themselves, in one place: write one unless it is there already,
reinforce, touch, change status, find, search and delete; the write lock of the
apply; their SQL and handlers.

Builders return ``(sql, params)`` with named parameters and do no I/O. Each
statement binds ``user_id``. The other families of memory ops have modules of their
own: ``turn_reads`` (recall), ``links``, ``portability`` (export, import),
``lifecycle``, ``housekeeping``. ``MatchOp`` is the memory panel's search; its SQL
(``sql/generic_items.py`` ``match_items``) shares the filters and the vector walk of
LangGraph's search.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from langgraph.store.base import PutOp, SearchItem

from langmem_layer.errors import InvalidNamespaceError
from langmem_layer.sql import Sql
from langmem_layer.sql import generic_items as isql
from langmem_layer.sql import users as usql
from langmem_layer.sql.filters import compile_filter
from langmem_layer.sql.generic_items import VALUE
from langmem_layer.sql.moved import CLEAR, STATUS, UPDATED, folded
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.ops.items import row_to_item
from langmem_layer.store.plan import Embed, Handler, Query, combine
from langmem_layer.store.tenancy import ns_text, ns_tuple
from langmem_layer.types import content_hash, utc_iso

__all__ = [
    "AddMemoryOp",
    "AddOutcome",
    "AsOfOp",
    "DeleteMemoryOp",
    "FindMemoryOp",
    "LockUserWritesOp",
    "MatchOp",
    "ReinforceOp",
    "SetStatusOp",
    "TouchOp",
    "delete_memory",
    "find_identical",
    "find_memory",
    "lock_thread",
    "lock_user_writes",
    "reinforce",
    "set_status",
    "touch",
]


# -- SQL ----------------------------------------------------------------------------------


def _locks(*locks: tuple[str, ...]) -> Sql:
    # Transaction-scoped advisory locks, taken in order, each on a 64-bit hash of its
    # parts (JSON-encoded, so no separator can be forged by a user or thread id). A
    # collision only makes two unrelated writers wait for each other. The statement
    # takes locks only: a statement's snapshot is taken when it starts, so a read in the
    # same statement as the wait would not see what the holder committed.
    names = [f"lock{n}" for n in range(len(locks))]
    return (
        "SELECT " + ", ".join(f"pg_advisory_xact_lock(hashtextextended(%({name})s, 0))"
                              for name in names),
        {name: json.dumps(["langmem_layer", *parts]) for name, parts in zip(names, locks,
                                                                            strict=True)},
    )


def lock_user_writes(user_id: str, thread_id: str | None = None) -> Sql:
    """Serialise the write path's apply per user, until the transaction ends.

    Taken first in the apply transaction: a second worker applying for the same user
    waits, then re-checks what the first one committed (``find_identical``). With
    ``thread_id``, the same statement also takes ``lock_thread``'s lock (after the
    user's, the order every writer holding both takes them in), so the thread's links
    need no statement of their own.
    """
    if thread_id is None:
        return _locks(("apply", user_id))
    return _locks(("apply", user_id), ("thread", user_id, thread_id))


def lock_thread(user_id: str, thread_id: str) -> Sql:
    """Serialise the linking of a thread's new memories, until the transaction ends."""
    return _locks(("thread", user_id, thread_id))


def find_identical(user_id: str, prefix: str, content_hash: str, now: datetime, *,
                   owner_reads: bool = False) -> Sql:
    """The active memory of one scope with this content hash (case and spacing folded).

    ``owner_reads``: the store acts as the row-level-security role, so the lookup is read
    as the owner (``langmem_identical``), where the content_hash index serves."""
    params = {"user_id": user_id, "prefix": prefix, "hash": content_hash, "now": now}
    if owner_reads:
        return ("SELECT key FROM langmem_identical(%(user_id)s, %(prefix)s, %(hash)s, "
                "%(now)s)", params)
    return (
        f"""SELECT i.key FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.is_memory
          AND i.value ->> 'content_hash' = %(hash)s AND i.prefix = %(prefix)s
          AND {STATUS} = 'active'
          AND (i.expires_at IS NULL OR i.expires_at > %(now)s)
        ORDER BY i.created_at, i.key
        LIMIT 1""",
        params,
    )


def reinforce(user_id: str, keys: Sequence[str], now: datetime, confidence_step: float) -> Sql:
    """Seen again: confidence + step (at most 1), reinforcement count + 1, last accessed =
    now, a stale memory back to active and a fact flagged ``needs_revalidation``
    confirmed (the flag cleared), each with a history entry, in one UPDATE; returns the
    keys that changed.

    The arithmetic is on the stored row, so concurrent reinforcements and touches
    (``touch``) all count: a read-modify-write of the whole value lost them. The
    access time goes to the ``access`` column, which readers lay over the value and
    which keeps the access count a touch wrote.
    """
    # The moves folded in: the value written is the merged one, and the columns cleared.
    m = folded()
    stale = f"{m}->>'status' = 'stale'"
    flagged = f"({m}->'metadata'->'needs_revalidation') = 'true'::jsonb"
    # IMMUTABLE functions only (as set_status): jsonb_object of text pairs, jsonb_set,
    # ||, and numbers written as JSON through their text.
    entry = """('[]'::jsonb || jsonb_object(ARRAY[
                        'at', %(now_iso)s::text, 'event', '{event}', 'old', {old},
                        'new', {new}, 'reason', '{reason}']))"""
    reactivated = entry.format(event="status", old="'stale'", new="'active'",
                               reason="reactivated: matched again by a turn")
    confirmed = entry.format(event="flag", old="'needs_revalidation'", new="NULL",
                             reason="confirmed again: restated by a turn")
    return (
        f"""UPDATE langmem_items i
        SET value = {m} || jsonb_set(jsonb_set('{{}}'::jsonb, '{{confidence}}',
                least(1.0, coalesce((i.value->>'confidence')::float8, 0)
                           + %(step)s::float8)::text::jsonb),
                '{{reinforcement_count}}',
                (coalesce((i.value->>'reinforcement_count')::int, 0) + 1)::text::jsonb)
              -- A stale memory matched again comes back, a flagged fact is confirmed,
              -- and the history says so.
              || CASE WHEN {stale} OR {flagged} THEN jsonb_set('{{}}'::jsonb, '{{history}}',
                    coalesce({m}->'history', '[]'::jsonb)
                        || CASE WHEN {stale} THEN {reactivated} ELSE '[]'::jsonb END
                        || CASE WHEN {flagged} THEN {confirmed} ELSE '[]'::jsonb END)
                 ELSE '{{}}'::jsonb END
              || CASE WHEN {stale} THEN '{{"status": "active"}}'::jsonb ELSE '{{}}'::jsonb END
              || CASE WHEN {flagged} THEN jsonb_set('{{}}'::jsonb, '{{metadata}}',
                    ({m}->'metadata') - 'needs_revalidation')
                 ELSE '{{}}'::jsonb END,
            access = coalesce(i.access, '{{}}'::jsonb)
                     || jsonb_object(ARRAY['last_accessed_at', %(now_iso)s::text]),
            updated_at = %(now)s, {CLEAR}
        WHERE i.user_id = %(user_id)s AND i.key = ANY(%(keys)s::text[]) AND i.is_memory
        RETURNING i.key""",
        {"user_id": user_id, "keys": list(keys), "now": now, "now_iso": utc_iso(now),
         "step": confidence_step},
    )


def touch(user_id: str, keys: Sequence[str], now: datetime) -> Sql:
    """Reinforce retrieved memories: access_count + 1, last_accessed_at = now.

    Only the unindexed ``access`` column changes (readers see it through
    ``VALUE``), so the row is updated in place (HOT)
    when its page has room, and no index entry is written.
    """
    return (
        """UPDATE langmem_items i
        SET access = jsonb_build_object(
                'access_count', coalesce((i.access->>'access_count')::int,
                                         (i.value->>'access_count')::int, 0) + 1,
                'last_accessed_at', %(now_iso)s::text)
        WHERE i.user_id = %(user_id)s AND i.key = ANY(%(keys)s::text[]) AND i.is_memory""",
        {"user_id": user_id, "keys": list(keys), "now_iso": utc_iso(now)},
    )


def set_status(user_id: str, keys: Sequence[str], status: str, now: datetime, *,
               reason: str = "", close_loop: bool = False) -> Sql:
    """Move memories to a lifecycle status and record it in their history, in one UPDATE;
    returns the keys that changed.

    The history entry (``event`` ``"status"``, the old and new status, ``reason``) is
    appended by the same statement that changes the status, on the stored row, so no
    concurrent writer's entry or counter is lost (a read-modify-write would lose them).
    With ``close_loop`` an open loop among them is also closed (``loop_status``
    ``"closed"``, with its own history entry); other kinds keep their ``loop_status``.
    """
    # The moves folded in: the value written is the merged one, and the columns cleared.
    m = folded()
    closes = ("%(close)s::boolean AND i.value->>'kind' = 'open_loop' "
              f"AND coalesce({m}->>'loop_status', 'open') <> 'closed'")
    # Built from IMMUTABLE functions only (jsonb_object of text pairs, jsonb_set, ||):
    # Citus refuses the STABLE jsonb_build_object/to_jsonb over columns in an UPDATE,
    # and any non-IMMUTABLE function inside its CASE. '[]' || an object is the array
    # of that object.
    status_entry = f"""jsonb_set(jsonb_object(ARRAY['at', %(now_iso)s::text, 'event', 'status',
                                           'new', %(status)s::text, 'reason', %(reason)s::text]),
                            '{{old}}', coalesce({m}->'status', 'null'::jsonb))"""
    loop_entry = f"""(jsonb_object(ARRAY['at', %(now_iso)s::text, 'event', 'loop_status',
                                  'old', coalesce({m}->>'loop_status', 'open'),
                                  'reason', %(reason)s::text])
                     || '{{"new": "closed"}}'::jsonb)"""
    return (
        f"""UPDATE langmem_items i
        SET value = {m} || jsonb_object(ARRAY['status', %(status)s::text])
              || jsonb_set('{{}}'::jsonb, '{{history}}',
                     coalesce({m}->'history', '[]'::jsonb)
                     || ('[]'::jsonb || {status_entry})
                     || CASE WHEN {closes} THEN '[]'::jsonb || {loop_entry}
                        ELSE '[]'::jsonb END)
              || CASE WHEN {closes} THEN '{{"loop_status": "closed"}}'::jsonb
                 ELSE '{{}}'::jsonb END,
            updated_at = %(now)s, {CLEAR}
        WHERE i.user_id = %(user_id)s AND i.key = ANY(%(keys)s::text[]) AND i.is_memory
          AND {STATUS} IS DISTINCT FROM %(status)s
        RETURNING i.key""",
        {"user_id": user_id, "keys": list(keys), "status": status, "now": now,
         "now_iso": utc_iso(now), "reason": reason, "close": close_loop},
    )


def find_memory(user_id: str, key: str) -> Sql:
    """One typed memory by id, whatever its scope."""
    return (
        f"""SELECT i.prefix, i.key, {VALUE} AS value, i.created_at, {UPDATED} AS updated_at
        FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.key = %(key)s AND i.is_memory""",
        {"user_id": user_id, "key": key},
    )


def delete_memory(user_id: str, key: str) -> list[Sql]:
    """Delete a memory, its embeddings (cascade) and its links; run in one transaction."""
    params = {"user_id": user_id, "key": key}
    return [
        (
            """DELETE FROM langmem_links
            WHERE user_id = %(user_id)s AND (src_key = %(key)s OR dst_key = %(key)s)""",
            params,
        ),
        (
            """DELETE FROM langmem_items
            WHERE user_id = %(user_id)s AND key = %(key)s AND is_memory RETURNING key""",
            params,
        ),
    ]


# -- handlers -----------------------------------------------------------------------------


def _touch(ctx: Context, op: TouchOp) -> Handler:
    if op.keys:
        yield Query(*touch(op.user_id, op.keys, op.now or ctx.now()), last=True)


def _reinforce(ctx: Context, op: ReinforceOp) -> Handler:
    if not op.keys:
        return []
    rows = yield Query(*reinforce(op.user_id, op.keys, op.now, op.confidence_step),
                       last=True)
    return [r["key"] for r in rows]


def _lock_user_writes(ctx: Context, op: LockUserWritesOp) -> Handler:
    yield Query(*lock_user_writes(op.user_id, op.thread_id))


def _add_memory(ctx: Context, op: AddMemoryOp) -> Handler:
    if ctx.tenant(op.put.namespace) != op.user_id:
        raise InvalidNamespaceError(
            f"Namespace {op.put.namespace!r} does not belong to user {op.user_id!r}.")
    now = op.now or ctx.now()
    value = op.put.value
    digest = value.get("content_hash") or content_hash(value["content"])
    found: list[dict[str, object]] = []

    def absent(rows: list[dict[str, object]]) -> bool:
        found.extend(rows)
        return not rows

    check = Query(*find_identical(op.user_id, ns_text(op.put.namespace), digest, now,
                                  owner_reads=ctx.rls))
    handlers = [ctx.handler_at(o, now) for o in (op.put, *op.then)]
    yield from combine(handlers, gate=check, proceed=absent)
    if found:
        key = str(found[0]["key"])
        yield Query(*reinforce(op.user_id, [key], now, op.confidence_step))
        return AddOutcome(key, created=False)
    return AddOutcome(op.put.key, created=True)


def _as_of(ctx: Context, op: AsOfOp) -> Handler:
    for o in op.ops:  # one user's writes, as every op
        owner = (ctx.tenant(o.namespace) if isinstance(o, PutOp)
                 else getattr(o, "user_id", None))
        if owner != op.user_id:
            raise InvalidNamespaceError(
                f"{type(o).__name__} inside AsOfOp does not belong to user "
                f"{op.user_id!r}.")
    return (yield from combine([ctx.handler_at(o, op.now) for o in op.ops]))


def _set_status(ctx: Context, op: SetStatusOp) -> Handler:
    if not op.keys:
        return []
    rows = yield Query(*set_status(op.user_id, op.keys, op.status, op.now or ctx.now(),
                                        reason=op.reason, close_loop=op.close_loop))
    return [r["key"] for r in rows]


def _find(ctx: Context, op: FindMemoryOp) -> Handler:
    rows = yield Query(*find_memory(op.user_id, op.key))
    return row_to_item(rows[0]) if rows else None


def _delete_memory(ctx: Context, op: DeleteMemoryOp) -> Handler:
    deleted: list[dict[str, object]] = []
    for sql, params in [*usql.forget_memory_traces(op.user_id, op.key),
                        *delete_memory(op.user_id, op.key)]:
        deleted = yield Query(sql, params)
    return bool(deleted)


def _match(ctx: Context, op: MatchOp) -> Handler:
    if ctx.tenant(op.namespace_prefix, prefix=True) != op.user_id:
        raise InvalidNamespaceError(
            f"Namespace {op.namespace_prefix!r} does not belong to user {op.user_id!r}.")
    qvec = None
    if ctx.embeddings is not None:
        _, (qvec,) = yield Embed([], [op.query])
    rows = yield Query(*isql.match_items(
        op.user_id, ns_text(op.namespace_prefix), filter_sql=compile_filter(
            op.filter, column=isql.VALUE), query_text=op.query, query_vector=qvec,
        model_id=ctx.model_id, floor=op.floor, episodic_floor=op.episodic_floor,
        limit=op.limit, offset=op.offset, now=ctx.now()), last=True)
    return [SearchItem(namespace=ns_tuple(r["prefix"]), key=r["key"], value=r["value"],
                       created_at=r["created_at"], updated_at=r["updated_at"],
                       score=r["score"]) for r in rows]


# -- ops ----------------------------------------------------------------------------------


@operation(_match)
class MatchOp(NamedTuple):
    """One page of a user's items that match a query by recall's relevance floor, best
    first (result: ``list[SearchItem]``, ``score`` the cosine similarity): a word shared
    with the query, or a similarity of at least ``floor`` (``episodic_floor`` for an
    episodic memory). The memory panel's search (``langmem_layer.control.browse``).

    Attributes:
        user_id: The tenant (``namespace_prefix`` must be theirs).
        namespace_prefix: The user's namespace, or one scope of it.
        filter: A search filter on the value, as ``SearchOp``'s.
        query: The text searched for.
        floor: The similarity a vector-only match needs.
        episodic_floor: The same for an episodic memory.
        limit: Page size.
        offset: Matches to skip.
    """

    user_id: str
    namespace_prefix: tuple[str, ...]
    filter: dict[str, Any]
    query: str
    floor: float
    episodic_floor: float
    limit: int = 50
    offset: int = 0


@operation(_touch)
class TouchOp(NamedTuple):
    """Reinforce retrieved memories: access count + 1, last accessed = now (result: None)."""

    user_id: str
    keys: tuple[str, ...]
    now: datetime | None = None


@operation(_set_status)
class SetStatusOp(NamedTuple):
    """Move memories to a status, appending a history entry with ``reason`` in the same
    statement (result: ``list[str]`` of keys that changed). With ``close_loop`` an open
    loop among them is also closed (``loop_status`` ``"closed"``)."""

    user_id: str
    keys: tuple[str, ...]
    status: str
    now: datetime | None = None
    reason: str = ""
    close_loop: bool = False


@operation(_find)
class FindMemoryOp(NamedTuple):
    """One typed memory by id, in any scope (result: ``Item | None``)."""

    user_id: str
    key: str


@operation(_delete_memory)
class DeleteMemoryOp(NamedTuple):
    """Delete a memory with its embeddings and links, atomically (result: bool)."""

    user_id: str
    key: str


@operation(_reinforce)
class ReinforceOp(NamedTuple):
    """Seen again: confidence + ``confidence_step`` (at most 1), reinforcement count + 1,
    last accessed = ``now``, in one UPDATE of the stored row (result: ``list[str]`` of
    keys reinforced), so concurrent reinforcements and touches are all counted."""

    user_id: str
    keys: tuple[str, ...]
    now: datetime
    confidence_step: float = 0.05


@operation(_as_of)
class AsOfOp(NamedTuple):
    """Run ``ops`` in the batch's transaction with their puts dated ``now`` (result: the
    list of their results).

    LangGraph's ``PutOp`` carries no time, so a memory written by a flow replayed with
    ``now=`` would otherwise be dated by the store's clock.
    """

    user_id: str
    ops: tuple[Any, ...]
    now: datetime


@operation(_lock_user_writes)
class LockUserWritesOp(NamedTuple):
    """Wait until no other transaction applies memories for this user, and hold that
    until this batch's transaction ends (result: None). Put it first in the batch.

    With ``thread_id`` it also takes the lock ``LinkThreadTailOp`` takes for that
    thread, in the same statement; the batch's links of that thread then say
    ``locked=True``.
    """

    user_id: str
    thread_id: str | None = None


@operation(_add_memory)
class AddMemoryOp(NamedTuple):
    """Write a new memory unless its scope holds an active memory with the same content
    hash; then reinforce that one instead (result: ``AddOutcome``).

    Run under ``LockUserWritesOp``, the check sees every memory committed by a
    concurrent writer. ``then`` (links, status changes) runs only if the memory is
    written.
    """

    user_id: str
    put: Any  # langgraph.store.base.PutOp of a typed memory
    then: tuple[Any, ...] = ()
    now: datetime | None = None
    confidence_step: float = 0.05


@dataclass(frozen=True, slots=True)
class AddOutcome:
    """What an ``AddMemoryOp`` did: ``key`` written (``created``) or reinforced."""

    key: str
    created: bool


