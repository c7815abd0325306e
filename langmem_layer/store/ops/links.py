"""Links between a user's memories, in one place: the ops, their SQL and their handlers.

Builders return ``(sql, params)`` with named parameters and do no I/O; each binds
``user_id``. A deleted or swept memory's links go with it (``delete_memory`` of
``store/ops/memory.py``, ``delete_links_of`` here); the lifecycle's purge deletes
them in its own statement (``sql/transitions.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.sql import Sql
from langmem_layer.sql.moved import STATUS, moved_text
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.ops.memory import lock_thread
from langmem_layer.store.plan import Handler, Query

__all__ = [
    "Link",
    "LinkManyOp",
    "LinkOp",
    "LinkThreadTailOp",
    "LinksOp",
    "delete_links_of",
    "insert_link",
    "insert_links",
    "link_thread_tail",
    "link_thread_tail_routed",
    "links_of",
]


# -- SQL: builders return ``(sql, params)`` and do no I/O; each binds ``user_id`` ---------


def link_thread_tail(user_id: str, key: str, thread_id: str, now: datetime, *,
                     owner_reads: bool = False) -> Sql:
    """Link ``key`` to its thread's last memory (``elaborates``), read in the same statement.

    The last memory is the newest active memory of the thread that no other active memory
    elaborates yet: the end of the chain, whatever the clocks of the writers said. Run
    under ``lock_thread``, so the chain stays one path. Returns the key linked to.
    """
    # Linear whatever the plan: the thread's memories are read once (thread index), the
    # links out of its active ones once (links' primary key), and the tail is the active
    # memory not among their targets (a hashed NOT IN). A correlated NOT EXISTS per memory
    # became quadratic under the generic plan of a prepared statement.
    # Under the role the thread is read as the owner (langmem_thread_memories), where
    # the thread index serves: ``->>`` is not leakproof.
    thread = (
        "SELECT t.key, t.created_at, t.active FROM langmem_thread_memories("
        "%(user_id)s, %(thread_id)s) t WHERE t.key <> %(key)s" if owner_reads else
        f"""SELECT i.key, i.created_at, {STATUS} = 'active' AS active
            FROM langmem_items i
            WHERE i.user_id = %(user_id)s AND i.is_memory AND i.key <> %(key)s
              AND i.value -> 'source' ->> 'thread_id' = %(thread_id)s""")
    return (
        f"""WITH thread AS MATERIALIZED (
            {thread}
        ), followed AS MATERIALIZED (
            SELECT l.dst_key FROM thread s
            JOIN langmem_links l ON l.user_id = %(user_id)s AND l.src_key = s.key
             AND l.link_type = 'elaborates'
            WHERE s.active
        )
        INSERT INTO langmem_links (user_id, src_key, link_type, dst_key, created_at, metadata)
        SELECT %(user_id)s, %(key)s, 'elaborates', t.key, %(now)s, '{{}}'::jsonb
        FROM thread t
        WHERE t.active AND t.key NOT IN (SELECT dst_key FROM followed)
        ORDER BY t.created_at DESC, t.key DESC
        LIMIT 1
        ON CONFLICT DO NOTHING
        RETURNING dst_key""",
        {"user_id": user_id, "key": key, "thread_id": thread_id, "now": now},
    )


def link_thread_tail_routed(user_id: str, key: str, thread_id: str, now: datetime) -> Sql:
    """``link_thread_tail`` in the form Citus routes to the user's shard
    (``Query.parts``): the link's ``user_id`` read from the thread's memory and no CTE,
    where Citus plans the CTE form's insert through the coordinator (a copy and a
    two-phase commit). It reads the items as the caller: on Citus the owner's
    functions do too (``sql/citus.py``). Its plans there are custom, so the NOT IN is
    planned for its values; on one server the CTE form's is linear under a generic
    plan as well."""
    def active_in_thread(a: str) -> str:
        return (f"{a}.user_id = %(user_id)s AND {a}.is_memory AND {a}.key <> %(key)s "
                f"AND {a}.value -> 'source' ->> 'thread_id' = %(thread_id)s "
                f"AND {moved_text('status', alias=a)} = 'active'")

    return (
        f"""INSERT INTO langmem_links (user_id, src_key, link_type, dst_key, created_at, metadata)
        SELECT i.user_id, %(key)s, 'elaborates', i.key, %(now)s, '{{}}'::jsonb
        FROM langmem_items i
        WHERE {active_in_thread("i")}
          AND i.key NOT IN (
            SELECT l.dst_key FROM langmem_items s
            JOIN langmem_links l ON l.user_id = %(user_id)s AND l.src_key = s.key
             AND l.link_type = 'elaborates'
            WHERE {active_in_thread("s")})
        ORDER BY i.created_at DESC, i.key DESC
        LIMIT 1
        ON CONFLICT DO NOTHING
        RETURNING dst_key""",
        {"user_id": user_id, "key": key, "thread_id": thread_id, "now": now},
    )


def delete_links_of(user_id: str, keys: Sequence[str]) -> Sql:
    """Remove links touching deleted memories."""
    return (
        """DELETE FROM langmem_links
        WHERE user_id = %(user_id)s
          AND (src_key = ANY(%(keys)s::text[]) OR dst_key = ANY(%(keys)s::text[]))""",
        {"user_id": user_id, "keys": list(keys)},
    )


def insert_links(user_id: str, links: Sequence[tuple[str, str, str]], now: datetime
                 ) -> Sql:
    """Record (src_key, link_type, dst_key) links of one user in one statement; a
    repeated link is a no-op."""
    return (
        """INSERT INTO langmem_links (user_id, src_key, link_type, dst_key, created_at, metadata)
        SELECT %(user_id)s, t.src, t.type, t.dst, %(now)s, '{}'::jsonb
        FROM unnest(%(src)s::text[], %(type)s::text[], %(dst)s::text[]) AS t(src, type, dst)
        ON CONFLICT DO NOTHING""",
        {"user_id": user_id, "src": [s for s, _, _ in links],
         "type": [t for _, t, _ in links], "dst": [d for _, _, d in links], "now": now},
    )


def insert_link(
    user_id: str,
    src_key: str,
    link_type: str,
    dst_key: str,
    now: datetime,
    metadata_json: str = "{}",
) -> Sql:
    """Record a typed link; a repeated link is a no-op."""
    return (
        """INSERT INTO langmem_links (user_id, src_key, link_type, dst_key, created_at, metadata)
        VALUES (%(user_id)s, %(src)s, %(type)s, %(dst)s, %(now)s, %(meta)s::jsonb)
        ON CONFLICT DO NOTHING""",
        {
            "user_id": user_id,
            "src": src_key,
            "type": link_type,
            "dst": dst_key,
            "now": now,
            "meta": metadata_json,
        },
    )


def links_of(user_id: str, keys: Sequence[str]) -> Sql:
    """Links touching any of ``keys``, in either direction."""
    return (
        """SELECT src_key, link_type, dst_key, created_at, metadata FROM langmem_links
        WHERE user_id = %(user_id)s
          AND (src_key = ANY(%(keys)s::text[]) OR dst_key = ANY(%(keys)s::text[]))
        ORDER BY created_at, src_key, link_type, dst_key""",
        {"user_id": user_id, "keys": list(keys)},
    )


# -- handlers -----------------------------------------------------------------------------


def _link(ctx: Context, op: LinkOp) -> Handler:
    meta = json.dumps(op.metadata or {})
    yield Query(
        *insert_link(
            op.user_id, op.src_key, op.link_type, op.dst_key, op.now or ctx.now(), meta
        )
    )


def _link_many(ctx: Context, op: LinkManyOp) -> Handler:
    if op.links:
        yield Query(*insert_links(op.user_id, op.links, op.now or ctx.now()))


def _links(ctx: Context, op: LinksOp) -> Handler:
    rows = yield Query(*links_of(op.user_id, op.keys))
    return [Link(**r) for r in rows]


def _link_thread_tail(ctx: Context, op: LinkThreadTailOp) -> Handler:
    if not op.locked:
        yield Query(*lock_thread(op.user_id, op.thread_id))
    now = op.now or ctx.now()
    rows = yield Query(*link_thread_tail(op.user_id, op.key, op.thread_id, now,
                                         owner_reads=ctx.rls),
                       parts=(link_thread_tail_routed(op.user_id, op.key, op.thread_id, now),))
    return rows[0]["dst_key"] if rows else None


# -- ops ----------------------------------------------------------------------------------


@operation(_link)
class LinkOp(NamedTuple):
    """Record a typed link between two memories (result: None)."""

    user_id: str
    src_key: str
    link_type: str
    dst_key: str
    now: datetime | None = None
    metadata: dict[str, Any] | None = None


@operation(_link_many)
class LinkManyOp(NamedTuple):
    """Record many typed links of one user in one statement (result: None).

    ``links`` holds ``(src_key, link_type, dst_key)`` triples; a link already there (or
    given twice) is a no-op, as with ``LinkOp``.
    """

    user_id: str
    links: tuple[tuple[str, str, str], ...]
    now: datetime | None = None


@operation(_links)
class LinksOp(NamedTuple):
    """Links touching any of ``keys`` (result: ``list[Link]``)."""

    user_id: str
    keys: tuple[str, ...]


@operation(_link_thread_tail)
class LinkThreadTailOp(NamedTuple):
    """Link memory ``key`` (``elaborates``) to the last memory of its thread, the tail read
    and the link written in one step under a per-(user, thread) lock, so concurrent
    writers of a thread make one chain (result: the key linked to, or None)."""

    user_id: str
    key: str
    thread_id: str
    now: datetime | None = None
    #: The batch took the thread's lock already (``LockUserWritesOp(thread_id=...)``).
    locked: bool = False


@dataclass(frozen=True, slots=True)
class Link:
    """A typed link ``src --link_type--> dst``."""

    src_key: str
    link_type: str
    dst_key: str
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
