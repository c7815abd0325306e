"""The memory block placed in the agent's prompt.

Pure functions, no I/O. ``build_context_block`` takes recalled memories ranked
best-first and renders the ones that fit a token budget into sections that tell the
model how each memory may surface.

Format (stable; tests pin it)::

    ## What you remember about this user

    ### ALWAYS-KNOWN
    - <content>

    ### RELEVANT FOR THIS TURN
    - <content>
    - <content> [due 2025-03-01] [overdue]

    ### USE SILENTLY
    - <content>

* The first line is the header ``## What you remember about this user``.
* Each non-empty section follows in ``SECTIONS`` order as a ``### <SECTION NAME>``
  line and one ``- <content>`` line per memory, in input (rank) order.
* The header and the sections are separated by one blank line; no line has trailing
  whitespace and the text does not end with a newline.
* Content whitespace (including newlines) is collapsed to single spaces, so a memory
  is always exactly one line and can never forge a heading.
* An open loop (``kind=open_loop``) with a due date gets `` [due YYYY-MM-DD]`` (UTC
  date); `` [overdue]`` follows when ``now`` is given, ``due_at < now`` and the loop is
  not closed.
* An open loop recall found because it is due now (source ``due``: due within
  ``due_window_hours``, or past due within the grace period) is placed in
  ``OPEN THREADS (pick up)`` whatever its policy (``avoid`` still wins), so it comes
  back on the next turn whatever the question; once its due date has passed its line
  ends `` [due YYYY-MM-DD] [overdue] [follow up: ask how it went]``.
  Like a ``speak`` memory, one placed in the last two turns (``recently_spoken``)
  goes to ``USE SILENTLY`` instead.
* A semantic fact flagged ``needs_revalidation`` (metadata; the lifecycle job sets it
  when a fact has gone unconfirmed for ``lifecycle_revalidate_after_days``) that is
  placed in ``RELEVANT FOR THIS TURN`` gets
  `` [unconfirmed since YYYY-MM: confirm if natural]`` (the month it was flagged): the
  agent may check it with the user in passing. At most one line per block asks, the
  best-ranked that fits; ``ContextBlock.revalidate`` names it.
* When ``recent_history`` lines are given (the user's messages from other threads,
  the fourth priority), those that fit follow the memory sections under
  ``### RECENT CONVERSATIONS (other threads)``, one ``- <speaker>: <text>`` line each,
  oldest first. They are not memories: they are in no placement and in no
  ``SECTIONS`` entry, and they are never speakable.
* When ``documents`` are given (lines retrieved from a knowledge source beside memory,
  ``"[<source>] <text>"``), those that fit follow the memory sections under
  ``### RELEVANT DOCUMENTS (knowledge base)``, best first, before the recent history.
  Like the history they are not memories: in no placement and no ``SECTIONS``
  entry.
* A temporal summary (``kind=temporal_summary``) that is not ``avoid`` goes in
  ``### NARRATIVE ARC (earlier conversations, summarized)``, after the memory sections
  and before recent history, with at most ``NARRATIVE_SHARE`` of the budget group 1
  leaves; it is not a ``SECTIONS`` entry.
* When nothing is placed the text is ``""``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from langmem_layer.tokens import TokenCounter
from langmem_layer.types import Kind, Layer, LoopStatus, MemoryRecord, Policy, Recalled, to_utc

__all__ = [
    "ALWAYS_KNOWN",
    "AVOID",
    "DOCUMENTS",
    "FACTCHECK",
    "HEADER",
    "NARRATIVE",
    "OPEN_THREADS",
    "RECENT_HISTORY",
    "RELEVANT",
    "SECTIONS",
    "SILENT",
    "SPEAKABLE_SECTIONS",
    "ContextBlock",
    "build_context_block",
    "section_for",
]

HEADER = "## What you remember about this user"

ALWAYS_KNOWN = "ALWAYS-KNOWN"
RELEVANT = "RELEVANT FOR THIS TURN"
SILENT = "USE SILENTLY"
AVOID = "DO NOT SURFACE UNLESS THE USER DOES"
OPEN_THREADS = "OPEN THREADS (pick up)"
FACTCHECK = "DO NOT CONTRADICT"
#: The trailing section of the user's recent messages from other threads (not memories).
RECENT_HISTORY = "RECENT CONVERSATIONS (other threads)"
#: Documents retrieved from the layer's knowledge source for this turn (not memories).
DOCUMENTS = "RELEVANT DOCUMENTS (knowledge base)"
#: The narrative arc: the temporal summary recall chose for the turn.
NARRATIVE = "NARRATIVE ARC (earlier conversations, summarized)"
#: Share of the budget left after group 1 the narrative arc may use.
NARRATIVE_SHARE = 0.3

#: Sections in output order.
SECTIONS: tuple[str, ...] = (ALWAYS_KNOWN, RELEVANT, OPEN_THREADS, FACTCHECK, SILENT, AVOID)
#: Sections whose memories the agent may mention unprompted.
SPEAKABLE_SECTIONS = frozenset({ALWAYS_KNOWN, RELEVANT, OPEN_THREADS})

_POLICY_SECTION = {
    Policy.SPEAK: RELEVANT,
    Policy.ADAPT: SILENT,
    Policy.AVOID: AVOID,
    Policy.CONTINUE: OPEN_THREADS,
    Policy.FACTCHECK: FACTCHECK,
}
_SEMANTIC_LAYERS = frozenset({Layer.SEMANTIC, Layer.IDENTITY})
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """The rendered memory block and what went into it.

    Attributes:
        text: The block to put in the prompt; ``""`` when nothing is placed.
        placements: Memory key -> section name, for every placed memory.
        tokens: Tokens of ``text`` per the counter; never more than ``budget``.
        budget: The token budget the block was built for.
        dropped: Keys (input order) that did not fit the budget.
        demoted: Placed keys demoted from speak to ``USE SILENTLY``.
        history: How many ``recent_history`` lines were placed.
        revalidate: The placed memory the block asks the agent to confirm (a fact
            flagged ``needs_revalidation``), or None; at most one per block.
        documents: How many ``documents`` lines were placed.
    """

    text: str
    placements: dict[str, str]
    tokens: int
    budget: int
    dropped: tuple[str, ...]
    demoted: tuple[str, ...]
    history: int = 0
    revalidate: str | None = None
    documents: int = 0


def section_for(record: MemoryRecord, *, demote_speak: bool = False) -> str:
    """The section a memory belongs in, from its surface policy and pinned flag.

    ``avoid`` wins over ``pinned``: an avoid memory is never put in a speakable section.
    Otherwise pinned memories are ``ALWAYS-KNOWN``.

    Args:
        record: The memory.
        demote_speak: Place a non-pinned ``speak`` memory in ``USE SILENTLY`` instead,
            because it was surfaced recently.

    Returns:
        One of ``SECTIONS``.
    """
    if record.policy == Policy.AVOID:
        return AVOID
    if record.pinned:
        return ALWAYS_KNOWN
    if record.policy == Policy.SPEAK and demote_speak:
        return SILENT
    return _POLICY_SECTION[record.policy]


def build_context_block(
    recalled: Sequence[Recalled],
    *,
    budget_tokens: int,
    counter: TokenCounter,
    semantic_share: float = 0.6,
    recently_spoken: Collection[str] = (),
    now: datetime | None = None,
    recent_history: Sequence[str] = (),
    documents: Sequence[str] = (),
    documents_share: float = 0.5,
    target_tokens: int | None = None,
) -> ContextBlock:
    """Render the memories that fit ``budget_tokens`` into the sectioned block.

    Memories are placed in priority groups, each keeping the input (rank) order:

    1. pinned memories and procedural-layer memories, against the whole budget;
    2. semantic- and identity-layer memories, which may use at most ``semantic_share``
       of what is left under the memory cap after group 1;
    3. episodic-layer memories, with whatever remains under the memory cap (including
       what group 2 left);
    4. ``documents`` (knowledge-base lines), best first, which may use at most
       ``documents_share`` of the budget the memories left;
    5. ``recent_history`` lines, newest first, with whatever remains after that,
       until one does not fit (the kept lines are the latest, without gaps).

    A memory that does not fit is dropped and later, smaller ones may still fit. Fit is
    judged on the token count of the whole rendered text (header, headings and lines),
    so ``tokens <= budget_tokens`` always holds. A repeated key is placed only once.

    The memory cap of groups 2 and 3 (and the narrative arc) is ``target_tokens`` when
    given, else the budget: ranked memories fill the block up to a target sized to what
    answers a turn, not to the whole budget, and stop there even when more would fit.

    Args:
        recalled: Recalled memories, best first.
        budget_tokens: Maximum tokens of the rendered block.
        counter: Counts tokens of the rendered text.
        semantic_share: Cap of group 2, as a share of the budget left after group 1.
        recently_spoken: Keys surfaced as ``speak`` (or as due open loops) in the last
            two turns; such memories are demoted to ``USE SILENTLY``.
        now: Current time, to flag overdue open loops; ``None`` never flags.
        recent_history: The user's messages from other threads, oldest first, as
            ``"<speaker>: <text>"``; they only get the budget the memories leave.
        documents: Lines retrieved from a knowledge source, best first, as
            ``"[<source>] <text>"``.
        documents_share: Cap of the documents, as a share of the budget the memories
            left.
        target_tokens: The memory cap: ranked memories stop when the block text reaches
            it (``None`` or 0: the budget). Never above ``budget_tokens``.

    Returns:
        The rendered ``ContextBlock``.

    Raises:
        ValueError: If ``budget_tokens`` or ``target_tokens`` is negative, or
            ``semantic_share`` is outside ``[0, 1]``.
    """
    if budget_tokens < 0:
        raise ValueError(f"budget_tokens must be >= 0, got {budget_tokens}")
    if target_tokens is not None and target_tokens < 0:
        raise ValueError(f"target_tokens must be >= 0, got {target_tokens}")
    memory_cap = min(budget_tokens, target_tokens or budget_tokens)
    if not 0.0 <= semantic_share <= 1.0:
        raise ValueError(f"semantic_share must be within [0, 1], got {semantic_share}")
    if not 0.0 <= documents_share <= 1.0:
        raise ValueError(f"documents_share must be within [0, 1], got {documents_share}")
    now_utc = None if now is None else to_utc(now)
    spoken = frozenset(recently_spoken)

    items: list[_Item] = []
    seen: set[str] = set()
    for rank, memory in enumerate(recalled):
        if memory.key in seen:
            continue
        seen.add(memory.key)
        record = memory.record
        due = _due_now(memory)
        spoken_before = not record.pinned and memory.key in spoken
        demote = spoken_before and (record.policy == Policy.SPEAK or due)
        section = section_for(record, demote_speak=demote)
        if due and section not in (AVOID, ALWAYS_KNOWN):
            section = SILENT if demote else OPEN_THREADS
        narrative = record.kind == Kind.TEMPORAL_SUMMARY and section != AVOID
        if narrative:
            section = NARRATIVE
        items.append(
            _Item(
                rank=rank,
                key=memory.key,
                section=section,
                line=_render_line(record, now_utc, follow_up=due),
                group=_NARRATIVE_GROUP if narrative else _priority_group(record),
                demoted=demote,
                confirm=_confirm_suffix(record) if section == RELEVANT else "",
            )
        )

    for n, line in enumerate(recent_history):
        items.append(_Item(rank=len(recalled) + n, key=f"\x00history:{n}",
                           section=RECENT_HISTORY,
                           line="- " + _WHITESPACE.sub(" ", line).strip(),
                           group=_HISTORY_GROUP, demoted=False))
    for n, line in enumerate(documents):
        items.append(_Item(rank=len(recalled) + len(recent_history) + n,
                           key=f"\x00document:{n}", section=DOCUMENTS,
                           line="- " + _WHITESPACE.sub(" ", line).strip(),
                           group=_DOCUMENT_GROUP, demoted=False))

    placed: list[_Item] = []
    dropped: set[str] = set()
    sections: set[str] = set()
    # Costs add up per piece (each line plus its newline, each heading plus its blank
    # line, the header once). Joining pieces can only merge tokens at the seams, so the
    # sum bounds the real count from above; one exact count at the end confirms it.
    header_cost = counter.count(HEADER) + 2
    used = 0
    exact_used = True  # whether `used` is the exact count of the placed text

    def cost(item: _Item) -> int:
        extra = 0 if placed else header_cost
        if item.section not in sections:
            extra += counter.count(f"### {item.section}") + 2
        return extra + counter.count(item.line) + 1

    asked: list[str] = []  # the one memory the block asks to confirm, once placed

    def fit(item: _Item, cap: int) -> bool:
        """Place ``item`` if it fits under ``cap``."""
        nonlocal used, exact_used
        need = cost(item)
        if used + need > cap and not exact_used:
            # Near the edge the estimate's slack matters: settle `used` exactly once.
            used, exact_used = counter.count(_render(placed)), True
        fits = used + need <= cap
        if not fits and used + need - cap <= 3:  # only this item's seams can save it
            exact = counter.count(_render([*placed, item]))
            fits, need = exact <= cap, exact - used
        if fits:
            placed.append(item)
            sections.add(item.section)
            used += need
            exact_used = False
        return fits

    def place(group: int, cap: int) -> None:
        # Recent history is placed newest first and stops at the first line that does
        # not fit: what the agent sees is the latest stretch of conversation, no gaps.
        history = group == _HISTORY_GROUP
        full = False
        for item in reversed(items) if history else items:
            if item.group != group:
                continue
            if full:
                dropped.add(item.key)
                continue
            # A fact to confirm asks with its suffix when that fits, else is placed plainly.
            if item.confirm and not asked and fit(
                    replace(item, line=item.line + item.confirm), cap):
                asked.append(item.key)
            elif not fit(item, cap):
                dropped.add(item.key)
                full = history

    place(1, budget_tokens)
    # The narrative arc gets its own share; what it leaves goes on to the rest.
    place(_NARRATIVE_GROUP, used + int(NARRATIVE_SHARE * max(0, memory_cap - used)))
    # Group 2's cap is measured on the whole text, so it includes what group 1 used.
    place(2, used + int(semantic_share * max(0, memory_cap - used)))
    place(3, memory_cap)
    place(_DOCUMENT_GROUP, used + int(documents_share * (budget_tokens - used)))
    place(_HISTORY_GROUP, budget_tokens)

    text = _render(placed)
    while placed and counter.count(text) > budget_tokens:  # never expected; kept exact
        dropped.add(placed.pop().key)
        text = _render(placed)
    placed_in_order = sorted(placed, key=lambda item: item.rank)
    memories = [item for item in placed_in_order if item.group not in _NOT_MEMORIES]
    return ContextBlock(
        text=text,
        placements={item.key: item.section for item in memories},
        tokens=counter.count(text),
        budget=budget_tokens,
        dropped=tuple(item.key for item in items
                      if item.key in dropped and item.group not in _NOT_MEMORIES),
        demoted=tuple(item.key for item in memories if item.demoted),
        history=sum(item.group == _HISTORY_GROUP for item in placed_in_order),
        revalidate=asked[0] if asked else None,
        documents=sum(item.group == _DOCUMENT_GROUP for item in placed_in_order),
    )


@dataclass(frozen=True, slots=True)
class _Item:
    rank: int
    key: str
    section: str
    line: str
    group: int
    demoted: bool
    confirm: str = ""  # the suffix asking to confirm a fact flagged needs_revalidation


_HISTORY_GROUP = 4
_DOCUMENT_GROUP = 5  # placed before the history, after the memories (see the docstring)
_NARRATIVE_GROUP = 6  # after the memories, before the documents and the history
#: Groups of lines that are not memories (no placement, never "dropped").
_NOT_MEMORIES = frozenset({_HISTORY_GROUP, _DOCUMENT_GROUP})


def _priority_group(record: MemoryRecord) -> int:
    if record.pinned or record.layer == Layer.PROCEDURAL:
        return 1
    if record.layer in _SEMANTIC_LAYERS:
        return 2
    return 3


def _due_now(memory: Recalled) -> bool:
    """Recall brought this open loop back because it is due (source ``due``)."""
    record = memory.record
    return ("due" in memory.sources and record.kind == Kind.OPEN_LOOP
            and record.due_at is not None and record.loop_status != LoopStatus.CLOSED)


def _confirm_suffix(record: MemoryRecord) -> str:
    """The line suffix asking to confirm a semantic fact flagged ``needs_revalidation``,
    dated with the month it was flagged (its creation month when no history says)."""
    if record.layer != Layer.SEMANTIC or record.metadata.get("needs_revalidation") is not True:
        return ""
    flagged = [h.at for h in record.history
               if h.event == "flag" and h.new == "needs_revalidation"]
    since = to_utc(flagged[-1] if flagged else record.occurred_at)
    return f" [unconfirmed since {since:%Y-%m}: confirm if natural]"


def _render_line(record: MemoryRecord, now: datetime | None, *, follow_up: bool = False) -> str:
    line = "- " + _WHITESPACE.sub(" ", record.content).strip()
    if record.kind == Kind.OPEN_LOOP and record.due_at is not None:
        due = to_utc(record.due_at)
        line += f" [due {due:%Y-%m-%d}]"
        if now is not None and due < now and record.loop_status != LoopStatus.CLOSED:
            line += " [overdue]"
            if follow_up:  # it came back because it is due: a thread to pick up
                line += " [follow up: ask how it went]"
    return line


def _render(items: Sequence[_Item]) -> str:
    if not items:
        return ""
    by_section: dict[str, list[_Item]] = {}
    for item in items:
        by_section.setdefault(item.section, []).append(item)
    blocks = [HEADER]
    for section in (*SECTIONS, NARRATIVE, DOCUMENTS, RECENT_HISTORY):
        members = by_section.get(section)
        if members:
            lines = [item.line for item in sorted(members, key=lambda item: item.rank)]
            blocks.append("\n".join([f"### {section}", *lines]))
    return "\n\n".join(blocks)
