"""Per-user jobs that embed what they write: many users' texts per model call, each text
embedded once, users with nothing new passed over.

The reflection jobs (``consolidate``, ``reflect``, ``summarize``) spend nearly all their
time in the embedding model, on the records they write. A user writes a few dozen
texts; a model call over a few dozen texts pays more padding and per-call overhead than
one call over a few hundred sorted by length, and texts that several users write alike
need embedding only once. So the runner
(``langmem_layer.jobs.runs``) runs a job flagged ``defers_writes`` in two steps over
a chunk of users:

1. **Prepare**, per user, in a transaction bound to the user: the job reads and
   synthesizes as always, but leaves its final store batch in
   ``deferred`` instead of applying it
   (``flush``); ``prepare`` then plans
   that batch (``plan``, no I/O), asks the
   user's embedding cache once, and keeps the texts the cache does not hold. Nothing
   is written; the transaction is rolled back.
2. The chunk's texts (up to ``CHUNK_TEXTS``, or the store's
   ``embedding_batch_size`` if larger) go to the model together, through the run's
   ``RunEmbeddings``, which embeds each distinct text once per run (a vector is a
   function of its text alone, so texts of different users share it in memory; no row
   of one user is read for another).
3. **Apply**, per user and in order, in the user's own transaction: the deferred batch
   (its texts now served from memory, so the model is not called), the user's
   ``remember`` row and the run's cursor advance,
   committed together as before. A user whose prepare or apply fails is recorded
   failed and rolled back alone; the others go on. A model failure in step 2 fails no
   one: each user's apply then calls the model itself, under the usual retries.

Why this design: it keeps the runner's guarantees (one transaction per user that
commits the user's writes with the cursor, one runner per period and shard under the
advisory lock, failures isolated per user) and changes no job beyond the one line of
``Writes.flush``; the jobs stay plain functions that a caller can still run for one
user. The price is that a user's reads (step 1) and writes (step 3) are in two
transactions, a chunk apart. So step 1 keeps the fingerprint of the user's data the job
read (``langmem_layer.sql.job_users``), and step 3 compares it with the data's
fingerprint in its own transaction: when another client wrote the user's memories in
between (a turn's extraction, an edit, a deletion), the prepared writes are dropped and
the job runs again for that user, on the data as it is, as an unbatched run would.
The rejected alternatives were running each user twice (reads and the job's Python
work doubled) and embedding after commit (records left without vectors by a crash).

**Skipping.** A job with an ``unchanged`` rule passes over a user whose data
(``langmem_layer.sql.job_users``'s fingerprint) is the same as when the job last ran
for them with the same options, and for whom the rule says the new ``now`` brings
nothing (``consolidate``: always; ``summarize``: no new period became complete): one
statement, no synthesis, no embedding; the user counts as ``skipped``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

import psycopg
from langchain_core.embeddings import Embeddings

from langmem_layer.jobs import turns
from langmem_layer.jobs.registry import Job, JobContext, _execute
from langmem_layer.sql import job_users as jsql
from langmem_layer.sql import jobs as jobs_sql
from langmem_layer.sql import rls

__all__ = ["CHUNK_TEXTS", "CHUNK_USERS", "KEPT_BYTES", "SKIPPED", "Prepared", "RunEmbeddings",
           "per_user", "prepare", "remember"]

logger = logging.getLogger("langmem_layer.jobs")

#: Texts gathered from users before one model call (the store's
#: ``embedding_batch_size`` when that is larger).
CHUNK_TEXTS = 512
#: Users prepared at most before their texts are embedded and their writes applied:
#: bounds the time between a user's reads and writes, and the memory held.
CHUNK_USERS = 64
#: The outcome counting users passed over (nothing new since the job last ran for them).
SKIPPED = "skipped"
#: Bytes of vectors a run keeps in memory at most (~87,000 MiniLM vectors); past it
#: the least recently asked for are dropped (and embedded again if asked for again).
KEPT_BYTES = 128 * 2**20


class RunEmbeddings(Embeddings):
    """The store's model for one run of a job: each distinct text embedded once.

    Vectors are kept in memory (float32, up to ``KEPT_BYTES``, least recently asked
    for dropped first) for the run, so a text asked for again (by ``prefetch`` and
    then the store, or by two users) is not embedded again.

    Args:
        inner: The model.
        batch_size: Texts per call of ``prefetch`` at most.
        kept_bytes: Bytes of vectors kept at most.

    Attributes:
        texts: Texts sent to the model.
        calls: Calls made to the model.
        asked: Texts asked for (by ``prefetch`` and the store).
    """

    def __init__(self, inner: Embeddings, *, batch_size: int,
                 kept_bytes: int = KEPT_BYTES) -> None:
        self.inner = inner
        self.batch_size = max(1, batch_size)
        self.kept_bytes = kept_bytes
        self.vectors: dict[str, Any] = {}  # in order of last use, oldest first
        self.texts = self.calls = self.asked = 0
        self._bytes = 0

    def prefetch(self, texts: Sequence[str]) -> None:
        """Embed the texts not yet known, once each, in calls of up to ``batch_size``."""
        import numpy as np

        self.asked += len(texts)
        wanted = list(dict.fromkeys(texts))
        missing = []
        for t in wanted:
            if t in self.vectors:
                self.vectors[t] = self.vectors.pop(t)  # recently used: dropped last
            else:
                missing.append(t)
        for i in range(0, len(missing), self.batch_size):
            part = missing[i:i + self.batch_size]
            vectors = self.inner.embed_documents(part)
            self.calls += 1
            self.texts += len(part)
            for text, vec in zip(part, vectors, strict=True):
                self.vectors[text] = np.asarray(vec, dtype=np.float32)
                self._bytes += self.vectors[text].nbytes
        # Never drop what this call was asked for: its caller reads it next.
        while self._bytes > self.kept_bytes and len(self.vectors) > len(wanted):
            self._bytes -= self.vectors.pop(next(iter(self.vectors))).nbytes

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Vectors of ``texts``: known ones from memory, the others from the model."""
        self.prefetch(texts)
        return [self.vectors[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        """A query's vector (the stores' models embed queries as documents)."""
        return self.embed_documents([text])[0]


@dataclass(slots=True)
class Prepared:
    """One user's prepared work: the deferred store batch and its texts to embed.

    Attributes:
        user_id: The user.
        counts: The job's outcomes for the user (``{"skipped": 1}`` when passed over).
        ops: The store batch to apply in the user's transaction.
        texts: The batch's texts the model must embed (the user's cache had not them).
        skipped: Whether the user had nothing new.
        error: What failed while preparing (the user is then recorded failed).
        seen: The fingerprint of the user's data the job read
            (``langmem_layer.sql.job_users``), checked again before the writes apply.
    """

    user_id: str
    counts: Any = field(default_factory=dict)
    ops: list[Any] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    skipped: bool = False
    error: Exception | None = None
    seen: str | None = None


def _options(options: Mapping[str, Any]) -> Any:
    return json.loads(json.dumps(dict(options), sort_keys=True, default=str))


def _is_unchanged(row: Mapping[str, Any], job: Job, now: datetime,
                  options: Mapping[str, Any]) -> bool:
    """Whether ``row`` (``state``) says the job has
    nothing new to do for the user."""
    if job.unchanged is None:
        return False
    return (row["fingerprint"] is not None and row["fingerprint"] == row["current"]
            and row["options"] == _options(options)
            and job.unchanged(row["ran_now"], now, options))


def _texts(conn: psycopg.Connection[Any], ctx: JobContext, ops: list[Any]) -> list[str]:
    """The texts the store will embed for ``ops``: truncated, unique, not in the user's
    cache (the same plan the store makes when it applies them)."""
    store = ctx.store
    if not ops or getattr(store, "embeddings", None) is None:
        return []
    plan = store.plan(ops)
    lookup = plan.cache_lookup()
    if lookup is not None:
        plan.deliver_cache(_execute(conn, lookup.sql, lookup.params))
    docs, queries = plan.embedding_work()
    return [*docs, *queries]


def prepare(conn: psycopg.Connection[Any], ctx: JobContext, job: Job, user_id: str, *,
            now: datetime, options: Mapping[str, Any], skip: bool) -> Prepared:
    """Run ``job`` for ``user_id`` with its writes deferred, in a transaction rolled back.

    Args:
        conn: The run's connection (``ctx`` is bound to it).
        ctx: The run's context.
        job: A job with ``defers_writes``.
        user_id: The user.
        now: The time of the run.
        options: The job's options.
        skip: Pass over the user when nothing changed (recorded runs).

    Returns:
        The user's prepared work. Errors other than the connection's are not raised
        but kept in ``Prepared.error``, for the runner to record in the user's turn.
    """
    out = Prepared(user_id)
    try:
        with conn.transaction():
            _execute(conn, *rls.bind(user_id, role=ctx.store.rls_role, switch_role=True,
                                     where_possible=ctx.store.rls_where_possible))
            # The user's data before the job reads it: what the skip compares, and what
            # the apply checks is still there (a write after this is seen as a change).
            row = _execute(conn, *jsql.state(job.name, user_id))[0]
            if skip and _is_unchanged(row, job, now, options):
                out.skipped, out.counts = True, {SKIPPED: 1}
            else:
                ctx.deferred = []
                try:
                    out.counts = job.function(ctx, user_id, now=now, dry_run=False,
                                              **options)
                finally:
                    out.ops, ctx.deferred = ctx.deferred, None
                out.texts = _texts(conn, ctx, out.ops)
                if out.ops:
                    out.seen = str(row["current"])
            # Nothing was written (the writes are deferred); read-only either way.
            raise psycopg.Rollback()
    except (psycopg.OperationalError, psycopg.InterfaceError):
        raise
    except Exception as e:
        if conn.broken:
            raise
        out.error = e
    return out


def remember(conn: psycopg.Connection[Any], job: Job, user_id: str, now: datetime,
             options: Mapping[str, Any]) -> None:
    """Record the user's fingerprint for ``job`` (in the user's transaction, after its
    writes), so that the next run can pass over the user if nothing changes."""
    if job.unchanged is not None:
        _execute(conn, *jsql.remember(job.name, user_id, now, _options(options)))


def per_user(conn: psycopg.Connection[Any], bound: JobContext, job: Job, *, now: datetime,
             users: Iterable[str], total: int, record: tuple[str, str, str] | None,
             options: Mapping[str, Any], progress: bool, out: TextIO | None
             ) -> tuple[int, dict[str, int], str | None]:
    """Run a job that defers its writes for each of ``users``: prepared a chunk at a
    time, the chunk's texts embedded together, then each user's writes applied in its
    own transaction, in order. ``record`` is (job, period, shard) to advance per user,
    or None (unrecorded). Returns users done, summed counts and the last user done."""
    pause = turns.run_settings(bound).jobs_pause_ms / 1000
    limit = max(bound.store.embedding_batch_size, CHUNK_TEXTS)
    done, totals, last = 0, dict[str, int](), None
    chunk: list[Prepared] = []

    def settle() -> None:
        nonlocal done, last
        model = bound.store.embeddings
        texts = [t for p in chunk for t in p.texts]
        if texts and isinstance(model, RunEmbeddings):
            try:
                model.prefetch(texts)
            except Exception as e:  # each user's own batch calls the model again
                logger.warning("job %s: embedding %d users' texts together failed (%s); "
                               "each user's are embedded on their own", job.name,
                               len(chunk), e)
        for p in chunk:
            if isinstance(p.error, turns.STOPS_THE_RUN):
                raise p.error
            try:
                if p.error is not None:
                    raise p.error
                counts = _apply(conn, bound, job, p, now=now, record=record,
                                options=options)
            except turns.STOPS_THE_RUN:
                raise
            except Exception as e:
                if conn.broken:
                    raise
                turns.user_failed(conn, job, p.user_id, e, record)
                counts = {turns.FAILED: 1}
            else:
                done += 1
            last = p.user_id
            for k, n in counts.items():
                totals[k] = totals.get(k, 0) + n
            bar.update()
            if pause:
                time.sleep(pause)
        chunk.clear()

    with turns.progress_bar(total, job.name, progress, out) as bar:
        for user_id in users:
            chunk.append(prepare(conn, bound, job, user_id, now=now, options=options,
                                 skip=record is not None))
            if sum(len(p.texts) for p in chunk) >= limit or len(chunk) >= CHUNK_USERS:
                settle()
        settle()
    return done, totals, last


def _apply(conn: psycopg.Connection[Any], bound: JobContext, job: Job, prepared: Prepared, *,
           now: datetime, record: tuple[str, str, str] | None, options: Mapping[str, Any]
           ) -> dict[str, int]:
    """A prepared user's writes, fingerprint and cursor advance, in its own transaction.

    When the user's data changed since it was prepared (a turn's extraction, an edit, a
    deletion), the prepared writes could overwrite that change: they are dropped and the
    job runs again for the user in this transaction, on the data as it is now (its texts
    embedded on their own), as an unbatched run would.
    """
    user_id = prepared.user_id
    counts = turns.counts_of(prepared.counts, job, user_id)
    with conn.transaction():
        _execute(conn, *rls.bind(user_id, role=bound.store.rls_role, switch_role=True,
                                 where_possible=bound.store.rls_where_possible))
        if record is not None:
            _execute(conn, *jobs_sql.relaxed_commit())
        if prepared.seen is not None and prepared.seen != str(
                _execute(conn, *jsql.state(job.name, user_id))[0]["current"]):
            logger.info("job %s: %s's data changed since it was prepared; running it again",
                        job.name, user_id)
            counts = turns.counts_of(
                job.function(bound, user_id, now=now, dry_run=False, **options), job, user_id)
        elif prepared.ops:
            bound.store.batch(prepared.ops)
        if record is not None and not prepared.skipped:
            remember(conn, job, user_id, now, options)
        tokens = counts.pop(turns.TOKENS, 0)
        if record is not None:
            turns.advance(conn, job, record, user_id, counts, tokens)
    return counts
