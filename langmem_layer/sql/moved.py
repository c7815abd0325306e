"""A memory's lifecycle state as readers see it: the value with the last moves laid over.

A lifecycle move (``langmem_layer.sql.transitions``: a status change, an open loop
closed, the ``needs_revalidation`` flag set or cleared) writes the keys it changes
(``MOVED_KEYS``) to the unindexed ``moved`` column and the time of a status move to
the unindexed ``moved_at`` column (migration 27), never ``value`` nor ``updated_at``:
both are read by indexes of ``langmem_items``, and a row update that changes no
indexed column and fits on its page is made in place (HOT), without a new entry in
each of the table's indexes. Readers lay ``moved`` over the value and take the later
of ``updated_at`` and ``moved_at``; a write of the value folds ``moved`` into it and
clears both columns (NULL: nothing moved since the last write).

Every expression is over ``langmem_items i`` and does no I/O.
"""

from __future__ import annotations

__all__ = [
    "CLEAR",
    "MOVED_KEYS",
    "STATUS",
    "UPDATED",
    "folded",
    "moved",
    "moved_text",
    "open_loop",
]

#: The keys of a memory's value a lifecycle move may change. ``moved`` holds the whole
#: of each (``history`` the full list): ``||`` replaces a key, it does not merge it.
MOVED_KEYS = ("status", "loop_status", "metadata", "history")

#: The time a memory was last written: a status move counts as a write.
UPDATED = "greatest(i.updated_at, i.moved_at)"

#: The assignments of a write of the value (after folding ``moved`` into it).
CLEAR = "moved = NULL, moved_at = NULL"


def moved(name: str, *, alias: str = "i") -> str:
    """Field ``name`` of the value as jsonb, the move's version if a move wrote it.

    ``coalesce`` is exact: ``moved -> name`` is SQL NULL only when ``moved`` lacks the
    key (a JSON null in it is not SQL NULL).
    """
    if name not in MOVED_KEYS:
        return f"{alias}.value -> '{name}'"
    return f"coalesce({alias}.moved -> '{name}', {alias}.value -> '{name}')"


def moved_text(name: str, *, alias: str = "i") -> str:
    """Field ``name`` of the value as text (``->>``), the move's version if it wrote it.

    For the fields a move writes as strings (``status``, ``loop_status``), never null.
    """
    if name not in MOVED_KEYS:
        return f"{alias}.value ->> '{name}'"
    return f"coalesce({alias}.moved ->> '{name}', {alias}.value ->> '{name}')"


#: A memory's status as readers see it.
STATUS = moved_text("status")


def folded(*, alias: str = "i") -> str:
    """The value with ``moved`` folded in: what a write of the value starts from."""
    return f"({alias}.value || coalesce({alias}.moved, '{{}}'::jsonb))"


def open_loop(*, alias: str = "i") -> str:
    """An open loop still open, as readers see it.

    The partial indexes of open loops (``langmem_items_open_loops_idx``,
    ``langmem_items_due_idx``) read ``value``: a loop a move closed stays in them. The
    index's own predicate comes first, word for word, so the planner still uses it;
    the moved loop status is checked at the row.
    """
    a = alias
    return (f"({a}.value ->> 'kind') = 'open_loop' "
            f"AND coalesce({a}.value ->> 'loop_status', 'open') <> 'closed' "
            f"AND coalesce({a}.moved ->> 'loop_status', 'open') <> 'closed'")
