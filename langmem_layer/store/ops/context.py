"""Context vectors, in one place: the ops, their SQL and their handlers.

A memory written into a thread is embedded a second time with the memories before it
in the thread (``MemorySettings.context_turns``, at most two): "I've been doing them for
about three years now" says nothing of yoga, but said right after "Do you still go to
yoga?" its context vector does. Recall's ``context`` strategy searches these vectors
(``langmem_layer.sql.candidates``, the ``cx`` CTE) beside the memories' own.

A context vector holds the words of the memories it was made from, so those memories
are its foreign keys (``langmem_context_vectors``, migration 35): deleting any of them
deletes it, on every path that deletes a memory. Its chain is read in the
transaction that writes the memory, after the memory's link; the vector is made after
that transaction (``langmem_layer.write.new_memory.context_before_ops`` and
``put_context_vectors``, which ``remember`` and the write path's ``ingest`` run); it
is not cached in the embedding cache, where it would outlive a deleted memory's words.

Builders return ``(sql, params)`` with named parameters and do no I/O; each binds
``user_id``.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from langmem_layer.sql import Sql
from langmem_layer.sql.vector import vector_literal
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.plan import Embed, Handler, Query
from langmem_layer.store.tenancy import ns_text

__all__ = [
    "CONTEXT_TURNS_MAX",
    "ContextBeforeOp",
    "DropContextVectorsOp",
    "PutContextVectorOp",
    "context_before",
    "context_text",
    "drop_context_vectors",
    "insert_context_vector",
    "missing_context_vectors",
]

#: A context vector names the memories it was made from in two columns.
CONTEXT_TURNS_MAX = 2
#: Each earlier memory gives at most this many characters (its end, nearest the
#: memory), so the memory's own words stay within the model's input.
BEFORE_CHARS = 500


# -- SQL: builders return ``(sql, params)`` and do no I/O; each binds ``user_id`` ---------


def context_before(user_id: str, prefix: str, key: str, thread_id: str, turns: int) -> Sql:
    """The memories before ``key`` in its thread's chain (``elaborates`` links of the
    thread), nearest first, at most ``turns`` (1 or 2), in the same scope: rows of
    ``back`` (1, 2), ``key`` and ``content``."""
    hop = """JOIN langmem_items {a} ON {a}.user_id = %(user_id)s AND {a}.prefix = %(prefix)s
            AND {a}.key = {link}.dst_key AND {a}.is_memory
            AND {a}.value -> 'source' ->> 'thread_id' = %(thread_id)s"""
    # The nearest is read once (f); the one before it, from it.
    sql = f"""WITH f AS (
            SELECT p.key, p.value ->> 'content' AS content
            FROM langmem_links l1 {hop.format(a="p", link="l1")}
            WHERE l1.user_id = %(user_id)s AND l1.src_key = %(key)s
              AND l1.link_type = 'elaborates'
            ORDER BY p.created_at DESC, p.key DESC LIMIT 1)
        SELECT 1 AS back, f.key, f.content FROM f"""
    if turns > 1:
        sql += f"""
        UNION ALL
        SELECT 2, q.key, q.value ->> 'content' FROM f
        JOIN LATERAL (
            SELECT q.key, q.value FROM langmem_links l2 {hop.format(a="q", link="l2")}
            WHERE l2.user_id = %(user_id)s AND l2.src_key = f.key
              AND l2.link_type = 'elaborates'
            ORDER BY q.created_at DESC, q.key DESC LIMIT 1) q ON true"""
    return sql + "\n        ORDER BY back", {
        "user_id": user_id, "prefix": prefix, "key": key, "thread_id": thread_id}


def insert_context_vector(user_id: str, prefix: str, key: str, before: tuple[str, ...],
                          vector: list[float], *, model_id: str, dims: int,
                          now: datetime) -> Sql:
    """Keep ``key``'s context vector, made from the memories ``before`` (nearest first).

    Written only while the memory and those it was made from all exist (one deleted
    since they were read: nothing is written, where the foreign key would fail the
    write); returns the key when written."""
    keys = [key, *before]
    return (
        """INSERT INTO langmem_context_vectors
            (user_id, prefix, key, model_id, dims, embedding, after_key, before_that,
             created_at)
        SELECT %(user_id)s, %(prefix)s, %(key)s, %(model_id)s, %(dims)s, %(vec)s::vector,
               %(after)s, %(before_that)s, %(now)s
        WHERE (SELECT count(*) FROM langmem_items i
               WHERE i.user_id = %(user_id)s AND i.prefix = %(prefix)s
                 AND i.key = ANY(%(keys)s::text[])) = %(n)s
        ON CONFLICT (user_id, prefix, key, model_id) DO UPDATE
            SET embedding = EXCLUDED.embedding, dims = EXCLUDED.dims,
                after_key = EXCLUDED.after_key, before_that = EXCLUDED.before_that,
                created_at = EXCLUDED.created_at
        RETURNING key""",
        {"user_id": user_id, "prefix": prefix, "key": key, "model_id": model_id,
         "dims": dims, "vec": vector_literal(vector), "after": before[0],
         "before_that": before[1] if len(before) > 1 else None, "now": now,
         "keys": keys, "n": len(set(keys))},
    )


def drop_context_vectors(user_id: str, prefix: str, key: str) -> Sql:
    """Delete every context vector holding ``key``'s words (its own, and those of the
    memories it is context for): rows of ``key``, ``content`` and ``thread_id`` of the
    memories whose vectors went, as they are now."""
    return (
        """WITH gone AS (
            DELETE FROM langmem_context_vectors v
            WHERE v.user_id = %(user_id)s AND v.prefix = %(prefix)s
              AND (v.key = %(key)s OR v.after_key = %(key)s OR v.before_that = %(key)s)
            RETURNING v.prefix, v.key)
        SELECT DISTINCT g.key, i.value ->> 'content' AS content,
               i.value -> 'source' ->> 'thread_id' AS thread_id
        FROM gone g
        JOIN langmem_items i ON i.user_id = %(user_id)s AND i.prefix = g.prefix
                            AND i.key = g.key
        ORDER BY g.key""",
        {"user_id": user_id, "prefix": prefix, "key": key},
    )


def missing_context_vectors(user_id: str, model_id: str, limit: int) -> Sql:
    """The memories of ``user_id`` written into a thread after its first that have no
    context vector of ``model_id`` (written before context vectors, or whose vector was
    not kept: the model failed after the write), oldest first, at most ``limit``: rows
    of ``prefix``, ``key``, ``content`` and ``thread_id``."""
    return (
        """SELECT i.prefix, i.key, i.value ->> 'content' AS content,
               i.value -> 'source' ->> 'thread_id' AS thread_id
        FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.is_memory
          AND i.value -> 'source' ->> 'thread_id' IS NOT NULL
          AND EXISTS (
            SELECT 1 FROM langmem_links l
            JOIN langmem_items p ON p.user_id = %(user_id)s AND p.prefix = i.prefix
                                AND p.key = l.dst_key AND p.is_memory
                                AND p.value -> 'source' ->> 'thread_id'
                                    = i.value -> 'source' ->> 'thread_id'
            WHERE l.user_id = %(user_id)s AND l.src_key = i.key
              AND l.link_type = 'elaborates')
          AND NOT EXISTS (
            SELECT 1 FROM langmem_context_vectors v
            WHERE v.user_id = %(user_id)s AND v.prefix = i.prefix AND v.key = i.key
              AND v.model_id = %(model_id)s)
        ORDER BY i.created_at, i.key
        LIMIT %(limit)s""",
        {"user_id": user_id, "model_id": model_id, "limit": limit},
    )


def context_text(content: str, before: tuple[str, ...]) -> str:
    """What a context vector embeds: the earlier memories' texts (``before``, nearest
    first; each its last ``BEFORE_CHARS`` characters) in order, then the memory's."""
    return "\n".join([*(t[-BEFORE_CHARS:] for t in reversed(before)), content])


