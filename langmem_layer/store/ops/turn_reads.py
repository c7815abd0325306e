"""The reads of a turn, in one place: recall's candidates, the narrative arc's
summaries and the learned trust read with them; the ops and their handlers.

Their SQL stays in the ``sql`` room: recall's candidates (``sql/candidates.py``) alone
are about as long as a module may be (600 lines), and build on the sources and
vector walk the ranking and the other searches share (``sql/sources.py``,
``sql/vector.py``); the summaries' statement (``sql/summaries.py``) is also the
summary jobs', and joins the trust counts of ``sql/trust_counts.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.errors import InvalidNamespaceError
from langmem_layer.sanitize import clean
from langmem_layer.sql import candidates as rsql
from langmem_layer.sql import citus
from langmem_layer.sql import summaries as ssql
from langmem_layer.sql.vector import search_settings
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.ops.items import row_to_item
from langmem_layer.store.ops.trust import LearnedTrust, learned_trust
from langmem_layer.store.plan import Embed, Handler, Query
from langmem_layer.store.tenancy import ns_text, ns_tuple
from langmem_layer.types import MEMORY_ROOT

__all__ = [
    "Candidate",
    "RecallOp",
    "SummaryCandidatesOp",
    "TurnReads",
    "TurnReadsOp",
]


# -- handlers -----------------------------------------------------------------------------


def _recall(ctx: Context, op: RecallOp) -> Handler:
    now = op.now or ctx.now()
    # PostgreSQL text cannot hold U+0000: a NUL in the message must not fail the turn.
    op = op._replace(query=clean(op.query)) if op.query else op
    qvec = None
    dims = None
    lookup = None
    if op.query and ctx.embeddings is not None:
        _, (qvec,) = yield Embed([], [clean(op.embed_text) if op.embed_text else op.query])
        ef = rsql.ann_depth(op.per_source)
        known, remembered = ctx.remembered_index(op.user_id)
        if known:
            # A user looked up before: the lookup rides with the recall, one round
            # trip instead of two, and the recall takes the shape the last lookup
            # found. Stale (another process built or dropped the index since), that
            # shape searches exactly, only slower; this lookup corrects the next.
            dims, lookup = remembered, ctx.ann_lookup(op.user_id, ef)
        else:
            dims = yield from ctx.ann_dims(op.user_id, ef_search=ef)
    prefixes = [ns_text((MEMORY_ROOT, op.user_id, s)) for s in op.scopes]
    statement = rsql.recall_candidates(
        op.user_id,
        prefixes,
        now=now,
        statuses=op.statuses,
        query_text=op.query,
        query_vector=qvec,
        model_id=ctx.model_id,
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
        vector_type=ctx.vector_type,
        owner_reads=ctx.rls,
        context_limit=op.context,
        context_floor=op.context_floor,
    )
    # On Citus, one call the cluster sends to the user's worker, which keeps its plan
    # (``citus.on_shard``); the transaction's search settings go with it.
    reply = yield Query(*statement, last=True, pre=lookup, parts=lambda: (citus.on_shard(
        op.user_id, statement, rsql.ROW, settings=search_settings(
            indexed=dims is not None, ef_search=rsql.ann_depth(op.per_source))),))
    if lookup is None:
        rows = reply
    else:
        found, rows = reply
        ctx.index_seen(op.user_id, found[0]["dims"])
    names = {s.column: s.name for s in rsql.RECALL_SOURCES}
    return [
        Candidate(
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


def _summary_candidates(ctx: Context, op: SummaryCandidatesOp) -> Handler:
    if ctx.tenant(op.namespace) != op.user_id:
        raise InvalidNamespaceError(
            f"Namespace {op.namespace!r} does not belong to user {op.user_id!r}.")
    rows = yield Query(*ssql.candidates(
        op.user_id, ns_text(op.namespace), start=op.start, end=op.end,
        now=op.now or ctx.now(), limit=op.limit))
    return [row_to_item(r) for r in rows]


def _turn_reads(ctx: Context, op: TurnReadsOp) -> Handler:
    s = op.summaries
    if s.user_id != op.user_id or ctx.tenant(s.namespace) != op.user_id:
        raise InvalidNamespaceError(
            f"Namespace {s.namespace!r} does not belong to user {op.user_id!r}.")
    statement = ssql.with_trust(op.user_id, ns_text(s.namespace), start=s.start,
                                end=s.end, now=s.now or ctx.now(), limit=s.limit)
    # On Citus, as recall: one call the user's worker runs from its kept plan, where
    # the statement would be planned again on the worker on every turn.
    rows = yield Query(*statement, last=True, parts=lambda: (
        citus.on_shard(op.user_id, statement, ssql.WITH_TRUST_ROW),))
    return TurnReads(learned_trust(rows[0]["trust"] if rows else []),
                          [row_to_item(r) for r in rows if r["key"] is not None])


# -- ops ----------------------------------------------------------------------------------


@operation(_recall, free=True, async_commit=True)
class RecallOp(NamedTuple):
    """Hybrid candidate retrieval for one user (result: ``list[Candidate]``).

    Attributes:
        user_id: The tenant.
        scopes: Third namespace labels to search: profile names and/or ``"identity"``.
        query: Text for vector and full-text search; ``None`` returns pinned only
            (plus reference matches when ``refs`` is given).
        refs: Normalised references for exact lookup.
        statuses: Statuses eligible for retrieval.
        per_source: Candidates taken from each strategy.
        now: Time for expiry checks; the store clock when ``None``.
        keyword: Ranking of the full-text strategy: ``"bm25"`` or ``"cover_density"``.
        window: ``(start, end)``: also find memories that occurred in this period
            (strategy ``"time"``).
        link_types: Walk one hop over these link types from the best hits of the
            other strategies (strategy ``"link"``); empty: no walk.
        link_seeds: How many of each strategy's best hits seed the walk.
        seed_min_similarity: A vector hit seeds the walk only with this similarity.
        open_questions: Add up to this many open loops whose references overlap those
            of the best hits or ``refs`` (strategy ``"open_question"``).
        ref_max_share: References carried by more than this share of the user's
            memories are ignored by the reference strategy.
        due_window: ``(start, end)``: add up to ``due_limit`` open loops due in this
            period, whatever the query (strategy ``"due"``).
        due_limit: How many due open loops at most (0: none).
        standing: How many preferences on how to answer (policy ``adapt``) join the
            candidates whatever the query (strategy ``"standing"``; 0: none).
        max_terms: The full-text search ORs at most this many distinct words of
            ``query`` (its longest; see ``langmem_layer.sql.candidates.cap_terms``).
        embed_text: The text embedded for the vector strategy (``None``: ``query``).
        context: How many memories the context strategy takes, by their context
            vectors (``store/ops/context.py``; 0: none).
        context_floor: The similarity to the query a context vector must reach.
    """

    user_id: str
    scopes: tuple[str, ...]
    query: str | None = None
    refs: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ("active",)
    per_source: int = 40
    now: datetime | None = None
    keyword: str = "bm25"
    window: tuple[datetime, datetime] | None = None
    link_types: tuple[str, ...] = ()
    link_seeds: int = 10
    seed_min_similarity: float | None = None
    open_questions: int = 0
    ref_max_share: float = 1.0
    due_window: tuple[datetime, datetime] | None = None
    due_limit: int = 0
    max_terms: int = 128
    standing: int = 0
    embed_text: str | None = None
    context: int = 0
    context_floor: float = -1.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory found by at least one retrieval strategy, before ranking.

    ``ranks`` maps strategy (``"vector"``, ``"keyword"``, ``"ref"``, ``"pinned"``) to
    the memory's 0-based rank in that strategy's list. ``linked``: the keys of the
    other candidates it is linked to (either direction, the walk's link types), when
    the recall statement read them (the link walk found something); ``None`` when not
    read.
    """

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    similarity: float | None
    ranks: dict[str, int] = field(default_factory=dict)
    linked: tuple[str, ...] | None = None


@operation(_summary_candidates, free=True, async_commit=True)
class SummaryCandidatesOp(NamedTuple):
    """A user's active temporal summaries in ``namespace`` (or below) whose period
    overlaps ``start`` .. ``end`` (UTC ISO text), newest first (result: ``list[Item]``):
    the narrative arc's candidates, read through an index of summaries only."""

    user_id: str
    namespace: tuple[str, ...]
    start: str
    end: str
    limit: int = 12
    now: datetime | None = None


@operation(_turn_reads, free=True, async_commit=True)
class TurnReadsOp(NamedTuple):
    """The reads a turn adds to its recall, in one statement (result: ``TurnReads``):
    the user's learned trust and ``summaries``. ``summaries`` is ``user_id``'s."""

    user_id: str
    summaries: SummaryCandidatesOp


@dataclass
class TurnReads:
    """What a ``TurnReadsOp`` read."""

    learned: LearnedTrust
    summaries: list[Any]
