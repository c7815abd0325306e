"""The store's logic, free of I/O: configuration, tenancy, and one handler per op.

Handlers are generators stepped by a :class:`~langmem_layer.store.plan.Plan`; the sync
and async stores only execute the requests they yield.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, TypedDict, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)
from langgraph.store.base import InvalidNamespaceError as _LGInvalidNamespace
from pydantic import ValidationError

from langmem_layer.errors import (
    ConfigurationError,
    InvalidMemoryError,
    InvalidNamespaceError,
)
from langmem_layer.sql import cache as csql
from langmem_layer.sql import items as isql
from langmem_layer.sql import memory as msql
from langmem_layer.sql import recall as rsql
from langmem_layer.sql import vector as vsql
from langmem_layer.sql.filters import compile_filter
from langmem_layer.sql.migrations import MIGRATIONS, VERSION_TABLE
from langmem_layer.store import ops as mops
from langmem_layer.store.embedding import CACHE_TTL, RETRY_BASE_DELAY, default_max_input_tokens
from langmem_layer.store.plan import Embed, Handler, Plan, Query, Step
from langmem_layer.store.queue_handlers import QueueHandlers
from langmem_layer.store.working_handlers import WorkingHandlers
from langmem_layer.types import MEMORY_ROOT, Kind, MemoryRecord

__all__ = ["MemoryIndexConfig", "StoreCore"]


class MemoryIndexConfig(TypedDict, total=False):
    """How the store embeds items.

    Attributes:
        embed: A LangChain ``Embeddings``, an embedding function, or a provider string
            such as ``"openai:text-embedding-3-small"``.
        dims: Vector size the model returns; checked on every call.
        fields: JSON paths of generic items to embed (default ``["$"]``, the whole
            value). Typed memories always embed their ``content``.
        model_id: Name recorded with each vector (defaults to the model's name).
        max_input_tokens: Texts are cut to this many tokens (cl100k_base) before
            embedding. Defaults to 8191 for OpenAI ``text-embedding-*`` models, 256 for
            all-MiniLM-L6-v2, no limit otherwise; ``None`` disables truncation.
    """

    embed: Embeddings | Callable[..., Any] | str
    dims: int
    fields: list[str]
    model_id: str
    max_input_tokens: int | None


class _Write(NamedTuple):
    """One item to upsert (``value``) or delete (``value is None``)."""

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    index: Any = None
    ttl: float | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


def _record_expiry(value: Mapping[str, Any]) -> datetime | None:
    raw = value.get("expires_at")
    return datetime.fromisoformat(raw) if isinstance(raw, str) else None


def _ns_text(namespace: tuple[str, ...]) -> str:
    return ".".join(namespace)


def _ns_tuple(prefix: str) -> tuple[str, ...]:
    return tuple(prefix.split("."))


def _model_name(embed: Any) -> str:
    for attr in ("model", "model_name", "model_id"):
        name = getattr(embed, attr, None)
        if isinstance(name, str) and name:
            return name
    return type(embed).__name__


def _path(field_path: str) -> tuple[str, list[str] | str]:
    # "$" (the whole value) must stay a string: tokenized, it matches nothing.
    return field_path, field_path if field_path == "$" else tokenize_path(field_path)


def _row_to_item(row: dict[str, Any]) -> Item:
    return Item(
        namespace=_ns_tuple(row["prefix"]),
        key=row["key"],
        value=row["value"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def _match(path: tuple[str, ...], namespace: tuple[str, ...], suffix: bool) -> bool:
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(reversed(namespace), reversed(path), strict=False)
        if suffix
        else zip(namespace, path, strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


#: Users with at least this many vectors of the store's model get their own HNSW index
#: (benchmarks/vector_bench.py: exact search costs ~10 ms p50 at 5k vectors, an index
#: ~2 ms at any size). Not lower: every partial index adds to the planning of
#: statements on the embeddings table, so indexes are kept for the few large users.
ANN_MIN_USER_VECTORS = 5_000


class StoreCore(QueueHandlers, WorkingHandlers):
    """Configuration and operation handlers shared by the sync and async stores.

    Args:
        conn: The connection or pool the executing subclass uses.
        index: Embedding configuration, ``"default"`` for the default model
            (:func:`langmem_layer.embeddings.default_index`), or ``None`` for no vectors.
        ttl: LangGraph ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``).
        tenant_roots: First namespace labels whose second label is the user id.
            Items elsewhere belong to the shared tenant ``""``.
        clock: Returns "now"; tests move time by passing their own.
        embedding_batch_size: Texts per embedding call (R3.5: 100).
        embedding_retry_delay: Seconds to wait before retrying a failed embedding
            call; doubled before the last attempt (R3.5: 3 attempts in all).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        conn: Any,
        *,
        index: MemoryIndexConfig | Literal["default"] | None = "default",
        ttl: dict[str, Any] | None = None,
        tenant_roots: Iterable[str] = (MEMORY_ROOT,),
        clock: Callable[[], datetime] | None = None,
        embedding_batch_size: int = 100,
        embedding_retry_delay: float = RETRY_BASE_DELAY,
    ) -> None:
        if index == "default":
            from langmem_layer.embeddings import default_index

            index = default_index()
        self.conn = conn
        self.embedding_batch_size = embedding_batch_size
        self.embedding_retry_delay = embedding_retry_delay
        self.tenant_roots = frozenset(tenant_roots)
        self.ttl_config = cast(Any, ttl)
        self._clock = clock or (lambda: datetime.now(UTC))
        self.index_config = index
        self.embeddings: Embeddings | None = None
        self.dims: int | None = None
        self.model_id: str | None = None
        self.max_input_tokens: int | None = None
        self._fields: list[tuple[str, list[str] | str]] = []
        if index:
            self.embeddings = ensure_embeddings(index["embed"])
            self.dims = index.get("dims")
            raw = index["embed"]
            self.model_id = index.get("model_id") or (
                raw if isinstance(raw, str) else _model_name(raw)
            )
            self._fields = [_path(f) for f in index.get("fields") or ["$"]]
            self.max_input_tokens = (
                index["max_input_tokens"] if "max_input_tokens" in index
                else default_max_input_tokens(self.model_id)
            )

    # -- planning ---------------------------------------------------------------------

    def now(self) -> datetime:
        """The store's current time."""
        return self._clock()

    def plan(self, ops: Iterable[Op | Any]) -> Plan:
        """Turn a batch of ops into a :class:`Plan`. Consecutive puts share one handler."""
        steps: list[Step] = []
        run: list[tuple[int, PutOp]] = []

        def flush() -> None:
            if run:
                idx = [i for i, _ in run]
                steps.append(Step(idx, self._put([op for _, op in run]), multi=True))
                run.clear()

        size = 0
        for i, op in enumerate(ops):
            size += 1
            self._validate(op)
            if isinstance(op, PutOp):
                run.append((i, op))
                continue
            flush()
            steps.append(Step([i], self._handler(op)))
        flush()
        return Plan(steps, size, self.dims, self.model_id, now=self.now(),
                    max_input_tokens=self.max_input_tokens)

    def setup_plan(self) -> Plan:
        """The plan that applies pending migrations (see :meth:`setup`)."""
        return Plan([Step([0], self._setup())], 1, None, None)

    def _validate(self, op: Any) -> None:
        try:
            validate_op_namespace(op)
        except _LGInvalidNamespace as e:
            raise InvalidNamespaceError(str(e)) from e
        if isinstance(op, PutOp):
            if not op.namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if op.namespace[0] == "langgraph":
                raise InvalidNamespaceError(
                    f'Root label for namespace cannot be "langgraph". Got: {op.namespace}'
                )

    def tenant(self, namespace: tuple[str, ...], *, prefix: bool = False) -> str:
        """The user a namespace belongs to; ``""`` outside the tenant roots."""
        if namespace and namespace[0] in self.tenant_roots:
            if len(namespace) < 2 or namespace[1] == "*":
                what = "search" if prefix else "store items"
                raise InvalidNamespaceError(
                    f"Namespace {namespace!r} is under {namespace[0]!r} but names no user: "
                    f"{what} under ({namespace[0]!r}, user_id, ...) so one user's data "
                    "never mixes with another's."
                )
            return namespace[1]
        return ""

    def _handler(self, op: Any) -> Handler:
        handlers: dict[type, Callable[[Any], Handler]] = {
            GetOp: self._get,
            SearchOp: self._search,
            ListNamespacesOp: self._list_namespaces,
            mops.RecallOp: self._recall,
            mops.TouchOp: self._touch,
            mops.SetStatusOp: self._set_status,
            mops.FindMemoryOp: self._find,
            mops.ThreadTailOp: self._thread_tail,
            mops.DeleteMemoryOp: self._delete_memory,
            mops.LinkOp: self._link,
            mops.LinksOp: self._links,
            mops.ExportOp: self._export,
            mops.ImportOp: self._import,
            mops.SweepExpiredOp: self._sweep,
            mops.LargeUsersOp: self._large_users,
            mops.IndexUserOp: self._index_user,
            mops.PurgeEmbeddingCacheOp: lambda op: self._purge_cache(op.now or self.now()),
            **self.queue_handlers(),
            **self.working_handlers(),
        }
        handler = handlers.get(type(op))
        if handler is None:
            raise TypeError(f"Unsupported operation: {type(op).__name__}")
        return handler(op)

    # -- values -----------------------------------------------------------------------

    def prepare_value(
        self, namespace: tuple[str, ...], value: Mapping[str, Any]
    ) -> tuple[dict[str, Any], bool, str | None]:
        """Validate a value; return (value to store, is typed memory, full-text source).

        A value put under ``("memories", user_id, scope)`` whose ``kind`` is a memory
        kind is a typed memory and must match :class:`MemoryRecord`; anything else is
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
        paths = self._fields if index is None else [_path(f) for f in index]
        out: list[tuple[str, str]] = []
        for name, path in paths:
            texts = get_text_at_path(value, path)
            for j, text in enumerate(texts):
                out.append((f"{name}.{j}" if len(texts) > 1 else name, text))
        return out

    # -- BaseStore operations ---------------------------------------------------------

    def _put(self, ops: list[PutOp]) -> Handler:
        # The last put of a key wins, as in LangGraph's stores.
        last: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            last[(op.namespace, op.key)] = op
        writes = [_Write(op.namespace, op.key, op.value, op.index, op.ttl) for op in last.values()]
        yield from self._write(writes, self.now())
        return [None] * len(ops)

    def _write(self, writes: list[_Write], now: datetime) -> Handler:
        """Upsert or delete items and replace their vectors: embeddings first, then SQL."""
        deletes: dict[tuple[str, str], list[str]] = {}
        rows: list[dict[str, Any]] = []
        to_embed: list[tuple[str, str, str, str, str]] = []
        reindexed: list[tuple[str, str, str]] = []
        for w in writes:
            user, prefix = self.tenant(w.namespace), _ns_text(w.namespace)
            if w.value is None:
                deletes.setdefault((user, prefix), []).append(w.key)
                continue
            value, is_memory, search_text = self.prepare_value(w.namespace, w.value)
            rows.append({
                "user_id": user,
                "prefix": prefix,
                "key": w.key,
                "value": json.dumps(value),
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
        for (user, prefix), keys in deletes.items():
            yield Query(*isql.delete_items(user, prefix, keys))
            if user:  # a deleted memory takes its links with it
                yield Query(*msql.delete_links_of(user, keys))
        if rows:
            yield Query(*isql.upsert_items(rows, now))
        if reindexed and self.model_id:
            yield Query(*isql.delete_embeddings(reindexed, self.model_id))
        if to_embed and self.model_id and self.dims:
            yield self._insert_vectors(to_embed, vectors, now)

    def _insert_vectors(self, to_embed: list[tuple[str, str, str, str, str]],
                        vectors: list[list[float]], now: datetime) -> Query:
        rows = [(u, p, k, f, v) for (u, p, k, f, _), v in zip(to_embed, vectors, strict=True)]
        return Query(*isql.insert_embeddings(
            rows, model_id=self.model_id or "", dims=self.dims or 0, now=now))

    def _get(self, op: GetOp) -> Handler:
        now = self.now()
        user, prefix = self.tenant(op.namespace), _ns_text(op.namespace)
        rows = yield Query(*isql.get_items(user, prefix, [op.key], now))
        if not rows:
            return None
        if op.refresh_ttl:
            yield Query(*isql.refresh_ttl(user, [(prefix, op.key)], now))
        return _row_to_item(rows[0])

    def _search(self, op: SearchOp) -> Handler:
        now = self.now()
        user = self.tenant(op.namespace_prefix, prefix=True)
        filter_sql = compile_filter(op.filter, column=isql.VALUE)
        qvec = None
        dims = None
        if op.query and self.embeddings is not None:
            _, (qvec,) = yield Embed([], [op.query])
            dims = yield from self._ann_dims(user)
        rows = yield Query(
            *isql.search_items(
                user,
                _ns_text(op.namespace_prefix),
                filter_sql=filter_sql,
                limit=op.limit,
                offset=op.offset,
                now=now,
                query_vector=qvec,
                model_id=self.model_id,
                indexed_dims=dims,
            )
        )
        expiring = [(r["prefix"], r["key"]) for r in rows if r["ttl_minutes"] is not None]
        if expiring and op.refresh_ttl:
            yield Query(*isql.refresh_ttl(user, expiring, now))
        return [
            SearchItem(
                namespace=_ns_tuple(r["prefix"]),
                key=r["key"],
                value=r["value"],
                created_at=r["created_at"],
                updated_at=r["updated_at"],
                score=r["score"],
            )
            for r in rows
        ]

    def _ann_dims(self, user: str, *, ef_search: int = vsql.ANN_EF_SEARCH) -> Handler:
        """Dims of the user's own HNSW index; None means search exactly."""
        rows = yield Query(*vsql.prepare_search(user, self.model_id or "", ef_search=ef_search))
        return rows[0]["dims"]

    def _large_users(self, op: mops.LargeUsersOp) -> Handler:
        rows = yield Query(*vsql.large_users(self.model_id or "", op.threshold))
        return [(r["user_id"], r["vectors"]) for r in rows]

    def _index_user(self, op: mops.IndexUserOp) -> Handler:
        if not self.model_id or not self.dims:
            raise ConfigurationError("index_user needs a store with an embedding index")
        yield Query(*vsql.create_user_index(op.user_id, self.model_id, self.dims))
        yield Query(*vsql.create_user_keyword_index(op.user_id, self.model_id))
        yield Query(*vsql.record_user_index(op.user_id, self.model_id, self.dims,
                                            op.now or self.now()))

    def _list_namespaces(self, op: ListNamespacesOp) -> Handler:
        conditions = list(op.match_conditions or ())
        literal: tuple[str, ...] = ()
        for cond in conditions:
            if cond.match_type == "prefix":
                head = []
                for label in cond.path:
                    if label == "*":
                        break
                    head.append(label)
                if len(head) > len(literal):
                    literal = tuple(head)
        user: str | None = None
        if literal and literal[0] in self.tenant_roots and len(literal) >= 2:
            user = literal[1]
        elif literal and literal[0] not in self.tenant_roots:
            user = ""
        rows = yield Query(*isql.list_prefixes(user, _ns_text(literal), self.now()))
        found: set[tuple[str, ...]] = set()
        for r in rows:
            ns = _ns_tuple(r["prefix"])
            if all(_match(c.path, ns, c.match_type == "suffix") for c in conditions):
                found.add(ns[: op.max_depth] if op.max_depth is not None else ns)
        return sorted(found)[op.offset : op.offset + op.limit]

    # -- memory operations ------------------------------------------------------------

    def _recall(self, op: mops.RecallOp) -> Handler:
        now = op.now or self.now()
        qvec = None
        dims = None
        if op.query and self.embeddings is not None:
            _, (qvec,) = yield Embed([], [op.query])
            dims = yield from self._ann_dims(op.user_id,
                                             ef_search=rsql.ann_depth(op.per_source))
        prefixes = [_ns_text((MEMORY_ROOT, op.user_id, s)) for s in op.scopes]
        rows = yield Query(
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
            )
        )
        names = {s.column: s.name for s in rsql.RECALL_SOURCES}
        return [
            mops.Candidate(
                namespace=_ns_tuple(r["prefix"]),
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
            )
            for r in rows
        ]

    def _touch(self, op: mops.TouchOp) -> Handler:
        if op.keys:
            yield Query(*msql.touch(op.user_id, op.keys, op.now or self.now()))

    def _set_status(self, op: mops.SetStatusOp) -> Handler:
        if not op.keys:
            return []
        rows = yield Query(*msql.set_status(op.user_id, op.keys, op.status, op.now or self.now()))
        return [r["key"] for r in rows]

    def _find(self, op: mops.FindMemoryOp) -> Handler:
        rows = yield Query(*msql.find_memory(op.user_id, op.key))
        return _row_to_item(rows[0]) if rows else None

    def _thread_tail(self, op: mops.ThreadTailOp) -> Handler:
        rows = yield Query(*msql.thread_tail(op.user_id, op.thread_id))
        return rows[0]["key"] if rows else None

    def _delete_memory(self, op: mops.DeleteMemoryOp) -> Handler:
        deleted: list[dict[str, Any]] = []
        for sql, params in msql.delete_memory(op.user_id, op.key):
            deleted = yield Query(sql, params)
        return bool(deleted)

    def _link(self, op: mops.LinkOp) -> Handler:
        meta = json.dumps(op.metadata or {})
        yield Query(
            *msql.insert_link(
                op.user_id, op.src_key, op.link_type, op.dst_key, op.now or self.now(), meta
            )
        )

    def _links(self, op: mops.LinksOp) -> Handler:
        rows = yield Query(*msql.links_of(op.user_id, op.keys))
        return [mops.Link(**r) for r in rows]

    def _export(self, op: mops.ExportOp) -> Handler:
        rows = yield Query(*msql.user_items(op.user_id))
        links = yield Query(*msql.user_links(op.user_id))
        items = [
            mops.ExportedItem(
                namespace=_ns_tuple(r["prefix"]),
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

    def _import(self, op: mops.ImportOp) -> Handler:
        for item in op.data.items:
            if self.tenant(item.namespace) != op.user_id:
                raise InvalidNamespaceError(
                    f"Item {item.namespace!r}/{item.key} does not belong to user {op.user_id!r}."
                )
        yield from self._write(
            [
                _Write(i.namespace, i.key, i.value, None, i.ttl_minutes, i.created_at,
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

    def _sweep(self, op: mops.SweepExpiredOp) -> Handler:
        now = op.now or self.now()
        users = yield Query(*isql.expired_users(now))
        total = 0
        for row in users:
            deleted = yield Query(*isql.sweep_expired(row["user_id"], now))
            memories = [r["key"] for r in deleted if r["is_memory"]]
            if memories:
                yield Query(*msql.delete_links_of(row["user_id"], memories))
            total += len(deleted)
        return total

    def _purge_cache(self, now: datetime) -> Handler:
        before = now - CACHE_TTL
        users = yield Query(*csql.stale_cache_users(before))
        total = 0
        for row in users:
            deleted = yield Query(*csql.purge_embedding_cache_sql(row["user_id"], before))
            total += int(deleted[0]["deleted"])
        return total

    def _setup(self) -> Handler:
        yield Query(MIGRATIONS[0], None)
        yield Query("SELECT pg_advisory_xact_lock(hashtext('langmem_layer.setup'))", None)
        rows = yield Query(f"SELECT v FROM {VERSION_TABLE}", None)
        done = {r["v"] for r in rows}
        applied = []
        for version, ddl in enumerate(MIGRATIONS):
            if version in done:
                continue
            yield Query(ddl, None)
            yield Query(
                f"INSERT INTO {VERSION_TABLE} (v) VALUES (%s) ON CONFLICT DO NOTHING", [version]
            )
            applied.append(version)
        return applied
