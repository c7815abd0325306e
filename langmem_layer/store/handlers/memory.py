"""Handlers of the memory ops: recall, reinforcement, status, links, export and import.

Mixed into ``StoreCore``; like every handler they are
generators that yield requests and never do I/O themselves.
"""

from __future__ import annotations

import json

from langgraph.store.base import PutOp

from langmem_layer.errors import InvalidNamespaceError
from langmem_layer.sanitize import clean
from langmem_layer.sql import memory as msql
from langmem_layer.sql import recall as rsql
from langmem_layer.sql import summaries as ssql
from langmem_layer.sql import users as usql
from langmem_layer.store import ops as mops
from langmem_layer.store.handlers.items import ItemHandlers, Write, row_to_item
from langmem_layer.store.handlers.registry import handles
from langmem_layer.store.ops.trust import learned_trust
from langmem_layer.store.plan import Embed, Handler, Query, combine
from langmem_layer.store.tenancy import ns_text, ns_tuple
from langmem_layer.types import MEMORY_ROOT, content_hash

__all__ = ["MemoryHandlers"]


class MemoryHandlers(ItemHandlers):
    """Handlers of the typed-memory ops of ``langmem_layer.store.ops``."""

    @handles(mops.RecallOp)
    def _recall(self, op: mops.RecallOp) -> Handler:
        now = op.now or self.now()
        # PostgreSQL text cannot hold U+0000: a NUL in the message must not fail the turn.
        op = op._replace(query=clean(op.query)) if op.query else op
        qvec = None
        dims = None
        lookup = None
        if op.query and self.embeddings is not None:
            _, (qvec,) = yield Embed([], [clean(op.embed_text) if op.embed_text else op.query])
            ef = rsql.ann_depth(op.per_source)
            if op.user_id in self._index_dims:
                # A user looked up before: the lookup rides with the recall, one round
                # trip instead of two, and the recall takes the shape the last lookup
                # found. Stale (another process built or dropped the index since), that
                # shape searches exactly, only slower; this lookup corrects the next.
                dims, lookup = self._index_dims[op.user_id], self._ann_lookup(op.user_id, ef)
            else:
                dims = yield from self._ann_dims(op.user_id, ef_search=ef)
        prefixes = [ns_text((MEMORY_ROOT, op.user_id, s)) for s in op.scopes]
        reply = yield Query(
            *rsql.recall_candidates(
                op.user_id,
                prefixes,
                now=now,
                statuses=op.statuses,
                query_text=op.query,
                query_vector=qvec,
                model_id=self.model_id,
                refs=op.refs,
                per_source=op.per_source,
                keyword=op.keyword,
                window=op.window,
                link_types=op.link_types,
                link_seeds=op.link_seeds,
                seed_min_similarity=op.seed_min_similarity,
                open_questions=op.open_questions,
                ref_max_share=op.ref_max_share,
                indexed_dims=dims,
                due_window=op.due_window,
                due_limit=op.due_limit,
                standing_limit=op.standing,
                max_terms=op.max_terms,
                vector_type=self.vector_type,
            ),
            last=True,
            # planned for its values, recall costs more to plan than to run
            prepare=True,
            pre=lookup,
        )
        if lookup is None:
            rows = reply
        else:
            found, rows = reply
            self._index_seen(op.user_id, found[0]["dims"])
        names = {s.column: s.name for s in rsql.RECALL_SOURCES}
        return [
            mops.Candidate(
                namespace=ns_tuple(r["prefix"]),
                key=r["key"],
                value=r["value"],
                created_at=r["created_at"],
                updated_at=r["updated_at"],
                similarity=r["similarity"],
                ranks={
                    name: int(r[f"{col}_rank"])
                    for col, name in names.items()
                    if r[f"{col}_rank"] is not None
                },
                linked=None if r["linked"] is None else tuple(r["linked"]),
            )
            for r in rows
        ]

    @handles(mops.TouchOp)
    def _touch(self, op: mops.TouchOp) -> Handler:
        if op.keys:
            yield Query(*msql.touch(op.user_id, op.keys, op.now or self.now()), last=True)

    @handles(mops.ReinforceOp)
    def _reinforce(self, op: mops.ReinforceOp) -> Handler:
        if not op.keys:
            return []
        rows = yield Query(*msql.reinforce(op.user_id, op.keys, op.now, op.confidence_step),
                           last=True)
        return [r["key"] for r in rows]

    @handles(mops.LockUserWritesOp)
    def _lock_user_writes(self, op: mops.LockUserWritesOp) -> Handler:
        yield Query(*msql.lock_user_writes(op.user_id, op.thread_id))

    @handles(mops.AddMemoryOp)
    def _add_memory(self, op: mops.AddMemoryOp) -> Handler:
        if self.tenant(op.put.namespace) != op.user_id:
            raise InvalidNamespaceError(
                f"Namespace {op.put.namespace!r} does not belong to user {op.user_id!r}.")
        now = op.now or self.now()
        value = op.put.value
        digest = value.get("content_hash") or content_hash(value["content"])
        found: list[dict[str, object]] = []

        def absent(rows: list[dict[str, object]]) -> bool:
            found.extend(rows)
            return not rows

        check = Query(*msql.find_identical(op.user_id, ns_text(op.put.namespace), digest, now))
        handlers = [self.handler_at(o, now) for o in (op.put, *op.then)]
        yield from combine(handlers, gate=check, proceed=absent)
        if found:
            key = str(found[0]["key"])
            yield Query(*msql.reinforce(op.user_id, [key], now, op.confidence_step))
            return mops.AddOutcome(key, created=False)
        return mops.AddOutcome(op.put.key, created=True)

    @handles(mops.AsOfOp)
    def _as_of(self, op: mops.AsOfOp) -> Handler:
        for o in op.ops:  # one user's writes, as every op
            owner = (self.tenant(o.namespace) if isinstance(o, PutOp)
                     else getattr(o, "user_id", None))
            if owner != op.user_id:
                raise InvalidNamespaceError(
                    f"{type(o).__name__} inside AsOfOp does not belong to user "
                    f"{op.user_id!r}.")
        return (yield from combine([self.handler_at(o, op.now) for o in op.ops]))

    @handles(mops.SummaryCandidatesOp)
    def _summary_candidates(self, op: mops.SummaryCandidatesOp) -> Handler:
        if self.tenant(op.namespace) != op.user_id:
            raise InvalidNamespaceError(
                f"Namespace {op.namespace!r} does not belong to user {op.user_id!r}.")
        rows = yield Query(*ssql.candidates(
            op.user_id, ns_text(op.namespace), start=op.start, end=op.end,
            now=op.now or self.now(), limit=op.limit))
        return [row_to_item(r) for r in rows]

    @handles(mops.TurnReadsOp)
    def _turn_reads(self, op: mops.TurnReadsOp) -> Handler:
        s = op.summaries
        if s.user_id != op.user_id or self.tenant(s.namespace) != op.user_id:
            raise InvalidNamespaceError(
                f"Namespace {s.namespace!r} does not belong to user {op.user_id!r}.")
        rows = yield Query(*ssql.with_trust(
            op.user_id, ns_text(s.namespace), start=s.start, end=s.end,
            now=s.now or self.now(), limit=s.limit), last=True)
        return mops.TurnReads(learned_trust(rows[0]["trust"] if rows else []),
                              [row_to_item(r) for r in rows if r["key"] is not None])

    @handles(mops.LinkThreadTailOp)
    def _link_thread_tail(self, op: mops.LinkThreadTailOp) -> Handler:
        if not op.locked:
            yield Query(*msql.lock_thread(op.user_id, op.thread_id))
        rows = yield Query(*msql.link_thread_tail(op.user_id, op.key, op.thread_id,
                                                  op.now or self.now()))
        return rows[0]["dst_key"] if rows else None

    @handles(mops.SetStatusOp)
    def _set_status(self, op: mops.SetStatusOp) -> Handler:
        if not op.keys:
            return []
        rows = yield Query(*msql.set_status(op.user_id, op.keys, op.status, op.now or self.now(),
                                            reason=op.reason, close_loop=op.close_loop))
        return [r["key"] for r in rows]

    @handles(mops.FindMemoryOp)
    def _find(self, op: mops.FindMemoryOp) -> Handler:
        rows = yield Query(*msql.find_memory(op.user_id, op.key))
        return row_to_item(rows[0]) if rows else None

    @handles(mops.DeleteMemoryOp)
    def _delete_memory(self, op: mops.DeleteMemoryOp) -> Handler:
        deleted: list[dict[str, object]] = []
        for sql, params in [*usql.forget_memory_traces(op.user_id, op.key),
                            *msql.delete_memory(op.user_id, op.key)]:
            deleted = yield Query(sql, params)
        return bool(deleted)

    @handles(mops.LinkOp)
    def _link(self, op: mops.LinkOp) -> Handler:
        meta = json.dumps(op.metadata or {})
        yield Query(
            *msql.insert_link(
                op.user_id, op.src_key, op.link_type, op.dst_key, op.now or self.now(), meta
            )
        )

    @handles(mops.LinkManyOp)
    def _link_many(self, op: mops.LinkManyOp) -> Handler:
        if op.links:
            yield Query(*msql.insert_links(op.user_id, op.links, op.now or self.now()))

    @handles(mops.LinksOp)
    def _links(self, op: mops.LinksOp) -> Handler:
        rows = yield Query(*msql.links_of(op.user_id, op.keys))
        return [mops.Link(**r) for r in rows]

    @handles(mops.ExportOp)
    def _export(self, op: mops.ExportOp) -> Handler:
        rows = yield Query(*msql.user_items(op.user_id))
        links = yield Query(*msql.user_links(op.user_id))
        items = [
            mops.ExportedItem(
                namespace=ns_tuple(r["prefix"]),
                key=r["key"],
                value=r["value"],
                is_memory=r["is_memory"],
                created_at=r["created_at"],
                updated_at=r["updated_at"],
                ttl_minutes=r["ttl_minutes"],
            )
            for r in rows
        ]
        return mops.UserExport(op.user_id, items, [mops.Link(**r) for r in links])

    @handles(mops.ImportOp)
    def _import(self, op: mops.ImportOp) -> Handler:
        for item in op.data.items:
            if self.tenant(item.namespace) != op.user_id:
                raise InvalidNamespaceError(
                    f"Item {item.namespace!r}/{item.key} does not belong to user {op.user_id!r}."
                )
        yield from self._write(
            [
                Write(i.namespace, i.key, i.value, None, i.ttl_minutes, i.created_at,
                      i.updated_at)
                for i in op.data.items
            ],
            self.now(),
        )
        for link in op.data.links:
            yield Query(
                *msql.insert_link(
                    op.user_id, link.src_key, link.link_type, link.dst_key, link.created_at,
                    json.dumps(link.metadata),
                )
            )
        return len(op.data.items)
