"""Recall: hybrid retrieval, ranking and reinforcement, and the memory block."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage

from langmem_layer.flow import Env, Flow, StoreCall, require_user, scopes_for
from langmem_layer.knowledge import document_lines
from langmem_layer.message_log import recent_lines, recent_op, short_term
from langmem_layer.read.block import ContextBlock, build_context_block
from langmem_layer.read.narrative import pick_summary, turn_ops, with_narrative
from langmem_layer.read.query import (
    asks_upcoming,
    bounded,
    is_broad,
    understand,
    without_refs,
)
from langmem_layer.read.rank import UNASKED_SOURCES, rank_candidates
from langmem_layer.read.rerank import RerankQuery, asks_when
from langmem_layer.store import ops as mops
from langmem_layer.store.ops.trust import LearnedTrust
from langmem_layer.types import Kind, Layer, Policy, Recalled, memory_namespace, normalize_ref

__all__ = ["BlockInputs", "block_inputs_flow", "block_memories", "broad_ops", "context_block",
           "rank", "recall", "recall_op", "rerank_query", "with_core_facts"]

#: How far ahead a question about what is coming up looks for open loops.
UPCOMING_DAYS = 45
#: Kinds a broad question ("what do you know about me?") is answered with.
_CORE_KINDS = frozenset({Kind.PROFILE_FACT.value, Kind.PREFERENCE.value})
#: Memories read per scope to choose a broad question's core facts from.
_CORE_SCAN = 200
#: Strategies whose memories are in a block whatever their relevance: those that come
#: whatever the question, and open questions (added after the ranked ones too).
_EXEMPT = UNASKED_SOURCES | {"open_question"}
#: A block line's tokens besides its memory's text ("- ", the newline), about.
_LINE_TOKENS = 2


def recall_op(env: Env, user_id: str, query: str | None, *, profile: str | None,
              now: datetime, refs: Sequence[str] = (), walk_links: bool = True
              ) -> mops.RecallOp:
    """The candidate retrieval for ``query``, from the settings; every recall builds it here.

    The query is read first (``langmem_layer.read.query.understand``): the references
    it names join ``refs`` for exact lookup, and a period it names ("in May 2023", "last
    week") adds the memories that occurred then; unless ``embed_query_refs``, the query is
    embedded without the references it names
    (``langmem_layer.read.query.without_refs``). ``per_source`` is always
    ``candidates_per_source``: ranking places the end of a list there
    (``langmem_layer.read.rank.rank_candidates``).

    Args:
        env: The layer's settings.
        user_id: The tenant.
        query: The text to search for (``None``: pinned memories and ``refs`` only).
        profile: The profile searched with the user's identity memories.
        now: The time expiry, the period and decay are measured against.
        refs: References to look up besides those the query names.
        walk_links: Also walk one hop over links from the best hits (strategy
            ``"link"``); its scores need a second round trip (``rank``).
    """
    st = env.settings
    info = understand(query, now, slack_days=st.temporal_slack_days, refs=st.query_refs,
                      window=st.temporal_window)
    wanted = tuple(dict.fromkeys([normalize_ref(r) for r in refs] + list(info.refs)))
    return mops.RecallOp(
        require_user(user_id),
        scopes_for(env, profile),
        query=None if query is None else info.text,
        refs=tuple(r for r in wanted if r),
        per_source=st.candidates_per_source,
        now=now,
        keyword=st.keyword_ranking,
        window=(info.window.start, info.window.end) if info.window else None,
        link_types=tuple(st.link_types) if walk_links else (),
        link_seeds=st.link_seeds,
        # A vector hit below the floor is dropped, so it must not pull in neighbours.
        seed_min_similarity=min(st.similarity_floor, st.episodic_similarity_floor),
        open_questions=st.open_question_limit,
        ref_max_share=st.ref_max_share,
        # Open loops due soon, or past due within the grace period, come back whatever
        # the query (the lifecycle closes them after the grace period).
        # A question about what is coming up looks further ahead (UPCOMING_DAYS).
        due_window=(now - timedelta(days=st.lifecycle_loop_grace_days),
                    now + (timedelta(days=UPCOMING_DAYS) if asks_upcoming(info.text)
                           else timedelta(hours=st.due_window_hours))),
        due_limit=st.due_limit,
        max_terms=st.max_query_terms,
        standing=st.standing_preferences,
        # The names the query gives are matched exactly (refs, keywords), not embedded.
        embed_text=(without_refs(info.text, info.refs)
                    if info.refs and not st.embed_query_refs else None),
        context=st.context_candidates,
        context_floor=st.context_similarity_floor,
    )


def broad_ops(env: Env, user_id: str, query: str | None, *, profile: str | None) -> list[Any]:
    """For a broad question about the user, one read per scope of their active memories
    (see ``with_core_facts``); none for any other question."""
    if not is_broad(query):
        return []
    from langgraph.store.base import SearchOp

    return [SearchOp(memory_namespace(user_id, scope), {"status": {"$in": ["active"]}},
                     _CORE_SCAN) for scope in scopes_for(env, profile)]


def with_core_facts(env: Env, candidates: Sequence[mops.Candidate],
                    found: Sequence[Sequence[Any]]) -> list[mops.Candidate]:
    """``candidates`` plus the user's core facts, as read by ``broad_ops``.

    A broad question resembles no one memory, so vector and keyword search find little
    and the floor drops the rest. Its answer is who the user is: their facts and
    preferences that may be spoken (identity layer first, then by salience and
    recency), up to ``recall_limit``, found as if the question had named them
    (strategy ``ref``), so they pass the floor and are ranked with the rest.
    """
    items = [i for group in found for i in group
             if i.value.get("kind") in _CORE_KINDS and i.value.get("policy") != Policy.AVOID]
    items.sort(key=lambda i: (i.value.get("layer") != Layer.IDENTITY.value,
                              -float(i.value.get("salience") or 0.0),
                              -i.updated_at.timestamp()))
    out = list(candidates)
    where = {c.key: n for n, c in enumerate(out)}
    for rank_, item in enumerate(items[: env.settings.recall_limit]):
        if item.key in where:
            c = out[where[item.key]]
            out[where[item.key]] = replace(c, ranks={"ref": rank_, **c.ranks})
        else:
            out.append(mops.Candidate(item.namespace, item.key, item.value, item.created_at,
                                      item.updated_at, None, {"ref": rank_}))
    return out


def rank(env: Env, user_id: str, candidates: Sequence[mops.Candidate], *, limit: int,
         now: datetime, reinforce: bool = True, learned: LearnedTrust | None = None,
         names: Sequence[str] = (), matching: bool = False,
         op: mops.RecallOp | None = None) -> Flow[list[Recalled]]:
    """Rank what a ``recall_op`` found, and reinforce what is returned.

    When the link walk found something, the links between the candidates spread a
    strong hit's score to the memories linked to it. The recall statement reads them
    with the candidates; only candidates added afterwards (a broad question's core
    facts) cost a round trip to read them. ``names``: the references the query names
    (the subjects it asks about, for ``subject_focus``). ``op``: the recall that found
    them, whose question the reranking stage reads. ``matching``: rank as a search
    (only what matches the question; ``rank_candidates``'s
    ``search_floor``).
    """
    st = env.settings
    links: dict[str, set[str]] = {}
    if any("link" in c.ranks for c in candidates):
        keys = {c.key for c in candidates}
        pairs: list[tuple[str, str]]
        if all(c.linked is not None for c in candidates):
            pairs = [(c.key, other) for c in candidates for other in c.linked or ()]
        else:
            (found,) = yield StoreCall([mops.LinksOp(user_id, tuple(sorted(keys)))])
            allowed = set(st.link_types)
            pairs = [(ln.src_key, ln.dst_key) for ln in found if ln.link_type in allowed]
        for src, dst in pairs:
            if src in keys and dst in keys:
                links.setdefault(src, set()).add(dst)
                links.setdefault(dst, set()).add(src)
    ranked = rank_candidates(
        candidates, now=now, settings=st, limit=limit, trust=env.trust, links=links,
        learned=learned, names=names, query=rerank_query(env, op, names),
        search_floor=st.search_similarity_floor if matching else None)
    if reinforce and ranked:
        yield StoreCall([mops.TouchOp(user_id, tuple(r.key for r in ranked), now)])
    return ranked


def rerank_query(env: Env, op: mops.RecallOp | None, names: Sequence[str]) -> RerankQuery:
    """What the reranking stage reads of ``op``'s question: whether it asks when, the
    period it names (without the slack recall widens it by), the names it gives."""
    if op is None:
        return RerankQuery(False, None, frozenset(names))
    slack = timedelta(days=env.settings.temporal_slack_days)
    window = None if op.window is None else (op.window[0] + slack, op.window[1] - slack)
    return RerankQuery(asks_when(op.query), window, frozenset(names))


def recall(env: Env, user_id: str, query: str | None, *, profile: str | None, limit: int,
           now: datetime, refs: Sequence[str] = (), reinforce: bool = True,
           matching: bool = False) -> Flow[list[Recalled]]:
    """Hybrid retrieval, ranking, and reinforcement of what is returned.

    One round trip fetches the candidates of every strategy (``recall_op``), a
    second (only when the link walk found something) the links between them. With
    ``matching`` (a search) only what matches the question comes back, and a summary
    only for a question that names a period.
    """
    user_id = require_user(user_id)
    query = bounded(query) if query else query  # a question of any length: see bounded()
    op = recall_op(env, user_id, query, profile=profile, now=now, refs=refs)
    broad = broad_ops(env, user_id, query, profile=profile)
    extra = turn_ops(env, user_id, query, profile=profile, now=now)
    candidates, reads, *found = yield StoreCall([op, *extra, *broad])
    if broad:
        candidates = with_core_facts(env, candidates, found)
    ranked = yield from rank(env, user_id, candidates, limit=limit, now=now,
                             reinforce=reinforce, learned=reads.learned, names=op.refs,
                             matching=matching and bool(query), op=op)
    if not matching or op.window is not None:
        ranked = with_narrative(ranked, pick_summary(reads.summaries, query, now))
    return ranked


def context_block(env: Env, recalled: Sequence[Recalled], *,
                  recent: Sequence[mops.LoggedMessage] = (),
                  short_term: Sequence[BaseMessage] = (),
                  recently_spoken: Sequence[str] = (), now: datetime,
                  documents: Sequence[Document] = ()) -> ContextBlock:
    """The memory block for the prompt: the one renderer of the nodes and the direct API.

    Pure (no I/O). The user's recent history from other threads (``recent``) follows
    the memories with whatever budget they left; a message whose text is already in
    the active thread's short-term window (``short_term``) is not repeated, nor one
    that is the source of a recalled ``avoid`` memory (the history query already drops
    turns that are the source of any stored one). ``documents`` retrieved from the
    layer's knowledge source get their own section (see ``langmem_layer.knowledge``).
    """
    st = env.settings
    avoided = {r.record.source.message_id for r in recalled
               if r.record.policy == Policy.AVOID and r.record.source.message_id}
    lines = recent_lines([m for m in recent if m.message_id not in avoided], env.counter,
                         max_line_tokens=st.recent_history_line_tokens,
                         exclude_texts=[m.text for m in short_term])
    return build_context_block(
        recalled,
        budget_tokens=st.context_budget_tokens,
        counter=env.counter,
        semantic_share=st.semantic_share,
        recently_spoken=recently_spoken,
        now=now,
        recent_history=lines,
        documents=document_lines(documents, env.counter, max_tokens=st.knowledge_doc_tokens),
        documents_share=st.knowledge_share,
        target_tokens=st.block_target_tokens or None,
    )


def block_memories(env: Env, recalled: Sequence[Recalled]) -> list[Recalled]:
    """What a block is filled from: ``recalled`` without the ranked memories under the
    relevance floor (``block_min_relevance``) or past the token target.

    Pinned memories, open questions, open loops due now and standing preferences stay
    whatever their relevance: they are in the block for what they are, not for
    resembling the question. Of the rest, those past ``block_target_tokens`` (counted
    on their text, with a quarter more for the block's own lines: the block skips a
    memory that does not fit and may place a shorter one after it) cannot be placed, so
    they are not carried in the graph's state.
    """
    st = env.settings
    target = st.block_target_tokens * 5 // 4 if st.block_target_tokens else None
    kept: list[Recalled] = []
    used = 0
    for r in recalled:
        if r.relevance is None or not _EXEMPT.isdisjoint(r.sources):
            kept.append(r)
        elif r.relevance >= st.block_min_relevance and (target is None or used < target):
            used += env.counter.count(r.record.content) + _LINE_TOKENS
            kept.append(r)
    return kept


@dataclass(frozen=True, slots=True)
class BlockInputs:
    """What a block is rendered from: the recall, the recent history, the thread window."""

    recalled: list[Recalled]
    recent: Sequence[mops.LoggedMessage]
    short_term: Sequence[BaseMessage]


def block_inputs_flow(env: Env, user_id: str, query: str | None, *, profile: str | None,
                      thread_id: str | None = None, messages: Sequence[BaseMessage] = (),
                      now: datetime) -> Flow[BlockInputs]:
    """What ``assemble_context`` renders the block for ``query`` from, in one round trip.

    Reads what ``load_memory`` reads for the block — the recall and the user's recent
    messages outside ``thread_id`` — and takes the thread's short-term window from
    ``messages``; ``context_block`` renders them. Like ``load_memory`` it does
    not reinforce: the nodes reinforce with the finished turn, and rendering a block
    is no use of the memories in it.

    Args:
        env: The layer's settings, counter and trust.
        user_id: The tenant.
        query: What the turn asks (the last human message's text).
        profile: The run's profile.
        thread_id: The active thread, whose messages are not "recent history".
        messages: The active thread's messages, oldest first (the graph state's).
        now: The turn's time.
    """
    user_id = require_user(user_id)
    st = env.settings
    query = bounded(query) if query else query  # a question of any length: see bounded()
    op = recall_op(env, user_id, query, profile=profile, now=now)
    ops: list[Any] = [op]
    if st.recent_history_limit:
        ops.append(recent_op(env, user_id, profile=profile, thread_id=thread_id, now=now))
    broad = broad_ops(env, user_id, query, profile=profile)
    extra = turn_ops(env, user_id, query, profile=profile, now=now)
    candidates, reads, *found = yield StoreCall([ops[0], *extra, *ops[1:], *broad])
    if broad:
        candidates = with_core_facts(env, candidates, found[len(found) - len(broad):])
        found = found[: len(found) - len(broad)]
    recalled = yield from rank(env, user_id, candidates, limit=st.block_memory_limit, now=now,
                               reinforce=False, learned=reads.learned, names=op.refs,
                               op=op)
    recalled = with_narrative(block_memories(env, recalled),
                              pick_summary(reads.summaries, query, now))
    return BlockInputs(recalled, found[0] if found else (),
                       short_term(messages, st.short_term_messages))
