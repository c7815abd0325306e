"""Data migrations run a batch of users at a time, after their migration's DDL.

Two shipped migrations read every memory in the statement that follows the triggers
they create on ``langmem_items``: 10 counts the term statistics of every memory
(``langmem_terms``), 21 copies each memory's decay score into ``langmem_decay`` and
drops the old column. In the migration's transaction that statement held the lock the
triggers took (``SHARE ROW EXCLUSIVE``: every write to the table waits) for as long as
it read the whole table, tens of seconds at a million memories.

``setup()`` now sends the migration without it (``deferred``), commits the DDL, then
runs ``batch`` for the users in order, at most ``BATCH_ROWS`` memories per transaction
(a user with more is a batch of their own), then ``finish``, and records the version
only after that: a setup interrupted midway runs the migration (idempotent) and its
batches again. The migration's text is unchanged (it has shipped): the runner leaves
out the one statement ``deferred`` names.

- 10: each batch takes the triggers' lock for its users' counts only, deletes their
  counts and counts them again from their memories: absolute counts, so a count the
  triggers made since the DDL committed, for a memory the batch counts too, is not
  added twice. From then on the triggers keep them, as for a new user.
- 21: each batch copies its users' scores without overwriting one already in
  ``langmem_decay`` (a score the new code wrote since is newer); ``finish`` drops the
  old column, a catalog change under a lock held for an instant. On a schema where
  the column is gone already (the migration run again) there is nothing to copy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from langmem_layer.sql import Sql
from langmem_layer.sql.migrations import MIGRATIONS, split_statements

__all__ = ["BATCH_ROWS", "Backfill", "backfill", "batches", "deferred_count", "users_after"]

#: Memories per batch transaction: each holds its lock for about a tenth of a second
#: (benchmarks/migration_locks.py --from 10: 465 ms at 20,000).
BATCH_ROWS = 5_000
#: Users per page of the user list the batches are cut from.
USERS_PAGE = 5_000


class Backfill(NamedTuple):
    """A migration's data statement, run in batches of users after its DDL."""

    deferred: Callable[[str], bool]  # the migration's statement it replaces
    applies: Sql | None  # one row of ``applies``: whether there is anything to do
    batch: Callable[[list[str]], list[Sql]]  # one transaction's statements
    finish: Sql | None  # after the last batch, in a transaction of its own


def _terms(users: list[str]) -> list[Sql]:
    params = {"users": users}
    return [
        ("LOCK TABLE langmem_items IN SHARE ROW EXCLUSIVE MODE", {}),
        ("DELETE FROM langmem_terms WHERE user_id = ANY(%(users)s::text[])", params),
        ("INSERT INTO langmem_terms AS t (user_id, prefix, lexeme, df) SELECT i.user_id, "
         "i.prefix, l.lexeme, count(*) FROM langmem_items i CROSS JOIN LATERAL "
         "langmem_terms_of(i.tsv) AS l(lexeme) "
         "WHERE i.is_memory AND i.user_id = ANY(%(users)s::text[]) GROUP BY 1, 2, 3",
         params),
    ]


def _decay(users: list[str]) -> list[Sql]:
    return [("INSERT INTO langmem_decay (user_id, prefix, key, decay) "
             "SELECT user_id, prefix, key, decay FROM langmem_items "
             "WHERE user_id = ANY(%(users)s::text[]) AND decay IS NOT NULL "
             "ON CONFLICT DO NOTHING", {"users": users})]


_HAS_DECAY: Sql = ("SELECT EXISTS (SELECT 1 FROM information_schema.columns "
                   "WHERE table_name = %(table)s AND column_name = 'decay' "
                   "AND table_schema = current_schema()) AS applies",
                   {"table": "langmem_items"})

def _starts(prefix: str, *, holding: str = "") -> Callable[[str], bool]:
    """Whether a statement of a migration begins with ``prefix`` (its comments aside)
    and holds ``holding``: a function's body may hold the same words."""
    def test(statement: str) -> bool:
        code = re.sub(r"^(\s*--[^\n]*\n)*\s*", "", statement)
        return code.startswith(prefix) and holding in code
    return test


_BACKFILLS: dict[int, Backfill] = {
    10: Backfill(_starts("INSERT INTO langmem_terms AS t"),
                 None, _terms, None),
    21: Backfill(_starts("DO $do$", holding="INSERT INTO langmem_decay"),
                 _HAS_DECAY, _decay, ("ALTER TABLE langmem_items DROP COLUMN IF EXISTS decay",
                                      {})),
}


def backfill(version: int) -> Backfill | None:
    """The batched data statement of migration ``version``, if it has one."""
    return _BACKFILLS.get(version)


def deferred_count(version: int) -> int:
    """How many of migration ``version``'s statements its backfill replaces (one
    where it has one: ``tests/store/test_upgrades.py`` checks)."""
    found = _BACKFILLS.get(version)
    return 0 if found is None else sum(map(found.deferred, split_statements(MIGRATIONS[version])))


def users_after(after: str) -> Sql:
    """A page of users after ``after`` with their memories' count, in order (user ids
    and counts only, as the owner under the maintenance binding)."""
    return ("SELECT user_id, count(*) AS n FROM langmem_items WHERE user_id > %(after)s "
            "GROUP BY user_id ORDER BY user_id LIMIT %(limit)s",
            {"after": after, "limit": USERS_PAGE})


def batches(page: list[tuple[str, int]], rows: int = BATCH_ROWS) -> list[list[str]]:
    """A page of ``(user, memories)`` cut into batches of at most ``rows`` memories."""
    out: list[list[str]] = []
    size = 0
    for user, n in page:
        if not out or size + n > rows:
            out.append([])
            size = 0
        out[-1].append(user)
        size += n
    return out

