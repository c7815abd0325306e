"""Recall: hybrid retrieval, ranking and reinforcement, and the memory block."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langmem_layer.read.block import ContextBlock, build_context_block
from langmem_layer.read.query import understand
from langmem_layer.read.rank import rank_candidates
from langmem_layer.runner import Env, Flow, StoreCall, require_user, scopes_for
from langmem_layer.store import ops as mops
from langmem_layer.types import (
    Recalled,
    normalize_ref,
)

__all__ = ["context_block", "recall"]


def recall(env: Env, user_id: str, query: str | None, *, profile: str | None, limit: int,
           now: datetime, refs: Sequence[str] = (), reinforce: bool = True
           ) -> Flow[list[Recalled]]:
    """Hybrid retrieval, ranking, and reinforcement of what is returned (R4.1–R4.5).

    The query is read first (:func:`langmem_layer.read.query.understand`): the references it
    names join ``refs`` for exact lookup, and a period it names ("in May 2023", "last
    week") adds the memories that occurred then. One round trip fetches the candidates
    of every strategy, a second (only when the link walk found something) the links
    between them, so a memory linked to a strong hit inherits part of its score.
    """
    user_id = require_user(user_id)
    st = env.settings
    info = understand(query, now, slack_days=st.temporal_slack_days, refs=st.query_refs,
                      window=st.temporal_window)
    wanted = tuple(dict.fromkeys([normalize_ref(r) for r in refs] + list(info.refs)))
    op = mops.RecallOp(
        user_id,
        scopes_for(env, profile),
        query=query,
        refs=tuple(r for r in wanted if r),
        per_source=st.candidates_per_source,
        now=now,
        keyword=st.keyword_ranking,
        window=(info.window.start, info.window.end) if info.window else None,
        link_types=tuple(st.link_types),
        link_seeds=st.link_seeds,
        # A vector hit below the floor is dropped, so it must not pull in neighbours.
        seed_min_similarity=min(st.similarity_floor, st.episodic_similarity_floor),
        open_questions=st.open_question_limit,
        ref_max_share=st.ref_max_share,
    )
    (candidates,) = yield StoreCall([op])
    links: dict[str, set[str]] = {}
    if any("link" in c.ranks for c in candidates):
        keys = {c.key for c in candidates}
        (found,) = yield StoreCall([mops.LinksOp(user_id, tuple(sorted(keys)))])
        allowed = set(st.link_types)
        for ln in found:
            if ln.link_type in allowed and ln.src_key in keys and ln.dst_key in keys:
                links.setdefault(ln.src_key, set()).add(ln.dst_key)
                links.setdefault(ln.dst_key, set()).add(ln.src_key)
    ranked = rank_candidates(
        candidates, now=now, settings=st, limit=limit, trust=env.trust, links=links
    )
    if reinforce and ranked:
        yield StoreCall([mops.TouchOp(user_id, tuple(r.key for r in ranked), now)])
    return ranked


def context_block(env: Env, recalled: Sequence[Recalled], *, recently_spoken: Sequence[str],
                  now: datetime) -> ContextBlock:
    """The memory block for the prompt (pure; no I/O)."""
    return build_context_block(
        recalled,
        budget_tokens=env.settings.context_budget_tokens,
        counter=env.counter,
        semantic_share=env.settings.semantic_share,
        recently_spoken=recently_spoken,
        now=now,
    )


