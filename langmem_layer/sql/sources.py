"""The retrieval strategies of recall, each declared once.

Recall's SQL (``langmem_layer.sql.candidates``) gives every candidate its rank in each
strategy's list as a column ``<column>_rank``; the store hands them on by ``name``
(``Candidate.ranks``); ranking (``langmem_layer.read.rank``) reads from here which of
them it fuses, which count as evidence beyond the embedding, and their default
weights. Adding a strategy touches this registry and the SQL builder's CTE for it.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["RECALL_SOURCES", "RecallSource"]


class RecallSource(NamedTuple):
    """One retrieval strategy of recall.

    Attributes:
        name: Its name in ``Candidate.ranks`` and ``MemorySettings.source_weights``.
        column: Its CTE in the recall SQL, and the prefix of its rank column.
        fused: Its ranks enter Reciprocal Rank Fusion (the link walk is spread apart,
            open questions and pinned memories bypass ranking).
        lexical: A hit is evidence of relevance besides the embedding, so it skips the
            similarity floor.
        default_weight: Its weight when ``source_weights`` names none (``None``: not
            weighted).
        unasked: Its memories come back whatever the question (the store bounds how
            many): ranking adds them after the ranked ones, and the block takes them
            whatever their relevance.
    """

    name: str
    column: str
    fused: bool
    lexical: bool
    default_weight: float | None
    unasked: bool = False


#: Every strategy, in the order of the recall SQL's rank columns.
RECALL_SOURCES: tuple[RecallSource, ...] = (
    RecallSource("vector", "vec", fused=True, lexical=False, default_weight=1.0),
    RecallSource("keyword", "kw", fused=True, lexical=True, default_weight=1.0),
    RecallSource("ref", "rf", fused=True, lexical=True, default_weight=1.0),
    # A memory of the period the question names: the period is the evidence (the
    # strategy takes those dating something beside the most similar, and "Yesterday I
    # met artists in Boston" resembles "Which city was he in on October 3?" hardly at
    # all), so its own embedding need not clear the similarity floor.
    RecallSource("time", "tw", fused=True, lexical=True, default_weight=1.0),
    # A memory whose context vector (the memory with those before it in its thread) is
    # like the question: its context is the evidence, so its own embedding need not
    # clear the similarity floor.
    RecallSource("context", "cx", fused=True, lexical=True, default_weight=1.0),
    RecallSource("link", "lk", fused=False, lexical=True, default_weight=0.5),
    RecallSource("open_question", "oq", fused=False, lexical=True, default_weight=None),
    # Open loops due soon or just past due, whatever the query (the lifecycle's follow-ups).
    RecallSource("due", "du", fused=False, lexical=True, default_weight=None, unasked=True),
    # Preferences on how to answer (policy adapt), whatever the query: they shape every
    # reply, so no question has to resemble them.
    RecallSource("standing", "sp", fused=False, lexical=True, default_weight=None,
                 unasked=True),
    RecallSource("pinned", "pin", fused=False, lexical=False, default_weight=None),
)

