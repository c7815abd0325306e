"""How a plan is executed, once for both stores: a job yielding I/O steps.

A job is a generator that yields the I/O it needs (``Fetch``,
``EmbedDocuments``, ``EmbedQuery``, ``RunTransaction``,
``Sleep``) and gets each step's result back, or the step's exception thrown in.
Everything else (the order of cache, model and transaction, embedding retries,
transaction retries, turning database errors into library errors) is here, once.
The sync and async stores each only implement ``_io`` (one step's I/O) and drive a
job with a ``Stepper``::

    step = Stepper(job)
    while (io := step.io) is not None:
        try:
            reply = self._io(io)              # or: await self._io(io)
        except Exception as e:
            step.throw(e)
        else:
            step.send(reply)
    return step.result
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterable, Iterator
from itertools import count, groupby
from operator import itemgetter
from typing import Any, NamedTuple, NoReturn

from langchain_core.embeddings import Embeddings

from langmem_layer.sql import citus, rls
from langmem_layer.store import db_errors
from langmem_layer.store.embedding.work import Retry
from langmem_layer.store.plan import MAINTENANCE, Binding, Plan, Query

__all__ = [
    "BEGIN",
    "COMMIT",
    "CONTROL",
    "IO",
    "RELEASE",
    "ROLLBACK_TO",
    "SAVEPOINT",
    "EmbedDocuments",
    "EmbedQuery",
    "Execution",
    "Fetch",
    "Job",
    "Rounds",
    "RunTransaction",
    "Sleep",
    "Stepper",
    "chunked",
    "returns_rows",
]

logger = logging.getLogger("langmem_layer.store")


def returns_rows(cursor: Any) -> bool:
    """Whether the statement a cursor ran returned rows (a SELECT, a RETURNING).

    The same test as ``bool(cursor.description)``, which builds a column object per
    column of every statement only to be tested for truth.
    """
    result = cursor.pgresult
    return result is not None and result.nfields > 0


class Fetch(NamedTuple):
    """Run one read in a transaction of its own, bound to ``bind``; the reply is its rows."""

    query: Query
    bind: Binding = MAINTENANCE


class EmbedDocuments(NamedTuple):
    """Embed ``texts`` with ``embed_documents``; the reply is their vectors."""

    texts: list[str]


class EmbedQuery(NamedTuple):
    """Embed ``text`` with ``embed_query``; the reply is its vector."""

    text: str


class RunTransaction(NamedTuple):
    """Run the plan's queries (``Plan.next_query`` / ``Plan.deliver_rows``) in
    one transaction; the reply is ``None``."""

    plan: Plan


class Sleep(NamedTuple):
    """Wait ``seconds``."""

    seconds: float


class Autocommit(NamedTuple):
    """Run one statement outside any transaction, as the session's own role (what
    ``CREATE INDEX CONCURRENTLY`` needs); the reply is ``None``."""

    sql: str


IO = Fetch | EmbedDocuments | EmbedQuery | RunTransaction | Sleep | Autocommit
Job = Generator[IO, Any, Any]


def chunked(texts: list[str], size: int) -> Iterator[list[str]]:
    """Split texts into embedding calls of at most ``size``."""
    for i in range(0, len(texts), size):
        yield texts[i : i + size]


class Stepper:
    """Steps a job: ``io`` is the step to run next, ``None`` once ``result`` is set.

    An exception raised by the job itself propagates out of ``send`` or
    ``throw`` to the driver's caller.
    """

    def __init__(self, job: Job) -> None:
        self._job = job
        self.io: IO | None = None
        self.result: Any = None
        self.send(None)

    def send(self, reply: Any) -> None:
        """Give the job the reply of ``io``."""
        try:
            self.io = self._job.send(reply)
        except StopIteration as done:
            self.io, self.result = None, done.value

    def throw(self, error: Exception) -> None:
        """Give the job the exception ``io`` raised."""
        try:
            self.io = self._job.throw(error)
        except StopIteration as done:
            self.io, self.result = None, done.value


#: Transaction control the stores send as statements of a round.
BEGIN = Query("BEGIN", None)
COMMIT = Query("COMMIT", None)
#: The same inside a transaction the caller holds open (a pinned store's).
SAVEPOINT = Query("SAVEPOINT langmem_batch", None)
RELEASE = Query("RELEASE SAVEPOINT langmem_batch", None)
ROLLBACK_TO = Query("ROLLBACK TO SAVEPOINT langmem_batch", None)
#: Their texts: statements on nobody's rows, which statement counts leave out (psycopg
#: sent BEGIN and COMMIT itself, uncounted, before the stores sent them in rounds).
CONTROL = frozenset(q.sql for q in (BEGIN, COMMIT, SAVEPOINT, RELEASE, ROLLBACK_TO))


class Rounds:
    """What a pipelined transaction sends, round by round, free of I/O.

    Both stores send each list ``next`` returns in one pipeline (one sync, one
    round trip) and give every statement's rows, in order, to ``deliver``. A round
    is the plan's next round (``Plan.next_round``) with a binding statement before
    each statement whose user differs from the one before it, ``BEGIN`` with the first
    round, and ``COMMIT`` with the round the plan says is its last
    (``Plan.final``), else in a round of its own. A plan done in one round needs
    neither: the statements before a sync run as one implicit transaction, committed
    by the sync and rolled back, whole, by an error.

    ``nested``: the connection is in a transaction of the caller's (a pinned store's
    work for one user), which the batch must neither commit nor end: it runs under a
    savepoint instead, released with its last round, and an error rolls back to it
    (``recovery``), so the caller's transaction goes on, as psycopg's nested
    ``transaction()`` does. Otherwise the store rolls back after an error whatever the
    server still holds open (psycopg's ``rollback`` does nothing when nothing is).
    ``begun``: the connection is not in autocommit, so psycopg sends a ``BEGIN`` before
    the first statement itself; the batch sends none, and always ends with ``COMMIT``.
    ``blocks``: every transaction opens with ``BEGIN``, a plan of one round too. On
    Citus the binding reaches the workers only inside a transaction block
    (``Execution.needs_blocks``), and a role subject to the policies needs it there.
    ``split``: a statement that has ``parts`` is sent as its parts (on Citus, where each
    part routes to the user's shard and the whole would be run in steps).

    A plan that may commit asynchronously (``Plan.commit_async``) says so in its
    first binding statement, unless nested: the setting would hold for the caller's
    whole transaction.
    """

    def __init__(self, plan: Plan, bind_query: Callable[..., Query], *,
                 nested: bool = False, begun: bool = False, blocks: bool = False,
                 split: bool = False) -> None:
        self._plan = plan
        self._bind_query = bind_query
        self.nested = nested
        self._blocks = blocks
        self._split = split
        self._open, self._close = (SAVEPOINT, RELEASE) if nested else (BEGIN, COMMIT)
        self._bound: Binding | None = None
        self._begun = begun and not nested
        self._commit_async = plan.commit_async and not nested
        self._done = False
        # Where each statement of the plan's round sits in the round sent, and where
        # the statement it carries (``Query.pre``) sits, if it carries one.
        self._picks: list[tuple[int, int | None]] = []

    def next(self) -> list[Query]:
        """The statements of the next round trip, or ``[]`` when the transaction is over."""
        if self._done:
            return []
        queries = self._plan.next_round()
        if not queries:
            self._done = True
            return [self._close] if self._begun else []
        final = self._plan.final
        out: list[Query] = []
        if not self._begun and (self.nested or not final or self._blocks):
            out.append(self._open)
            self._begun = True
        self._picks = []
        for query in queries:
            bind = query.bind or MAINTENANCE
            if bind != self._bound:
                out.append(self._bind_query(bind, commit_async=self._commit_async))
                self._commit_async = False  # the setting holds for the transaction
                self._bound = bind
            pre = None
            if query.pre is not None:
                pre = len(out)
                out.append(Query(*query.pre, bind=query.bind))
            if self._split and query.parts:
                parts = query.parts() if callable(query.parts) else query.parts
                *writes, main = parts
                out.extend(Query(*part, bind=query.bind) for part in writes)
                query = query._replace(sql=main[0], params=main[1], parts=())
            self._picks.append((len(out), pre))
            out.append(query)
        if final:
            self._done = True
            if self._begun:
                out.append(self._close)
        return out

    def recovery(self) -> list[Query]:
        """After an error, nested: what takes the caller's transaction back to before
        the batch (nothing if the savepoint was never sent)."""
        return [ROLLBACK_TO, RELEASE] if self.nested and self._begun else []

    def deliver(self, rows: list[list[dict[str, Any]]]) -> None:
        """Reply to ``next``: the rows of each statement it returned, in order."""
        if self._picks:
            picks, self._picks = self._picks, []
            self._plan.deliver_round([rows[i] if pre is None else (rows[pre], rows[i])
                                      for i, pre in picks])


class Execution:
    """The jobs both stores run; expects the core's ``plan`` and embedding settings."""

    conn: Any
    embeddings: Embeddings | None
    embedding_batch_size: int
    embedding_retry_delay: float
    plan: Callable[..., Plan]
    binding: Callable[[Any], Binding]
    rls_role: str | None
    rls_where_possible: bool

    #: Whether every transaction needs a block of its own (``Rounds``, ``blocks``):
    #: read from the server by the first transaction (``needs_blocks``).
    transaction_blocks: bool | None = None
    #: Whether the schema has the binding function (read with ``transaction_blocks``).
    bind_function: bool = True
    #: Whether the database is distributed (Citus): statements with ``Query.parts``
    #: are then sent as their parts (read with ``transaction_blocks``).
    distributed: bool = False

    def needs_blocks(self, row: dict[str, Any]) -> bool:
        """From ``sql.citus.session``'s row: whether the binding must reach Citus
        workers, as it must when the transactions act as a role subject to the
        policies: the app role (by default wherever the server lets the connection
        act as it, which only the server knows), or the session's own when they
        apply to it."""
        switches = self.rls_role is not None
        self.distributed = bool(row.get("citus"))
        self.transaction_blocks = self.distributed and (switches or bool(row["subject"]))
        # A schema older than migration 33 (or none yet) is bound as it was before.
        self.bind_function = bool(row.get("bind_function", True))
        return self.transaction_blocks

    def _bind_query(self, bind: Binding, *, commit_async: bool = False) -> Query:
        """The statement binding ``bind`` (a user or maintenance, and the role) to the
        rest of the transaction; the stores pipeline it with the statement it precedes,
        so binding costs no round trip of its own. ``commit_async``: see
        ``bind``."""
        return Query(*rls.bind(bind.user, role=self.rls_role, switch_role=not bind.owner,
                               commit_async=commit_async,
                               where_possible=self.rls_where_possible,
                               schema_ready=self.bind_function and not bind.early))

    def _model(self) -> Embeddings:
        if self.embeddings is None:
            raise RuntimeError("embedding requested without an index")
        return self.embeddings

    def _batch_job(self, ops: Iterable[Any], *, validated: bool = False) -> Job:
        """The job of a batch; ``validated``: the caller checked every op already."""
        ops = list(ops)  # re-planned from the ops if the transaction has to be retried
        results: list[Any] = []
        for part in (yield from self._role_parts(ops)):
            results.extend((yield from self._execution(self._planner(part, validated))))
        return results

    def _planner(self, ops: list[Any], validated: bool) -> Callable[[], Plan]:
        return lambda: self.plan(ops, validated=validated)

    def _role_parts(self, ops: list[Any]) -> Job:
        """``ops`` as the runs of consecutive ops acting as one role, each committed in a
        transaction of its own: all of them in one, except on Citus for a store acting
        as the app role (the default), where a batch mixing the owner's ops (a user's
        own index, deleting a user) with the role's commits in parts, in order. Citus
        refuses to let a second role touch the shard placements one role modified in
        the same transaction ("cannot perform query on placements that were modified
        in this transaction by a different user")."""
        if self.rls_role is None or len(ops) < 2 or (
                self.transaction_blocks is not None and not self.distributed):
            return [ops]
        owners = [self.binding(op).owner for op in ops]
        if len(set(owners)) < 2:
            return [ops]
        if self.transaction_blocks is None:  # whether on Citus: the first transaction asks
            yield from self._database(Fetch(Query(*citus.has_citus())))
        if not self.distributed:
            return [ops]
        runs = groupby(zip(owners, ops, strict=True), key=itemgetter(0))
        return [[op for _, op in run] for _, run in runs]

    def _op_job(self, op: Any) -> Job:
        """The result of one op run as a batch of its own."""
        return (yield from self._batch_job([op]))[0]

    def _execution(self, build: Callable[[], Plan]) -> Job:
        """Execute the plan ``build`` makes; build it again for each retry.

        Cache and model run before the transaction, so no lock is held while waiting on
        the model, and a model that keeps failing leaves nothing written. A transaction
        that loses a deadlock or a serialization conflict is run again from a new plan
        (a plan's handlers have consumed their rows), reusing the vectors already made.
        """
        known: dict[str, list[float]] = {}
        for attempt in count(1):
            plan = build()
            if (lookup := plan.cache_lookup()) is not None:
                plan.deliver_cache(
                    (yield from self._database(Fetch(lookup, plan.cache_binding()))))
            docs, queries = plan.embedding_work()
            fresh = [d for d in docs if d not in known]
            vectors: list[list[float]] = []
            for batch in chunked(fresh, self.embedding_batch_size):
                vectors.extend((yield from self._embedding(EmbedDocuments(batch))))
            known.update(zip(fresh, vectors, strict=True))
            query_vectors = []
            for q in queries:
                query_vectors.append((yield from self._embedding(EmbedQuery(q))))
            plan.deliver_embeddings([known[d] for d in docs], query_vectors)
            if plan.next_query() is None:
                return plan.results()
            try:
                yield RunTransaction(plan)
            except Exception as e:
                if not db_errors.retryable(e):
                    self._raise_translated(e)
                if attempt >= db_errors.TRANSACTION_ATTEMPTS:
                    raise db_errors.concurrency_error(e, attempt) from e
                pause = db_errors.retry_pause(attempt)
                logger.warning(
                    "transaction lost to a concurrent one (%s); retrying in %.2fs "
                    "(attempt %d of %d)", getattr(e, "sqlstate", None), pause, attempt + 1,
                    db_errors.TRANSACTION_ATTEMPTS,
                )
                yield Sleep(pause)
                continue
            return plan.results()
        raise AssertionError("unreachable")  # pragma: no cover

    def _database(self, io: Fetch) -> Job:
        try:
            return (yield io)
        except Exception as e:
            self._raise_translated(e)

    def _raise_translated(self, error: Exception) -> NoReturn:
        translated = db_errors.translate(error, pool=self.conn)
        if translated is error:  # a library error already, or a bug: as it is
            raise error
        raise translated from error

    def _embedding(self, io: EmbedDocuments | EmbedQuery) -> Job:
        """One model call under the embedding retry policy (3 attempts)."""
        retry = Retry(self.embedding_retry_delay)
        while True:
            try:
                return (yield io)
            except Exception as e:
                yield Sleep(retry.pause_after(e))
