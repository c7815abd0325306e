"""A batch's execution plan: handler generators stepped together, free of I/O.

Every operation is handled by a generator that first yields at most one
``Embed`` request, then ``Query`` requests, and finally returns the
operation's result. A ``Plan`` steps all generators of a batch together so that
all texts of the batch are embedded in as few calls as possible, outside the database
transaction, and then runs the queries in order inside one transaction. The execution
job of ``langmem_layer.store.driver`` (one for both stores) asks for, in this order:

1. ``Plan.cache_lookup`` (if not ``None``), its rows to ``Plan.deliver_cache``;
2. ``Plan.embedding_work``: the texts the cache did not have, embedded in calls of
   at most ``embedding_batch_size`` documents, each call under a
   ``Retry``; then ``Plan.deliver_embeddings``
   (always, even with nothing to embed: cache hits are delivered there too);
3. ``Plan.next_round`` / ``Plan.deliver_round`` in one transaction; the first
   round stores the new cache entries.

A round is the statements the store sends together, in one round trip: the next
statement, and after it the pending statements of the steps that follow, as long as
no op can see another's statements out of the batch's order (``Plan.next_round``).
A round whose statements are all their handlers' last (``Query.last``) ends the
batch (``Plan.final``), so the store sends the COMMIT with it, or, when it is also
the first, no BEGIN or COMMIT at all. A plan that is not ``pipelined`` runs a
statement a round.

A plan is stepped once: its handlers consume the rows they are given. A transaction
that has to be run again is run from a new plan of the same ops.

Truncation, deduplication and the cache are in ``langmem_layer.store.embedding.work``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.sql import citus, with_writes
from langmem_layer.store.embedding.work import EmbeddingWork

__all__ = ["MAINTENANCE", "Binding", "Embed", "Handler", "Plan", "Query", "Step", "writing"]


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
    """Whom a statement acts for under row-level security (see ``langmem_layer.sql.rls``).

    ``user`` is the user bound to the statement's transaction, ``None`` for the
    maintenance bypass (statements listing users, schema migrations). ``owner``: the
    statement runs as the session's own role, not the store's app role (DDL: a user's
    own indexes, migrations).
    """

    user: str | None
    owner: bool = False
    #: The schema may predate the binding function (setup's first statements): bind
    #: with the built-in settings (``langmem_layer.sql.rls.bind``, ``schema_ready``).
    early: bool = False


#: The binding of statements that span users for maintenance.
MAINTENANCE = Binding(None)


class Query(NamedTuple):
    """Request: run one SQL statement; the reply is its rows (list of dicts), or [].

    ``bind`` overrides the binding of the op that yields it (``None``: the op's own),
    e.g. a maintenance op's per-user statements after its user list.

    ``last``: the handler's promise that it returns once it has these rows, so a round
    made only of last statements ends the transaction and its COMMIT goes out with it
    (a handler that yields again after one fails loudly). ``sets``: the statement sets
    transaction settings the handler's next statement relies on (an HNSW walk's
    depth), so no other op's statement may run between the two.

    ``pre``: a statement sent right before this one, in the same round and under the
    same binding, whose rows come back with this one's: the reply is then ``(pre's
    rows, rows)``. For the settings a statement relies on when the handler need not
    read them first (recall's HNSW depth, with the index lookup that decides its
    shape), one round trip instead of two; the plan counts it as a statement that
    ``sets`` (``sets_settings``).

    ``parts``: the same work in statements a distributed server (Citus) routes to the
    user's shard, where ``sql`` is the better form on one server: a statement of
    several writes as statements of their own (Citus runs each data-modifying CTE
    apart, its rows passed on through the coordinator; ``writing`` builds both
    forms), or rows as ``VALUES`` rather than a ``SELECT`` of parameters (whose rows
    Citus copies through the coordinator and commits in two phases). A store that
    splits sends them in place of ``sql``, in the same round and under the same
    binding, and the reply is the last part's rows, as ``sql``'s would be. It may be a
    function that builds them, called only by a store that splits, where building them
    costs what one server would throw away (an upsert's rows as parameters).
    """

    sql: str
    params: Any
    bind: Binding | None = None
    last: bool = False
    sets: bool = False
    pre: tuple[str, Any] | None = None
    parts: tuple[tuple[str, Any], ...] | Callable[[], tuple[tuple[str, Any], ...]] = ()

    @property
    def sets_settings(self) -> bool:
        """Whether it sets transaction settings: ``sets``, or a ``pre`` that does."""
        return self.sets or self.pre is not None


Handler = Generator[Embed | Query, Any, Any]


def writing(main: tuple[str, Any], *writes: tuple[str, Any], last: bool = False,
            columns: str | None = None) -> Query:
    """``main`` with ``writes`` done by the same statement (``sql.with_writes``), or, on a
    server that splits (``Query.parts``), by statements of their own before it.

    The writes touch other tables than ``main`` and each other, so no part reads
    what another writes, and the two forms give the same rows. ``columns``: ``main``
    is a read of one user whose rows have these columns (``citus.on_shard``), and the
    split form sends it as a call the user's worker runs from its kept plan.
    """
    if not writes:
        return Query(*main, last=last)
    if columns is None:
        return Query(*with_writes(main, *writes), last=last, parts=(*writes, main))
    return Query(*with_writes(main, *writes), last=last, parts=lambda: (
        *writes, citus.on_shard(main[1]["user_id"], main, columns)))


@dataclass
class Step:
    """One handler of a plan: the ops it answers (``indices``) and its state.

    ``free``: the op neither depends on nor affects the batch's other free ops, so its
    statements may share rounds more freely (``Plan.next_round``); ``kind``: its op
    type, named in errors.
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


def _rows(query: Query) -> Handler:
    return (yield query)


def _name(step: Step) -> str:
    """The op type a step answers, for an error."""
    return str(getattr(step.kind, "__name__", step.kind))


@dataclass
class Plan:
    """Steps a batch's handlers: embeddings first, then queries in op order.

    ``now`` (the store clock) enables the embedding cache and ``max_input_tokens``
    truncation; plans built without them (setup, nested plans) only pass texts on.
    ``commit_async``: nothing the plan writes must survive a crash (reads, the
    thread's activity stamp), so its transaction may commit without waiting for the
    disk.
    """

    steps: list[Step]
    size: int
    dims: int | None
    model_id: str | None
    now: datetime | None = None
    max_input_tokens: int | None = None
    commit_async: bool = False
    _cursor: int = 0
    _cache_write: Query | None = None
    _round: list[int] = field(default_factory=list)
    _work: EmbeddingWork = field(init=False)

    @classmethod
    def single(cls, query: Query, bind: Binding) -> Plan:
        """A plan of one statement, bound to ``bind``, whose one result is its rows."""
        return cls([Step([0], _rows(query._replace(last=True)), bind=bind, free=True)], 1,
                   None, None)

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
        sent = step.request
        try:
            step.request = step.gen.send(reply)
        except StopIteration as stop:
            step.request, step.result, step.done = None, stop.value, True
            return
        if isinstance(sent, Query):
            if sent.last:  # its COMMIT may have gone out with it: nothing can follow
                raise RuntimeError(f"the handler of {_name(step)} sent a statement after "
                                   f"the one it marked last: {sent.sql[:80]!r}")
            if isinstance(step.request, Query) and step.request.sets_settings:
                raise RuntimeError(f"the handler of {_name(step)} sets transaction settings "
                                   "after its first statement; only a first statement may")

    def _embed_requests(self) -> list[Embed]:
        return [s.request for s in self.steps if isinstance(s.request, Embed)]

    def cache_lookup(self) -> Query | None:
        """The one statement reading cached vectors, run before ``embedding_work``."""
        lookup = self._work.lookup()
        return Query(*lookup) if lookup else None

    def deliver_cache(self, rows: list[dict[str, Any]]) -> None:
        """Reply to ``cache_lookup``: its hits are not embedded again."""
        self._work.deliver_cache(rows)

    def embedding_work(self) -> tuple[list[str], list[str]]:
        """Documents and queries the model must embed: truncated, uncached, unique."""
        return [d.text for d in self._work.misses()], self._work.unique_queries()

    def embedding_request(self) -> Embed | None:
        """``embedding_work`` as one request with owners, for a plan nested in a handler.

        A handler combining other handlers yields this and passes the reply to
        ``deliver_embeddings``, so the outer plan still caches per owner.
        """
        misses = self._work.misses()
        queries = self._work.unique_queries()
        if not misses and not queries:
            return None
        return Embed([d.text for d in misses], queries, [d.owner for d in misses])

    def deliver_embeddings(
        self, doc_vectors: Sequence[Sequence[float]], query_vectors: Sequence[Sequence[float]]
    ) -> None:
        """Vectors for ``embedding_work``, in its order; every handler gets its own.

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
        """Whom the statement ``next_query`` returned acts for.

        The cache write (and ``cache_binding``) acts for the one user who owns
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
        """The statements to send together next, or ``[]`` when the batch is done; each
        carries the binding it runs under, and their rows go to ``deliver_round``,
        in order.

        A round is the next statement and the pending statements of the steps after it
        while each may join without changing what any op sees: a free step (its op
        neither depends on nor affects the other free ones, e.g. the reads of a turn)
        unless a step of the round that is not free has statements still to come; a
        step that is not free only when every step before it in the round is at its last
        statement. A round holds one statement that sets settings (``Query``), and
        only a handler's first statement may: the steps before a setter's next
        statement in the following round are then all past their first, so nothing
        overwrites its settings before that statement runs. Bindings may differ: the
        store binds each statement's user.
        """
        first = self.next_query()
        if first is None:
            return []
        self._round = [self._cursor]
        if self._cache_write is not None:
            return [first._replace(bind=self.cache_binding())]
        head = self.steps[self._cursor]
        queries = [first._replace(bind=self.binding())]
        if not self.pipelined:
            return queries
        pending = not first.last  # a step of the round has statements still to come
        barrier = pending and not head.free
        settings = first.sets_settings
        for n in range(self._cursor + 1, len(self.steps)):
            step = self.steps[n]
            if step.done:
                continue
            request = step.request
            if not isinstance(request, Query) or barrier or (pending and not step.free):
                break
            if request.sets_settings:
                if settings:
                    break
                settings = True
            pending = pending or not request.last
            barrier = pending and not step.free
            queries.append(request._replace(bind=request.bind or step.bind))
            self._round.append(n)
        return queries

    def at_last_step(self) -> bool:
        """Whether every step after the one ``next_query`` is at is done."""
        return all(step.done for step in self.steps[self._cursor + 1:])

    @property
    def final(self) -> bool:
        """Whether the round ``next_round`` last returned ends the batch: every step
        not done is in it, at a statement its handler marked last."""
        if self._cache_write is not None:
            return False
        in_round = set(self._round)
        return all(
            step.done or (n in in_round and isinstance(step.request, Query)
                          and step.request.last)
            for n, step in enumerate(self.steps) if n >= self._cursor)

    def deliver_round(self, rows: Sequence[Any]) -> None:
        """Reply to ``next_round``: each statement's rows, in the round's order (a
        statement with a ``pre``: the pair ``Query`` says)."""
        if self._cache_write is not None:
            self.deliver_rows(rows[0])
            return
        for n, reply in zip(self._round, rows, strict=True):
            self._advance(self.steps[n], reply)

    def deliver_rows(self, rows: Any) -> None:
        """Reply to the statement returned by ``next_query``: its rows, or (its
        ``pre``'s rows, its rows) when it carries one."""
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


def combine(handlers: list[Handler], *, gate: Query | None = None,
            proceed: Callable[[list[dict[str, Any]]], bool] = bool) -> Handler:
    """Run several handlers as one: their embeddings in one request, then their queries.

    With ``gate``, the gate query runs after the embeddings and before any other
    query; when ``proceed`` says no to its rows (by default: when it returns no row)
    the handlers are abandoned and the result is None.
    """
    plan = Plan([Step([i], h) for i, h in enumerate(handlers)], len(handlers), None, None)
    # One request for all inner handlers, with each document's owner, so the outer
    # plan can serve it from the per-user embedding cache.
    request = plan.embedding_request()
    doc_vecs, query_vecs = (yield request) if request is not None else ([], [])
    plan.deliver_embeddings(doc_vecs, query_vecs)
    if gate is not None:
        rows = yield gate
        if not proceed(rows):
            for step in plan.steps:
                step.gen.close()
            return None
    while (query := plan.next_query()) is not None:
        # An inner handler's last statement is this one's only if no other follows it.
        plan.deliver_rows((yield query._replace(last=query.last and plan.at_last_step())))
    return plan.results()