# -- handlers -----------------------------------------------------------------------------


def _context_before(ctx: Context, op: ContextBeforeOp) -> Handler:
    turns = min(op.turns, CONTEXT_TURNS_MAX)
    if ctx.embeddings is None or turns < 1:  # nothing would embed them
        return ()
    rows = yield Query(*context_before(op.user_id, ns_text(op.namespace), op.key,
                                       op.thread_id, turns), last=True)
    return tuple((r["key"], r["content"] or "") for r in rows)


def _drop_context_vectors(ctx: Context, op: DropContextVectorsOp) -> Handler:
    rows = yield Query(*drop_context_vectors(op.user_id, ns_text(op.namespace), op.key),
                       last=True)
    return tuple((r["key"], r["content"] or "", r["thread_id"]) for r in rows
                 if r["thread_id"])


def _put_context_vector(ctx: Context, op: PutContextVectorOp) -> Handler:
    if ctx.embeddings is None or not ctx.model_id or not ctx.dims or not op.before:
        return False
    before = op.before[:CONTEXT_TURNS_MAX]
    # No owner: not kept in the embedding cache (see the module's docstring).
    (vector,), _ = yield Embed(
        [context_text(op.content, tuple(text for _, text in before))], [], [None])
    rows = yield Query(*insert_context_vector(
        op.user_id, ns_text(op.namespace), op.key, tuple(k for k, _ in before), vector,
        model_id=ctx.model_id, dims=ctx.dims, now=op.now or ctx.now()), last=True)
    return bool(rows)


# -- ops ----------------------------------------------------------------------------------


@operation(_context_before, free=True)
class ContextBeforeOp(NamedTuple):
    """The memories before ``key`` in thread ``thread_id``, nearest first, at most
    ``turns`` (result: ``tuple[(key, content), ...]``; empty for a store without
    vectors)."""

    user_id: str
    namespace: tuple[str, ...]
    key: str
    thread_id: str
    turns: int = CONTEXT_TURNS_MAX


@operation(_put_context_vector)
class PutContextVectorOp(NamedTuple):
    """Embed memory ``key`` with the memories ``before`` it (``(key, content)`` pairs from
    ``ContextBeforeOp``) and keep the vector (result: whether it was kept)."""

    user_id: str
    namespace: tuple[str, ...]
    key: str
    content: str
    before: tuple[tuple[str, str], ...]
    now: datetime | None = None


@operation(_drop_context_vectors)
class DropContextVectorsOp(NamedTuple):
    """Delete the context vectors holding memory ``key``'s words, when its content
    changes (result: ``tuple[(key, content, thread_id), ...]`` of the memories whose
    vectors went, to be made again from what they are now)."""

    user_id: str
    namespace: tuple[str, ...]
    key: str
