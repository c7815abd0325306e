"""Handlers of LangGraph's ``BaseStore`` ops: get, put, search, list namespaces.

LangGraph's op classes cannot carry a registration (``store/ops/dispatch.py``), so
their handlers are methods of the store core, mixed into ``StoreCore``; like every
handler they are generators that yield requests and never do I/O themselves. The
public methods here are part of the ``Context`` the memory ops' handlers run in:
``write_items`` (items and their vectors, shared with the import of a user's memory),
and the lookup of a user's own ANN index and what this store remembers of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    GetOp,
    ListNamespacesOp,
    PutOp,
    SearchItem,
    SearchOp,
    get_text_at_path,
)
from pydantic import ValidationError

from langmem_layer.errors import InvalidMemoryError
from langmem_layer.sql import Sql
from langmem_layer.sql import generic_items as isql
from langmem_layer.sql import vector as vsql
from langmem_layer.sql.filters import compile_filter
from langmem_layer.store.ops.dispatch import Registry, handles
from langmem_layer.store.ops.items import GetManyOp, Write, row_to_item
from langmem_layer.store.ops.links import delete_links_of
from langmem_layer.store.options import (
    FieldPath,
    distance_type,
    field_path,
    omit_expired,
    vector_type,
)
from langmem_layer.store.plan import Embed, Handler, Query
from langmem_layer.store.tenancy import Tenancy, match_namespace, ns_text, ns_tuple
from langmem_layer.types import MEMORY_ROOT, Kind, MemoryRecord

__all__ = ["ItemHandlers", "listing_user"]

#: Users whose index lookup a store remembers (``ItemHandlers._index_dims``).
_INDEX_MEMO_USERS = 10_000


def _record_expiry(value: Mapping[str, Any]) -> datetime | None:
    raw = value.get("expires_at")
    return datetime.fromisoformat(raw) if isinstance(raw, str) else None


def _literal_prefix(op: ListNamespacesOp) -> tuple[str, ...]:
    """The longest literal head (up to a ``*``) of the listing's prefix conditions."""
    literal: tuple[str, ...] = ()
    for cond in op.match_conditions or ():
        if cond.match_type == "prefix":
            head = []
            for label in cond.path:
                if label == "*":
                    break
                head.append(label)
            if len(head) > len(literal):
                literal = tuple(head)
    return literal


def listing_user(op: ListNamespacesOp, tenant_roots: frozenset[str]) -> str | None:
    """The one user a namespace listing is confined to, or ``None`` (across tenants)."""
    literal = _literal_prefix(op)
    if literal and literal[0] in tenant_roots and len(literal) >= 2:
        return literal[1]
    if literal and literal[0] not in tenant_roots:
        return ""
    return None


