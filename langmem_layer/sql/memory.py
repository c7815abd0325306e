"""SQL for typed-memory operations: reinforcement, status, links, threads, export.

Builders return ``(sql, params)`` with named parameters and do no I/O. Each
statement binds ``user_id``. Recall's candidates are in ``langmem_layer.sql.recall``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from langmem_layer.sql import Sql
from langmem_layer.sql.items import VALUE
from langmem_layer.sql.moved import CLEAR, STATUS, UPDATED, folded
from langmem_layer.types import utc_iso

__all__ = [
    "delete_links_of",
    "delete_memory",
    "find_identical",
    "find_memory",
    "insert_link",
    "link_thread_tail",
    "links_of",
    "lock_thread",
    "lock_user_writes",
    "reinforce",
    "set_status",
    "touch",
    "user_items",
    "user_links",
]



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


def find_identical(user_id: str, prefix: str, content_hash: str, now: datetime) -> Sql:
    """The active memory of one scope with this content hash (case and spacing folded)."""
    return (
        f"""SELECT i.key FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.is_memory
          AND i.value ->> 'content_hash' = %(hash)s AND i.prefix = %(prefix)s
          AND {STATUS} = 'active'
          AND (i.expires_at IS NULL OR i.expires_at > %(now)s)
        ORDER BY i.created_at, i.key
        LIMIT 1""",
        {"user_id": user_id, "prefix": prefix, "hash": content_hash, "now": now},
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


def link_thread_tail(user_id: str, key: str, thread_id: str, now: datetime) -> Sql:
    """Link ``key`` to its thread's last memory (``elaborates``), read in the same statement.

    The last memory is the newest active memory of the thread that no other active memory
    elaborates yet: the end of the chain, whatever the clocks of the writers said. Run
    under ``lock_thread``, so the chain stays one path. Returns the key linked to.
    """
    # Linear whatever the plan: the thread's memories are read once (thread index), the
    # links out of its active ones once (links' primary key), and the tail is the active
    # memory not among their targets (a hashed NOT IN). A correlated NOT EXISTS per memory
    # became quadratic under the generic plan of a prepared statement.
    return (
        f"""WITH thread AS MATERIALIZED (
            SELECT i.key, i.created_at, {STATUS} = 'active' AS active
            FROM langmem_items i
            WHERE i.user_id = %(user_id)s AND i.is_memory AND i.key <> %(key)s
              AND i.value -> 'source' ->> 'thread_id' = %(thread_id)s
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


def user_items(user_id: str) -> Sql:
    """Every item of a tenant (memories and generic items), for export."""
    return (
        f"""SELECT i.prefix, i.key, {VALUE} AS value, i.is_memory, i.created_at,
               {UPDATED} AS updated_at,
               i.expires_at, i.ttl_minutes
        FROM langmem_items i WHERE i.user_id = %(user_id)s ORDER BY i.prefix, i.key""",
        {"user_id": user_id},
    )


def user_links(user_id: str) -> Sql:
    """Every link of a tenant, for export."""
    return (
        """SELECT src_key, link_type, dst_key, created_at, metadata FROM langmem_links
        WHERE user_id = %(user_id)s ORDER BY src_key, link_type, dst_key""",
        {"user_id": user_id},
    )
