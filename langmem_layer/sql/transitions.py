"""SQL of the memory lifecycle: decay, status transitions, purge, history.

Builders return ``(sql, params)`` with named parameters and do no I/O. Every statement
is set-based over ONE user's memories and binds ``user_id`` with an equality predicate.
Pinned memories are exempt from every statement that changes a memory.

Each transition is a candidate query (which memories, and why) and an update that
moves them and appends a ``HistoryEntry`` to the memory's
``history``. A move writes only the unindexed columns ``MOVE_COLUMNS`` (the keys it
changes, whole, and the time of a status move; ``langmem_layer.sql.moved``), never
``value`` nor ``updated_at``, so PostgreSQL can update the row in place (HOT) with no
new index entry; every reader lays the moved keys over the value. A transition's
condition is false once applied, so running the lifecycle again for the same ``now``
changes nothing. A dry run counts the candidates instead. The nightly job sends
``lifecycle_pass``: the rescore and every transition in one statement, each memory
read once and each memory moved written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langmem_layer.sql import Sql, renamed
from langmem_layer.sql.moved import (
    CLEAR,
    MOVED_KEYS,
    STATUS,
    UPDATED,
    folded,
    moved,
    moved_text,
)
from langmem_layer.types import Kind, utc_iso

__all__ = [
    "CUSTOM_PLANS",
    "HALF_LIFE_KINDS",
    "MAX_DECAY_EXPONENT",
    "MAX_HALVINGS",
    "MOVE_COLUMNS",
    "Transition",
    "apply_transition",
    "decay_expression",
    "lifecycle_pass",
    "memory_history",
    "purge_expired",
    "record_outcome",
    "rescore_decay",
    "transitions",
]


#: Kinds that decay by half-life instead of by Ebbinghaus stability.
HALF_LIFE_KINDS = frozenset({Kind.TEMPORAL_SUMMARY, Kind.REFLECTION})
#: The largest exponent decay takes: e^-700 and 0.5^1000 are ~1e-304, nothing in any
#: ranking, while PostgreSQL's exp() and power() raise "underflow" past ~e^-708 (a
#: memory untouched for about two years). Clamped in SQL and in Python alike.
MAX_DECAY_EXPONENT = 700.0
MAX_HALVINGS = 1000.0

_MINE = "i.user_id = %(user_id)s AND i.is_memory"
_NOT_PINNED = "(i.value -> 'pinned') IS DISTINCT FROM 'true'::jsonb"
#: The only columns of ``langmem_items`` a lifecycle move sets: both unindexed (a
#: test reads the indexes' columns from the catalog), so a move can be HOT.
MOVE_COLUMNS = ("moved", "moved_at")


def _field(name: str) -> str:
    """``name`` of the value as every reader sees it (the lifecycle's moves and
    reinforcement's ``access`` laid over it), as text.

    ``VALUE ->> name`` (``langmem_layer.sql.generic_items.VALUE``) without building the
    merged document: the lifecycle reads a few fields of every memory.
    """
    if name in MOVED_KEYS:
        return moved_text(name)
    return (f"(CASE WHEN i.access ? '{name}' THEN i.access ->> '{name}' "
            f"ELSE i.value ->> '{name}' END)")


# The last time a memory was written (created, reinforced, corrected, moved) or retrieved.
_LAST_SEEN = f"greatest({UPDATED}, {_field('last_accessed_at')}::timestamptz)"
_DAYS_SINCE_ACCESS = (
    f"greatest(0.0, extract(epoch FROM (%(now)s::timestamptz - "
    f"{_field('last_accessed_at')}::timestamptz))::float8 / 86400.0)"
)


def decay_expression() -> str:
    """The decay score as a SQL expression over ``langmem_items i``.

    The same formula as ``langmem_layer.read.rank.decay_score`` (tests hold them
    equal): episodic memories keep their confidence; summaries and reflections
    ``confidence × 0.5^(t / %(half_life)s)``; the rest ``confidence × e^(−t/S)`` with
    ``S = 1 + 0.5 × access_count``; ``t`` days since last access, never negative. The
    exponents are clamped (``MAX_DECAY_EXPONENT``, ``MAX_HALVINGS``) so no age
    underflows.
    Needs the parameters ``now`` and ``half_life``.
    """
    kinds = ", ".join(f"'{k.value}'" for k in sorted(HALF_LIFE_KINDS))
    conf = "coalesce((i.value ->> 'confidence')::float8, 0.8)"
    count = f"coalesce({_field('access_count')}::float8, 0.0)"
    return f"""(CASE
        WHEN i.value ->> 'layer' = 'episodic' THEN {conf}
        WHEN i.value ->> 'kind' IN ({kinds})
            THEN {conf} * power(0.5, least({_DAYS_SINCE_ACCESS} / %(half_life)s::float8,
                                            {MAX_HALVINGS}))
        ELSE {conf} * exp(-least({_DAYS_SINCE_ACCESS} / (1.0 + 0.5 * {count}),
                                 {MAX_DECAY_EXPONENT}))
    END)"""


# The user's live, unpinned memories with their stored score, one range of the narrow
# table's primary key. The planner joins them by hash or merge when it sees the user's
# size, and by one primary-key probe per memory when it underestimates the live ones
# (the status filter is on jsonb): both read each score once. Every rule moves only such
# memories, so one scan serves scores and rules.
_SCANNED = f"""FROM langmem_items i
            LEFT JOIN langmem_decay s
              ON s.user_id = %(user_id)s AND s.prefix = i.prefix AND s.key = i.key
            WHERE {_MINE} AND {_NOT_PINNED} AND {STATUS} IN ('active', 'stale')"""


def _score_counts(a: str) -> str:
    """``rescored`` and ``flagged`` over rows ``a`` (columns ``old`` and ``new``)."""
    return (f"count(*) FILTER (WHERE {a}.new IS DISTINCT FROM {a}.old) AS rescored, "
            f"count(*) FILTER (WHERE {a}.new < %(flag)s "
            f"AND ({a}.old IS NULL OR {a}.old >= %(flag)s)) AS flagged")


def _write_scores(a: str) -> str:
    """The CTEs ``up`` and ``ins`` storing the changed scores of rows ``a``.

    A score already stored (``stored``: the scan read its row) is updated by its
    primary key; a memory scored for the first time gets its row (a concurrent first
    score of the same memory is taken over, not an error).
    """
    return f"""up AS (
            UPDATE langmem_decay s SET decay = {a}.new
            FROM {a}
            WHERE s.user_id = %(user_id)s AND s.prefix = {a}.prefix AND s.key = {a}.key
              AND {a}.stored AND {a}.new IS DISTINCT FROM {a}.old
            RETURNING 1
        ),
        ins AS (
            INSERT INTO langmem_decay AS s (user_id, prefix, key, decay)
            SELECT %(user_id)s, {a}.prefix, {a}.key, {a}.new FROM {a}
            WHERE NOT {a}.stored AND {a}.new IS NOT NULL
            ON CONFLICT (user_id, prefix, key) DO UPDATE SET decay = EXCLUDED.decay
            RETURNING 1
        )"""


def rescore_decay(user_id: str, now: datetime, *, half_life_days: float, flag_below: float,
                  dry_run: bool = False, rules: list[Transition] | None = None) -> Sql:
    """Recompute the stored decay score of a user's live memories (``langmem_decay``).

    Only scores that change are written, and only into ``langmem_decay``: the memory
    rows are read, never rewritten. Returns one row: ``rescored`` (scores that changed)
    and ``flagged`` (memories whose score fell below ``flag_below`` now); with
    ``rules``, also for the n-th rule ``prefixes_n`` and ``keys_n``: the memories whose
    state matches its condition (NULL if none), for ``apply_transition``'s
    ``among``.
    """
    params = {"user_id": user_id, "now": now, "half_life": half_life_days, "flag": flag_below}
    moves = ""
    for n, rule in enumerate(rules or ()):
        where, named = renamed((rule.where, rule.params), f"r{n}_")
        moves += f", ({where}) AS m{n}"
        params.update(named)
    # The rules' candidates come from the scores' scan: one read of the user's rows a
    # night instead of one per rule.
    scored = f"""SELECT i.prefix, i.key, s.decay AS old, s.key IS NOT NULL AS stored,
                   {decay_expression()} AS new{moves}
            {_SCANNED}"""
    counts = f"SELECT {_score_counts('d')}"
    for n in range(len(rules or ())):
        counts += (f", array_agg(d.prefix) FILTER (WHERE d.m{n}) AS prefixes_{n}"
                   f", array_agg(d.key) FILTER (WHERE d.m{n}) AS keys_{n}")
    if dry_run:
        return f"{counts} FROM ({scored}) d", params
    return (
        f"""WITH d AS ({scored}),
        {_write_scores('d')}
        {counts} FROM d""",
        params,
    )


#: Sent before a user's ``lifecycle_pass`` in its transaction: plans for the user, never
#: the generic plan. The pass's text is the same for every user of a night, so its
#: connection prepares it, and after five users PostgreSQL may keep a generic plan,
#: which reads ``user_id = $1`` as the average user: with a 40k-memory user among the
#: first five and 850 users of about 200 after, it chose one that took 0.3 s a user
#: where the user's own plan takes 20 ms (the whole pass 251 s against 16.9 s, at 200k
#: memories). A night plans each user once, which costs nothing beside the pass.
CUSTOM_PLANS: Sql = ("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)", {})


def lifecycle_pass(user_id: str, now: datetime, *, half_life_days: float,
                   flag_below: float, rules: list[Transition]) -> Sql:
    """The whole nightly pass over a user's memories in one statement: rescore every
    decay (as ``rescore_decay``) and apply ``rules`` in order (as
    ``apply_transition`` one after the other would).

    One read of the user's memories, and each memory moved written once, whatever
    number of rules move it: the rules run in order on the state the earlier ones
    left, each a stage over the previous one (its condition checked, its change and
    history entries applied), so a memory one rule moves is seen moved by the next
    (an ephemeral open loop past its due date goes stale, then is closed) exactly as
    with one statement per rule. A memory changed by another transaction since the
    statement's snapshot is left alone (its row version is no longer the one read);
    the next run sees it as it is then.

    Returns one row: ``rescored``, ``flagged`` (as ``rescore_decay``) and, for the
    n-th rule, ``moved_n``: the memories it moved.
    """
    params: dict[str, Any] = {"user_id": user_id, "now": now, "now_iso": utc_iso(now),
                              "half_life": half_life_days, "flag": flag_below}
    carried = ("i.version, i.user_id, i.prefix, i.key, i.is_memory, i.access, i.value, "
               "i.updated_at, i.old, i.stored, i.new")
    stage = f"""SELECT i.xmin AS version, i.user_id, i.prefix, i.key, i.is_memory, i.access,
                   i.value, i.updated_at, i.moved, i.moved_at, s.decay AS old,
                   s.key IS NOT NULL AS stored, {decay_expression()} AS new
            {_SCANNED}"""
    hits: list[str] = []
    for n, rule in enumerate(rules):
        where, named = renamed((rule.where, rule.params), f"r{n}_")
        change, stamped = _moved(rule)
        change, _ = renamed((change, rule.params), f"r{n}_")
        params.update(named)
        stamp = "%(now)s::timestamptz" if stamped else "i.moved_at"
        # OFFSET 0 keeps each stage a subquery of its own: pulled up, every later
        # condition would repeat the earlier stages' expressions instead of reading
        # their result.
        checked = f"SELECT i.*, coalesce({where}, false) AS m{n} FROM ({stage} OFFSET 0) i"
        hits.append(f"i.m{n}")
        stage = f"""SELECT {carried}, {", ".join(hits)},
                   CASE WHEN i.m{n} THEN {change} ELSE i.moved END AS moved,
                   CASE WHEN i.m{n} THEN {stamp} ELSE i.moved_at END AS moved_at
            FROM ({checked} OFFSET 0) i"""
    any_moved = " OR ".join(f"f.m{n}" for n in range(len(rules))) or "false"
    # The stored result keeps the moved state of the memories moved only: the others'
    # would make it spill to disk for nothing.
    any_hit = " OR ".join(hits) or "false"
    stage = (f"SELECT i.version, i.prefix, i.key, i.old, i.stored, i.new, "
             f"{', '.join(hits) or 'false AS m'}, "
             f"CASE WHEN {any_hit} THEN i.moved END AS moved, i.moved_at "
             f"FROM ({stage} OFFSET 0) i")
    sets = ", ".join(f"{c} = f.{c}" for c in MOVE_COLUMNS)
    flags = ", ".join(["1"] + [f"f.m{n}" for n in range(len(rules))])
    counts = "".join(f", (SELECT count(*) FROM mv WHERE mv.m{n}) AS moved_{n}"
                     for n in range(len(rules)))
    # The memory rows are found again by their primary key (one index probe per memory
    # moved), and only in the version the scan read (``xmin``, the transaction that
    # wrote it): under a concurrent change the row's newer version fails the check
    # and the row is skipped. Not by its address (ctid): Citus refuses a modification
    # by ctid in a statement it plans in steps, as it does this one (its INSERT of
    # first scores). Only MOVE_COLUMNS are set. The scores as in rescore_decay.
    return (
        f"""WITH f AS MATERIALIZED ({stage}),
        {_write_scores('f')},
        mv AS (
            UPDATE langmem_items i SET {sets}
            FROM f
            WHERE i.user_id = %(user_id)s AND i.prefix = f.prefix AND i.key = f.key
              AND i.xmin = f.version AND ({any_moved})
            RETURNING {flags}
        )
        SELECT {_score_counts('f')}{counts}
        FROM f""",
        params,
    )


@dataclass(frozen=True, slots=True)
class Transition:
    """One lifecycle rule: which memories move, and what they become.

    Attributes:
        name: The outcome counted (``"stale_ephemeral"``, ``"archived"`` ...).
        where: The condition over ``langmem_items i`` (besides user and pinned), with
            named parameters from ``params`` and ``now``.
        reason: A SQL text expression: why, recorded in the history.
        params: The rule's thresholds.
        status: The new status, or None to leave it.
        loop_closed: Also close the open loop (``loop_status = 'closed'``).
        flag: A metadata flag to set (True) or clear (False), e.g. needs_revalidation.
    """

    name: str
    where: str
    reason: str
    params: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    loop_closed: bool = False
    flag: tuple[str, bool] | None = None


def _ago(param: str) -> str:
    return f"%(now)s::timestamptz - make_interval(secs => %({param})s::float8 * 86400)"


def transitions(
    *,
    ephemeral_stale_days: float,
    episodic_stale_days: float,
    archive_after_days: float,
    loop_grace_days: float,
    loop_silence_days: float,
    habit_min_outcomes: int,
    habit_max_failure_rate: float,
    revalidate_after_days: float,
) -> list[Transition]:
    """The lifecycle's rules in the order they run (a memory moved by one is not re-moved).

    Stale memories are archived first, so a memory that goes stale today is not
    archived in the same run.
    """
    stale_since = f"""coalesce((SELECT max((h ->> 'at')::timestamptz)
            FROM jsonb_array_elements(coalesce({moved('history')}, '[]'::jsonb)) h
            WHERE h ->> 'event' = 'status' AND h ->> 'new' = 'stale'), {UPDATED})"""
    due = "(i.value ->> 'due_at')::timestamptz"
    loop = ("i.value ->> 'kind' = 'open_loop' "
            f"AND coalesce({_field('loop_status')}, 'open') <> 'closed'")
    outcomes = ("(coalesce((i.value ->> 'success_count')::int, 0) "
                "+ coalesce((i.value ->> 'failure_count')::int, 0))")
    failures = "coalesce((i.value ->> 'failure_count')::int, 0)"
    flagged = f"coalesce(({moved('metadata')} -> 'needs_revalidation') = 'true'::jsonb, false)"
    return [
        Transition(
            "archived",
            f"{STATUS} = 'stale' AND {stale_since} <= {_ago('days')}",
            "%(reason)s::text",
            {"days": archive_after_days, "reason": f"stale for {archive_after_days:g} days"},
            status="archived",
        ),
        Transition(
            "stale_ephemeral",
            f"{STATUS} = 'active' AND ({moved('metadata')} -> 'ephemeral') = 'true'::jsonb "
            f"AND {_LAST_SEEN} <= {_ago('days')}",
            "%(reason)s::text",
            {"days": ephemeral_stale_days,
             "reason": f"ephemeral: not referenced for {ephemeral_stale_days:g} days"},
            status="stale",
        ),
        Transition(
            "stale_episodic",
            f"{STATUS} = 'active' AND i.value ->> 'kind' = 'episodic_event' "
            f"AND {_LAST_SEEN} <= {_ago('days')}",
            "%(reason)s::text",
            {"days": episodic_stale_days,
             "reason": f"episodic: not reinforced for {episodic_stale_days:g} days"},
            status="stale",
        ),
        Transition(
            "loops_closed",
            f"{STATUS} IN ('active', 'stale') AND {loop} AND ("
            f"({due} IS NOT NULL AND {due} <= {_ago('grace')}) OR "
            f"(({due} IS NULL OR {due} <= %(now)s) AND {_LAST_SEEN} <= {_ago('silence')}))",
            f"CASE WHEN {due} IS NOT NULL AND {due} <= {_ago('grace')} "
            "THEN %(reason_due)s::text ELSE %(reason_silence)s::text END",
            {"grace": loop_grace_days, "silence": loop_silence_days,
             "reason_due": f"open loop: due date passed over {loop_grace_days:g} days ago",
             "reason_silence": f"open loop: no mention for {loop_silence_days:g} days"},
            status="archived",
            loop_closed=True,
        ),
        Transition(
            "habits_retired",
            f"{STATUS} = 'active' AND i.value ->> 'layer' = 'procedural' "
            f"AND {outcomes} >= %(min_outcomes)s "
            f"AND {failures}::float8 / {outcomes} > %(max_rate)s::float8",
            f"format('retired: failed %%s of %%s times', {failures}, {outcomes})",
            {"min_outcomes": habit_min_outcomes, "max_rate": habit_max_failure_rate},
            status="archived",
        ),
        Transition(
            "needs_revalidation",
            f"{STATUS} = 'active' AND i.value ->> 'layer' = 'semantic' AND NOT {flagged} "
            f"AND {UPDATED} <= {_ago('days')}",
            "%(reason)s::text",
            {"days": revalidate_after_days,
             "reason": f"not confirmed for {revalidate_after_days:g} days"},
            flag=("needs_revalidation", True),
        ),
        Transition(
            "revalidated",
            f"{STATUS} = 'active' AND {flagged} AND {UPDATED} > {_ago('days')}",
            "%(reason)s::text",
            {"days": revalidate_after_days, "reason": "confirmed again"},
            flag=("needs_revalidation", False),
        ),
    ]


def _history(entries: list[str]) -> str:
    return (f"coalesce({moved('history')}, '[]'::jsonb) || jsonb_build_array("
            + ", ".join(entries) + ")")


def _entry(event: str, old: str, new: str, reason: str) -> str:
    return (f"jsonb_build_object('at', %(now_iso)s::text, 'event', '{event}', 'old', {old}, "
            f"'new', {new}, 'reason', {reason})")


def apply_transition(user_id: str, t: Transition, now: datetime, *,
                     dry_run: bool = False,
                     among: tuple[list[str], list[str]] | None = None) -> Sql:
    """Apply one transition to a user's memories; returns one row per memory moved
    (``key``), or with ``dry_run`` one row ``n`` counting those it would move.

    ``among`` (prefixes, keys) limits it to those memories, found by primary key
    instead of reading all the user's memories: the candidates of
    ``rescore_decay``. The rule's condition is still checked on each.
    """
    params = {**t.params, "user_id": user_id, "now": now, "now_iso": utc_iso(now)}
    where = f"{_MINE} AND {_NOT_PINNED} AND {t.where}"
    if among is not None:
        params["among_prefixes"], params["among_keys"] = among
        where += (" AND (i.prefix, i.key) IN (SELECT c.p, c.k FROM unnest("
                  "%(among_prefixes)s::text[], %(among_keys)s::text[]) AS c(p, k))")
    if dry_run:
        return f"SELECT count(*) AS n FROM langmem_items i WHERE {where}", params
    change, stamped = _moved(t)
    # A status change is a write of the memory (read back as the later of updated_at
    # and moved_at); a flag is bookkeeping and keeps the time the memory was last
    # confirmed.
    stamp = "%(now)s::timestamptz" if stamped else "i.moved_at"
    sets = ", ".join(f"{c} = {e}" for c, e in zip(MOVE_COLUMNS, (change, stamp), strict=True))
    # One pass: the rule's condition on the row it updates, no candidate list joined
    # back (a row changed meanwhile by another transaction is checked again as it is).
    return (
        f"""UPDATE langmem_items i
        SET {sets}
        WHERE {where}
        RETURNING i.key""",
        params,
    )


def _moved(t: Transition) -> tuple[str, bool]:
    """The ``moved`` column of ``langmem_items i`` once ``t`` has moved it: the keys it
    changes, whole (its history entries appended to the history as readers see it),
    over those earlier moves wrote; and whether the move is a write (``moved_at`` set
    to ``now``).

    A key is written only when the move changes it, so the value read is unchanged
    in every other key (a memory without ``loop_status`` does not get one).
    """
    keys: list[str] = []
    entries: list[str] = []
    if t.status is not None:
        keys.append(f"'status', to_jsonb('{t.status}'::text)")
        entries.append(_entry("status", moved("status"), f"to_jsonb('{t.status}'::text)",
                              t.reason))
    if t.loop_closed:
        keys.append("'loop_status', '\"closed\"'::jsonb")
        entries.append(_entry("loop_status",
                              f"to_jsonb(coalesce({_field('loop_status')}, 'open'))",
                              "'\"closed\"'::jsonb", t.reason))
    if t.flag is not None:
        name, on = t.flag
        meta = f"coalesce({moved('metadata')}, '{{}}'::jsonb)"
        keys.append(f"'metadata', {meta} || jsonb_build_object('{name}', true)" if on
                    else f"'metadata', {meta} - '{name}'")
        entries.append(_entry("flag", "'null'::jsonb" if on else f"to_jsonb('{name}'::text)",
                              f"to_jsonb('{name}'::text)" if on else "'null'::jsonb",
                              t.reason))
    keys.append(f"'history', {_history(entries)}")
    return (f"coalesce(i.moved, '{{}}'::jsonb) || jsonb_build_object({', '.join(keys)})",
            t.status is not None)


def purge_expired(user_id: str, now: datetime, *, dry_run: bool = False) -> Sql:
    """Delete a user's memories whose ``expires_at`` has passed, with their links and
    cached embeddings, in one statement (embeddings go by cascade).

    Returns one row: ``purged``, ``links``, ``cached``.
    """
    params = {"user_id": user_id, "now": now}
    gone = """SELECT i.key, i.value ->> 'content' AS content FROM langmem_items i
            WHERE i.user_id = %(user_id)s AND i.is_memory
              AND i.expires_at IS NOT NULL AND i.expires_at <= %(now)s"""
    if dry_run:
        return (f"SELECT count(*) AS purged, 0::bigint AS links, 0::bigint AS cached "
                f"FROM ({gone}) g", params)
    return (
        f"""WITH gone AS ({gone}),
        l AS (
            DELETE FROM langmem_links
            WHERE user_id = %(user_id)s AND (src_key IN (SELECT key FROM gone)
                                             OR dst_key IN (SELECT key FROM gone))
            RETURNING 1
        ),
        c AS (
            -- the cache is keyed by the sha256 of the exact text embedded: the content
            DELETE FROM langmem_embedding_cache
            WHERE user_id = %(user_id)s AND content_hash IN (
                SELECT encode(sha256(convert_to(content, 'UTF8')), 'hex') FROM gone)
            RETURNING 1
        ),
        d AS (
            DELETE FROM langmem_items
            WHERE user_id = %(user_id)s AND is_memory AND key IN (SELECT key FROM gone)
              AND expires_at IS NOT NULL AND expires_at <= %(now)s
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM d) AS purged, (SELECT count(*) FROM l) AS links,
               (SELECT count(*) FROM c) AS cached""",
        params,
    )


def memory_history(user_id: str, key: str) -> Sql:
    """The history list of one memory (a row ``history``), whatever its status."""
    return (
        f"""SELECT coalesce({moved('history')}, '[]'::jsonb) AS history FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.key = %(key)s AND i.is_memory""",
        {"user_id": user_id, "key": key},
    )


def record_outcome(user_id: str, key: str, success: bool, now: datetime) -> Sql:
    """Count one outcome of following a procedural habit; returns the new counts.

    A write of the memory (the user's report, not a nightly move): the moves are folded
    into the value written and their columns cleared.
    """
    field = "success_count" if success else "failure_count"
    return (
        f"""UPDATE langmem_items i
        SET value = jsonb_set({folded()}, '{{{field}}}',
                              to_jsonb(coalesce((i.value ->> '{field}')::int, 0) + 1)),
            updated_at = %(now)s, {CLEAR}
        WHERE i.user_id = %(user_id)s AND i.key = %(key)s AND i.is_memory
          AND i.value ->> 'layer' = 'procedural'
        RETURNING coalesce((i.value ->> 'success_count')::int, 0) AS success_count,
                  coalesce((i.value ->> 'failure_count')::int, 0) AS failure_count""",
        {"user_id": user_id, "key": key, "now": now},
    )