class ItemHandlers(Registry, Tenancy):
    """Handlers of ``BaseStore`` ops; expects the index settings and ``now()`` of the core."""

    embeddings: Embeddings | None
    dims: int | None
    model_id: str | None
    _fields: list[FieldPath]
    now: Callable[[], datetime]
    index_config: Any
    ttl_config: Any
    #: Per user, the dims of their own HNSW index as this store last looked them up
    #: (``None``: no index), set up empty by the core. Only the shape of a recall
    #: depends on it, never what it finds (see ``store/ops/turn_reads.py``).
    _index_dims: dict[str, int | None]

    @property
    def omit_expired(self) -> bool:
        """Whether get, search and list_namespaces hide expired items not swept yet."""
        return omit_expired(self.ttl_config)

    @property
    def distance_type(self) -> str:
        """The distance ``search`` scores with: cosine, l2 or inner_product."""
        return distance_type(self.index_config)

    @property
    def vector_type(self) -> str:
        """The vector type of large users' HNSW indexes: vector or halfvec."""
        return vector_type(self.index_config)

    # -- values -----------------------------------------------------------------------

    def prepare_value(
        self, namespace: tuple[str, ...], value: Mapping[str, Any]
    ) -> tuple[dict[str, Any], bool, str | None]:
        """Validate a value; return (value to store, is typed memory, full-text source).

        A value put under ``("memories", user_id, scope)`` whose ``kind`` is a memory
        kind is a typed memory and must match ``MemoryRecord``; anything else is
        a generic item and is stored as given.
        """
        if not isinstance(value, Mapping):
            raise TypeError(f"Store values are dicts, got {type(value).__name__}.")
        value = dict(value)
        is_typed = (
            len(namespace) == 3
            and namespace[0] == MEMORY_ROOT
            and isinstance(value.get("kind"), str)
            and value["kind"] in Kind._value2member_map_
            and "content" in value
        )
        if is_typed:
            try:
                record = MemoryRecord.model_validate(value)
            except ValidationError as e:
                raise InvalidMemoryError(
                    f"Value for {namespace!r} has a memory kind but does not match the "
                    f"memory schema: {e}"
                ) from e
            return record.to_value(), True, record.content
        texts = [t for _, path in self._fields for t in get_text_at_path(value, path)]
        return value, False, (" ".join(texts) if texts else None)

    def _texts(
        self, value: dict[str, Any], is_memory: bool, index: Any
    ) -> list[tuple[str, str]]:
        if is_memory:
            return [("content", value["content"])]
        paths = self._fields if index is None else [field_path(f) for f in index]
        out: list[tuple[str, str]] = []
        for name, path in paths:
            texts = get_text_at_path(value, path)
            for j, text in enumerate(texts):
                out.append((f"{name}.{j}" if len(texts) > 1 else name, text))
        return out

    # -- writes -----------------------------------------------------------------------

    @handles(PutOp)
    def _put_one(self, op: PutOp) -> Handler:
        # A put inside another op (exactly-once apply); batches group theirs in _put.
        return (yield from self._put([op]))

    def _put(self, ops: list[PutOp], now: datetime | None = None) -> Handler:
        # The last put of a key wins, as in LangGraph's stores.
        last: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            last[(op.namespace, op.key)] = op
        writes = [Write(op.namespace, op.key, op.value, op.index, op.ttl) for op in last.values()]
        yield from self.write_items(writes, now or self.now(), last=True)
        return [None] * len(ops)

    def handler_at(self, op: Any, now: datetime | None) -> Handler:
        """``op``'s handler; a put inside a memory op writes its item as of ``now``.

        LangGraph's ``PutOp`` carries no time, so a put nested in an op that has one
        (an apply replayed with ``now=``) takes that op's: the lifecycle measures a
        memory's silence from ``updated_at``, which must be the flow's clock.
        """
        if now is not None and isinstance(op, PutOp):
            return self._put([op], now)
        return self._handler(op)

    def write_items(self, writes: list[Write], now: datetime, *, last: bool = False) -> Handler:
        """Upsert or delete items and replace their vectors: embeddings first, then SQL.

        ``last``: the caller returns after it, so its final statement is marked last.
        """
        deletes: dict[tuple[str, str], list[str]] = {}
        rows: list[dict[str, Any]] = []
        to_embed: list[tuple[str, str, str, str, str]] = []
        reindexed: list[tuple[str, str, str]] = []
        for w in writes:
            user, prefix = self.tenant(w.namespace), ns_text(w.namespace)
            if w.value is None:
                deletes.setdefault((user, prefix), []).append(w.key)
                continue
            value, is_memory, search_text = self.prepare_value(w.namespace, w.value)
            rows.append({
                "user_id": user,
                "prefix": prefix,
                "key": w.key,
                "value": value,
                "is_memory": is_memory,
                "search_text": search_text,
                "ttl_minutes": float(w.ttl) if w.ttl is not None else None,
                "created_at": w.created_at,
                "updated_at": w.updated_at,
                "expires_at": _record_expiry(value) if is_memory and w.ttl is None else None,
            })
            if self.embeddings is not None:
                reindexed.append((user, prefix, w.key))
                if w.index is not False:
                    for fname, text in self._texts(value, is_memory, w.index):
                        to_embed.append((user, prefix, w.key, fname, text))
        vectors: list[list[float]] = []
        if to_embed:
            # Owners key the embedding cache per user (a shared one would leak texts).
            vectors, _ = yield Embed([t[4] for t in to_embed], [], [t[0] for t in to_embed])
        statements: list[Query] = []
        for (user, prefix), keys in deletes.items():
            statements.append(Query(*isql.delete_items(user, prefix, keys)))
            if user:  # a deleted memory takes its links with it
                statements.append(Query(*delete_links_of(user, keys)))
        if rows:
            statements.append(Query(*isql.upsert_items(rows, now), parts=(
                (lambda: (isql.upsert_item_rows(rows, now),))
                if len(rows) <= isql.VALUES_ROWS else ())))
        if to_embed and self.model_id and self.dims:
            vector_rows = [(u, p, k, f, v)
                           for (u, p, k, f, _), v in zip(to_embed, vectors, strict=True)]
            statements.append(Query(*isql.replace_embeddings(
                reindexed, vector_rows, model_id=self.model_id, dims=self.dims, now=now)))
        elif reindexed and self.model_id:
            statements.append(Query(*isql.delete_embeddings(reindexed, self.model_id)))
        for n, statement in enumerate(statements, start=1):
            yield statement._replace(last=last and n == len(statements))

    # -- reads ------------------------------------------------------------------------

    @handles(GetOp)
    def _get(self, op: GetOp) -> Handler:
        found = yield from self._get_many(GetManyOp(op.namespace, (op.key,), op.refresh_ttl))
        return found.get(op.key)

    @handles(GetManyOp)
    def _get_many(self, op: GetManyOp) -> Handler:
        now = self.now()
        user, prefix = self.tenant(op.namespace), ns_text(op.namespace)
        rows = yield Query(*isql.get_items(user, prefix, list(op.keys), now,
                                           omit_expired=self.omit_expired,
                                           refresh_ttl=op.refresh_ttl), last=True)
        return {r["key"]: row_to_item(r) for r in rows}

    @handles(SearchOp)
    def _search(self, op: SearchOp) -> Handler:
        now = self.now()
        user = self.tenant(op.namespace_prefix, prefix=True)
        filter_sql = compile_filter(op.filter, column=isql.VALUE)
        qvec = None
        dims = None
        distance = self.distance_type
        if op.query and self.embeddings is not None:
            _, (qvec,) = yield Embed([], [op.query])
            if distance == "cosine":  # large users' HNSW indexes are cosine; else exact
                dims = yield from self.ann_dims(user)
        rows = yield Query(
            *isql.search_items(
                user,
                ns_text(op.namespace_prefix),
                filter_sql=filter_sql,
                limit=op.limit,
                offset=op.offset,
                now=now,
                query_vector=qvec,
                model_id=self.model_id,
                indexed_dims=dims,
                distance=distance,
                omit_expired=self.omit_expired,
                vector_type=self.vector_type,
                refresh_ttl=op.refresh_ttl,
            ),
            last=True,
        )
        return [
            SearchItem(
                namespace=ns_tuple(r["prefix"]),
                key=r["key"],
                value=r["value"],
                created_at=r["created_at"],
                updated_at=r["updated_at"],
                score=r["score"],
            )
            for r in rows
        ]

    def ann_dims(self, user: str, *, ef_search: int = vsql.ANN_EF_SEARCH) -> Handler:
        """Dims of the user's own HNSW index; None means search exactly."""
        rows = yield Query(*self.ann_lookup(user, ef_search), sets=True)
        self.index_seen(user, rows[0]["dims"])
        return rows[0]["dims"]

    def ann_lookup(self, user: str, ef_search: int) -> Sql:
        """The statement ``ann_dims`` sends: the index's dims, and the settings of
        the walk that follows."""
        return vsql.prepare_search(user, self.model_id or "", ef_search=ef_search,
                                   vector_type=self.vector_type)

    def remembered_index(self, user_id: str) -> tuple[bool, int | None]:
        """Whether this store looked the user's own ANN index up before, and the dims it
        found then (None: no index)."""
        return user_id in self._index_dims, self._index_dims.get(user_id)

    def forget_index(self, user_id: str) -> None:
        """Forget what this store looked up of the user's own ANN index (it was dropped)."""
        self._index_dims.pop(user_id, None)

    def index_seen(self, user: str, dims: int | None) -> None:
        """Remember what a lookup found for ``user`` (bounded: a full memo starts over)."""
        if len(self._index_dims) >= _INDEX_MEMO_USERS and user not in self._index_dims:
            self._index_dims.clear()
        self._index_dims[user] = dims

    @handles(ListNamespacesOp)
    def _list_namespaces(self, op: ListNamespacesOp) -> Handler:
        conditions = list(op.match_conditions or ())
        literal = _literal_prefix(op)
        user = listing_user(op, self.tenant_roots)
        rows = yield Query(*isql.list_prefixes(user, ns_text(literal), self.now(),
                                               omit_expired=self.omit_expired), last=True)
        found: set[tuple[str, ...]] = set()
        for r in rows:
            ns = ns_tuple(r["prefix"])
            if all(match_namespace(c.path, ns, c.match_type == "suffix") for c in conditions):
                found.add(ns[: op.max_depth] if op.max_depth is not None else ns)
        return sorted(found)[op.offset : op.offset + op.limit]
