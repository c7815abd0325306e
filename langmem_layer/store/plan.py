"""A batch's execution plan: handler generators stepped together, free of I/O.

Every operation is handled by a generator that first yields at most one
:class:`Embed` request, then :class:`Query` requests, and finally returns the
operation's result. A :class:`Plan` steps all generators of a batch together so that
all texts of the batch are embedded in as few calls as possible, outside the database
transaction, and then runs the queries in order inside one transaction. The execution
job of :mod:`langmem_layer.store.driver` (one for both stores) asks for, in this order:

1. :meth:`Plan.cache_lookup` (if not ``None``), its rows to :meth:`Plan.deliver_cache`;
2. :meth:`Plan.embedding_work`: the texts the cache did not have, embedded in calls of
   at most ``embedding_batch_size`` documents, each call under a
   :class:`~langmem_layer.store.embedding.work.Retry`; then :meth:`Plan.deliver_embeddings`
   (always, even with nothing to embed: cache hits are delivered there too);
3. :meth:`Plan.next_round` / :meth:`Plan.deliver_round` in one transaction; the first
   round stores the new cache entries.

A round is the statements the store sends together, in one round trip: the next
statement, and after it the pending statements of the steps that follow when they are
all *free* (their ops neither depend on nor affect the other ops of the batch, e.g.
the reads of a turn) and bound alike. A round holds at most one statement of each op
type: a step's statements may set transaction settings its own later statement relies
on (recall's HNSW depth), which a second step of its type would overwrite. A plan that
is not :attr:`~Plan.pipelined` runs a statement a round.

A plan is stepped once: its handlers consume the rows they are given. A transaction
that has to be run again is run from a new plan of the same ops.

Truncation, deduplication and the cache are in :mod:`langmem_layer.store.embedding.work`.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.store.embedding.work import EmbeddingWork

__all__ = ["MAINTENANCE", "Binding", "Embed", "Handler", "Plan", "Query", "Step"]


class Embed(NamedTuple):
    """Request: embed ``documents`` (with embed_documents) and ``queries`` (embed_query).

    The reply is ``(document_vectors, query_vectors)`` in the same order. ``owners``,
    parallel to ``documents``, names the user each document belongs to, whose cache
    its vector is kept in; empty (or ``None`` for a document) means not cached.
    """

    documents: list[str]
    queries: list[str]
    owners: Sequence[str | None] = ()


class Binding(NamedTuple):
    """Whom a statement acts for under row-level security (see :mod:`langmem_layer.sql.rls`).

    ``user`` is the user bound to the statement's transaction, ``None`` for the
    maintenance bypass (statements listing users, schema migrations). ``owner``: the
    statement runs as the session's own role, not the store's app role (DDL: a user's
    own indexes, migrations).
    """

    user: str | None
    owner: bool = False


#: The binding of statements that span users for maintenance.
MAINTENANCE = Binding(None)


class Query(NamedTuple):
    """Request: run one SQL statement; the reply is its rows (list of dicts), or [].

    ``bind`` overrides the binding of the op that yields it (``None``: the op's own),
    e.g. a maintenance op's per-user statements after its user list.
    """

    sql: str
    params: Any
    bind: Binding | None = None


Handler = Generator[Embed | Query, Any, Any]


@dataclass
class Step:
    """One handler of a plan: the ops it answers (``indices``) and its state.

    ``free``: the op's statements may share a round with the other free steps' (see
    the module docstring); ``kind``: its op type, at most one of which a round holds.
    """

    indices: list[int]
    gen: Handler
    multi: bool = False
    bind: Binding = MAINTENANCE
    free: bool = False
    kind: type | None = None
    request: Embed | Query | None = None
    result: Any = None
    done: bool = False


@dataclass
class Plan:
    """Steps a batch's handlers: embeddings first, then queries in op order.

    ``now`` (the store clock) enables the embedding cache and ``max_input_tokens``
    truncation; plans built without them (setup, nested plans) only pass texts on.
    """

    steps: list[Step]
    size: int
    dims: int | None
    model_id: str | None
    now: datetime | None = None
    max_input_tokens: int | None = None
    _cursor: int = 0
    _cache_write: Query | None = None
    _round: list[int] = field(default_factory=list)
    _work: EmbeddingWork = field(init=False)

    def __post_init__(self) -> None:
        for step in self.steps:
            self._advance(step, None)
        self._work = EmbeddingWork(
            model_id=self.model_id, dims=self.dims, max_tokens=self.max_input_tokens,
            now=self.now,
        )
        for request in self._embed_requests():
            self._work.add(request.documents, request.queries, request.owners)

    def _advance(self, step: Step, reply: Any) -> None:
        try:
            step.request = step.gen.send(reply)
        except StopIteration as stop:
            step.request, step.result, step.done = None, stop.value, True

    def _embed_requests(self) -> list[Embed]:
        return [s.request for s in self.steps if isinstance(s.request, Embed)]

    def cache_lookup(self) -> Query | None:
        """The one statement reading cached vectors, run before :meth:`embedding_work`."""
        lookup = self._work.lookup()
        return Query(*lookup) if lookup else None

    def deliver_cache(self, rows: list[dict[str, Any]]) -> None:
        """Reply to :meth:`cache_lookup`: its hits are not embedded again."""
        self._work.deliver_cache(rows)

    def embedding_work(self) -> tuple[list[str], list[str]]:
        """Documents and queries the model must embed: truncated, uncached, unique."""
        return [d.text for d in self._work.misses()], self._work.unique_queries()

    def embedding_request(self) -> Embed | None:
        """:meth:`embedding_work` as one request with owners, for a plan nested in a handler.

        A handler combining other handlers yields this and passes the reply to
        :meth:`deliver_embeddings`, so the outer plan still caches per owner.
        """
        misses = self._work.misses()
        queries = self._work.unique_queries()
        if not misses and not queries:
            return None
        return Embed([d.text for d in misses], queries, [d.owner for d in misses])

    def deliver_embeddings(
        self, doc_vectors: Sequence[Sequence[float]], query_vectors: Sequence[Sequence[float]]
    ) -> None:
        """Vectors for :meth:`embedding_work`, in its order; every handler gets its own.

        Raises:
            EmbeddingDimensionError: A vector has the wrong size; nothing is written.
        """
        if not self._embed_requests():
            return
        docs, queries, upsert = self._work.deliver(doc_vectors, query_vectors)
        self._cache_write = Query(*upsert) if upsert else None
        d = q = 0
        for step in self.steps:
            if isinstance(step.request, Embed):
                nd, nq = len(step.request.documents), len(step.request.queries)
                reply = (docs[d : d + nd], queries[q : q + nq])
                d, q = d + nd, q + nq
                self._advance(step, reply)

    def binding(self) -> Binding:
        """Whom the statement :meth:`next_query` returned acts for.

        The cache write (and :meth:`cache_binding`) acts for the one user who owns
        the batch's cached texts, or for maintenance when they are several users'
        (each cache row is matched on its own user).
        """
        if self._cache_write is not None:
            return self.cache_binding()
        step = self.steps[self._cursor]
        request = step.request
        if isinstance(request, Query) and request.bind is not None:
            return request.bind
        return step.bind

    def cache_binding(self) -> Binding:
        """Whom the embedding cache's statements act for."""
        owners = self._work.owners()
        return Binding(next(iter(owners))) if len(owners) == 1 else MAINTENANCE

    def next_query(self) -> Query | None:
        """The next statement to run, or ``None`` when the batch is done."""
        if self._cache_write is not None:  # first, so it commits with the batch or not
            return self._cache_write
        while self._cursor < len(self.steps):
            step = self.steps[self._cursor]
            if isinstance(step.request, Query):
                return step.request
            if isinstance(step.request, Embed):
                raise RuntimeError("handler asked for embeddings after its first query")
            self._cursor += 1
        return None

    @property
    def pipelined(self) -> bool:
        """Whether the store may send the plan's statements in pipeline mode: not the
        owner's (DDL, which may hold several commands in one statement)."""
        return not any(step.bind.owner for step in self.steps)

    def next_round(self) -> list[Query]:
        """The statements to send together next (all under :meth:`binding`), or ``[]``
        when the batch is done; their rows go to :meth:`deliver_round`, in order."""
        first = self.next_query()
        if first is None:
            return []
        self._round = [self._cursor]
        head = self.steps[self._cursor]
        if self._cache_write is not None or not self.pipelined or not head.free:
            return [first]
        bind, kinds, queries = self.binding(), {head.kind}, [first]
        for n in range(self._cursor + 1, len(self.steps)):
            step = self.steps[n]
            if step.done:
                continue
            request = step.request
            if (not step.free or not isinstance(request, Query) or step.kind in kinds
                    or (request.bind or step.bind) != bind):
                break
            kinds.add(step.kind)
            queries.append(request)
            self._round.append(n)
        return queries

    def deliver_round(self, rows: Sequence[list[dict[str, Any]]]) -> None:
        """Reply to :meth:`next_round`: each statement's rows, in the round's order."""
        if self._cache_write is not None:
            self.deliver_rows(rows[0])
            return
        for n, reply in zip(self._round, rows, strict=True):
            self._advance(self.steps[n], reply)

    def deliver_rows(self, rows: list[dict[str, Any]]) -> None:
        """Reply to the statement returned by :meth:`next_query`."""
        if self._cache_write is not None:
            self._cache_write = None
            return
        self._advance(self.steps[self._cursor], rows)

    def results(self) -> list[Any]:
        """Results in the order of the batch's ops."""
        out: list[Any] = [None] * self.size
        for step in self.steps:
            if step.multi:
                for i, r in zip(step.indices, step.result, strict=True):
                    out[i] = r
            else:
                out[step.indices[0]] = step.result
        return out


