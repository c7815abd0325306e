"""The statement audit: every SQL statement the library sends binds the user.

A pytest plugin (registered from ``tests/conftest.py``). For the whole test session it
wraps psycopg's ``Cursor.execute``/``executemany`` and their async twins, and records the
text of every statement whose caller is library code: the first frame above psycopg
(and psycopg_pool) must be a module of the ``langmem_layer`` package. The tests' own
SQL (truncating tables, counting rows) is not recorded; the library's is, whichever
test drove it.

At the end of the session each distinct statement is checked by :func:`check`: a
statement that names a per-user table (:data:`PER_USER_TABLES`, every ``langmem_*``
table with a ``user_id`` column; a test compares it with the catalog) must bind
``user_id`` by equality to a parameter or a literal, for every reference to such a
table. A statement the check refuses fails the run unless it matches one entry of
:data:`ALLOWLIST`, which says why that statement may span users. A report (statements
seen, distinct, per-user, allowed, violations) is written at the end of the run.

The check is a heuristic over the SQL text, not a parser. Its rules:

- Comments (``-- …``) are dropped and whitespace collapsed; case is ignored.
- A reference is any whole-word occurrence of a per-user table's name, with the alias
  that follows it (``FROM langmem_items i``, ``INSERT INTO langmem_terms AS t``).
- A reference is bound when its alias (or the table's name, or an unqualified column)
  appears as ``q.user_id = P`` or ``P = q.user_id``, where ``P`` is ``%s``,
  ``%(name)s``, ``$n`` or a quoted literal; or when it is joined by
  ``a.user_id = b.user_id`` to a bound reference. ``user_id = ANY(…)``, ``IN (…)``,
  a row comparison ``(user_id, …) IN (…)`` or a join to an ``unnest`` of parameter
  arrays are not equality to one value and bind nothing.
- The target of ``INSERT INTO`` is bound by the row it inserts (``user_id`` is ``NOT
  NULL``, and every key of a per-user table includes it, which
  ``tests/isolation/test_isolation_schema.py`` checks, so ``ON CONFLICT`` only meets the user's
  own row); the tables its ``SELECT`` reads are references like any other.
- DDL (a statement starting with CREATE, ALTER, DROP or DO: ``setup()``, per-user
  indexes) is allowed as a class: it reads no user's rows on behalf of a request.

Limits: an unqualified ``user_id = %s`` binds every reference in the statement, even
one inside a subquery where it would name another table's column; an equality inside
an ``OR`` branch or a ``CASE`` counts as binding; a binding to the wrong parameter
(another user's id) cannot be seen from the text; SQL functions called by name
(``langmem_user_nearest(%s, …)``) are trusted to bind their user argument (their
bodies are DDL, reviewed in ``sql/migrations.py``); and a table named inside a string
literal counts as a reference. The check errs towards refusing: a refusal that is not
a real leak goes in :data:`ALLOWLIST` with its reason.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import psycopg_pool
import pytest

import langmem_layer
from langmem_layer.sql.users import USER_TABLES
from langmem_layer.store.driver import CONTROL

#: The tables whose rows belong to a user (the erasure list, compared with the catalog
#: by tests/isolation/test_isolation_audit.py).
PER_USER_TABLES: tuple[str, ...] = USER_TABLES


class Allowed(NamedTuple):
    """A statement allowed to span users: its name, a pattern and why."""

    name: str
    pattern: str
    reason: str


#: Every statement on a per-user table that may run without binding one user, and why.
#: Patterns are searched in the normalised text (lower case, one space between words).
ALLOWLIST: tuple[Allowed, ...] = (
    Allowed(
        "jobs.users",
        r"with recursive walk\(user_id\) as",
        "the job runner's user walk (sql/jobs.users, count_users): lists user ids only, "
        "then each user's work runs in a transaction of its own that binds the user",
    ),
    Allowed(
        "jobs.users_distributed",
        r"select u\.user_id from \( select t\.user_id from langmem_items t "
        r"where t\.user_id > ",
        "the job runner's user walk on Citus (sql/jobs.users, count_users with "
        "distributed=True): lists user ids only, as the recursive walk does; each "
        "user's work then runs in a transaction of its own that binds the user",
    ),
    Allowed(
        "migrations.terms_backfill",
        r"^insert into langmem_terms as t \(user_id, prefix, lexeme, df\) select i\.user_id, "
        r"i\.prefix, l\.lexeme, count\(\*\) from langmem_items i cross join lateral ",
        "migration 10's backfill of the term statistics (sql/ddl_schema.py), sent as a "
        "statement of its own like every migration statement (sql/migrations."
        "migration_statements), or by setup()'s batches for a list of users (sql/"
        "backfills.py): as the owner, each row counted under its own user_id; never "
        "reaches a request's results",
    ),
    Allowed(
        "backfills.users_after",
        r"^select user_id, count\(\*\) as n from langmem_items where user_id > ",
        "setup()'s backfill batches (sql/backfills.users_after): a page of user ids and "
        "their memories' count, to cut the batches from",
    ),
    Allowed(
        "backfills.lock",
        r"^lock table langmem_items in share row exclusive mode$",
        "migration 10's backfill in batches (sql/backfills.py): each batch holds the lock "
        "its triggers take while it counts its users' terms; a lock reads no row",
    ),
    Allowed(
        "backfills.terms",
        r"^delete from langmem_terms where user_id = any\(",
        "migration 10's backfill in batches (sql/backfills.py): a batch of users' term "
        "counts, deleted to be counted again from their own rows",
    ),
    Allowed(
        "backfills.decay",
        r"^insert into langmem_decay \(user_id, prefix, key, decay\) select user_id, "
        r"prefix, key, decay from langmem_items where user_id = any\(",
        "migration 21's backfill in batches (sql/backfills.py): a batch of users' decay "
        "scores, each row copied under its own user_id",
    ),
    Allowed(
        "generic_items.expired_users",
        r"^select distinct user_id from langmem_items where expires_at is not null "
        r"and expires_at <= ",
        "the TTL sweep's user list (sql/generic_items.expired_users): user ids only; "
        "sweep_expired then deletes per user",
    ),
    Allowed(
        "queue_statements.claimable_users",
        r"^select distinct q\.user_id from langmem_extraction_queue q where ",
        "the worker's user list (sql/queue_statements.claimable_users): user ids only; "
        "claim then leases one user's entries",
    ),
    Allowed(
        "queue_statements.backlog",
        r"^select count\(\*\) filter \(where done_at is null and parked_at is null\) as "
        r"waiting, ",
        "the operator's metrics (sql/queue_statements.backlog): counts and the oldest age of the "
        "extraction queue across users, no user id and no content",
    ),
    Allowed(
        "cache.stale_cache_users",
        r"^select distinct user_id from langmem_embedding_cache where created_at <= ",
        "the cache purge's user list (sql/cache.stale_cache_users): user ids only; "
        "the purge then runs per user",
    ),
    Allowed(
        "generic_items.list_prefixes",
        r"^select distinct i\.prefix from langmem_items i where ",
        "list_namespaces without a user prefix (sql/generic_items.list_prefixes with user_id "
        "None) lists namespace names across tenants, never values, for store browsers "
        "(docs/isolation.md); with a user it binds i.user_id",
    ),
    Allowed(
        "reextraction.fallback_turns",
        r"^select user_id, turn_key, .* from langmem_reextract order by recorded_at, "
        r"user_id, turn_key limit ",
        "the reextract job over every user (store/ops/reextraction.fallback_turns with "
        "user_id None): reads waiting turns oldest first across users for maintenance, and "
        "re-ingests each under its own user_id; never reaches a request's results",
    ),
    Allowed(
        "vector.large_users",
        r"^select e\.user_id, count\(\*\) as vectors from langmem_embeddings e where "
        r"e\.model_id = ",
        "the per-user ANN index job's user list (sql/vector.large_users): user ids and "
        "vector counts only; each index is then built for one user",
    ),
    Allowed(
        "working.idle_threads",
        r"^select user_id, thread_id, profile, agent_id, last_active_at from langmem_threads "
        r"where closed_at is null and last_active_at < ",
        "the session sweeper's list (store/ops/working.idle_threads): thread ids and "
        "activity times, no content; each thread is then closed under its own user "
        "(close_thread)",
    ),
    Allowed(
        "working.users_with_expired_messages",
        r"^select user_id from langmem_messages where at < .* union select user_id from "
        r"langmem_threads where closed_at < ",
        "the message log's retention user list "
        "(store/ops/working.users_with_expired_messages): user ids only; the purge then "
        "runs per user",
    ),
    Allowed(
        "cache.lookup_cached",
        r"where \(c\.user_id, c\.content_hash\) in \(select t\.user_id, t\.content_hash "
        r"from unnest\(",
        "a BaseStore batch may embed texts of several users at once: each cache row is "
        "matched on its own (user_id, content_hash) pair, so a hash only hits under its "
        "own user",
    ),
    Allowed(
        "generic_items.delete_embeddings",
        r"^delete from langmem_embeddings e using unnest\(.*\) as t\(user_id, prefix, "
        r"key\) where e\.user_id = t\.user_id",
        "a BaseStore batch may rewrite items of several users: each vector row is "
        "matched on its own (user_id, prefix, key) triple",
    ),
    Allowed(
        "generic_items.replace_embeddings",
        r"^with gone as \( ?delete from langmem_embeddings e using unnest\(.*\) as "
        r"t\(user_id, prefix, key\) where e\.user_id = t\.user_id",
        "generic_items.delete_embeddings and the insert of the new vectors in one statement: each "
        "vector row is matched on its own (user_id, prefix, key) triple, and each inserted "
        "row carries its user",
    ),
)

_PARAM = r"(?:%s|%\(\w+\)s|\$\d+|'(?:[^']|'')*')"
_DDL = re.compile(r"^(?:create|alter|drop|do)\b")
# Words that may follow a table's name without being its alias.
_NOT_ALIAS = frozenset((
    "where", "set", "on", "using", "join", "left", "right", "inner", "full", "cross",
    "natural", "group", "order", "limit", "offset", "returning", "values", "select", "union",
    "except", "intersect", "for", "window", "having", "tablesample", "default", "and", "or",
    "not", "is", "as", "do", "lateral", "with", "into", "from", "when", "then", "else", "end",
))


def normalise(sql: str) -> str:
    """Lower case, without ``--`` comments, one space between words."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    return re.sub(r"\s+", " ", sql).strip().lower()


class Reference(NamedTuple):
    """One mention of a per-user table in a statement."""

    table: str
    name: str  # the alias, or the table's name
    inserted: bool  # the target of INSERT INTO


def references(sql: str, tables: tuple[str, ...] = PER_USER_TABLES) -> list[Reference]:
    """The per-user tables a normalised statement names, with their aliases (a name
    inside a quoted literal is text, not the table: ``'langmem_items'``)."""
    refs = []
    quoted = [m.span() for m in re.finditer(r"'(?:[^']|'')*'", sql)]
    for table in tables:
        for m in re.finditer(rf"(?<![\w.$]){table}(?![\w$.])(?:\s+(?:as\s+)?([a-z_]\w*))?", sql):
            if any(a < m.start() < b for a, b in quoted):
                continue
            alias = m.group(1)
            name = alias if alias and alias not in _NOT_ALIAS else table
            inserted = re.search(r"\binsert into\s*$", sql[: m.start()]) is not None
            refs.append(Reference(table, name, inserted))
    return refs


def _bound_names(sql: str) -> tuple[set[str], bool]:
    """Qualifiers bound to a value (after joins), and whether an unqualified one is."""
    col = r"(?:([a-z_]\w*)\.)?user_id"
    bound: set[str] = set()
    unqualified = False
    for m in re.finditer(rf"(?<![\w.]){col}\s*=\s*{_PARAM}", sql):
        if m.group(1):
            bound.add(m.group(1))
        else:
            unqualified = True
    for m in re.finditer(rf"{_PARAM}\s*=\s*{col}(?![\w])", sql):
        if m.group(1):
            bound.add(m.group(1))
        else:
            unqualified = True
    joins = [(a, b) for a, b in re.findall(
        r"(?<![\w.])([a-z_]\w*)\.user_id\s*=\s*([a-z_]\w*)\.user_id(?![\w])", sql)]
    changed = True
    while changed:
        changed = False
        for a, b in joins:
            if (a in bound) != (b in bound):
                bound.update((a, b))
                changed = True
    return bound, unqualified


def check(sql: str, tables: tuple[str, ...] = PER_USER_TABLES) -> list[str]:
    """Why a statement does not bind the user: one line per unbound reference.

    Empty when every per-user table the statement names is bound to one user (or the
    statement names none, or is DDL). ``sql`` need not be normalised.
    """
    text = normalise(sql)
    if _DDL.match(text):
        return []
    bound, unqualified = _bound_names(text)
    problems = []
    for ref in references(text, tables):
        if ref.inserted or unqualified or ref.name in bound:
            continue
        where = f" (as {ref.name})" if ref.name != ref.table else ""
        problems.append(f"{ref.table}{where} is not bound by user_id = <value>")
    return problems


def allowed(sql: str) -> Allowed | None:
    """The allowlist entry that covers a statement, if any."""
    text = normalise(sql)
    return next((a for a in ALLOWLIST if re.search(a.pattern, text)), None)


# ---------------------------------------------------------------------------------------
# Recording


_PACKAGE = str(Path(str(langmem_layer.__file__)).resolve().parent)
_SKIP = (*(str(Path(str(m.__file__)).resolve().parent) for m in (psycopg, psycopg_pool)),
         str(Path(__file__).resolve()))


@dataclass
class Recorder:
    """Statements sent by library code during the session, with their counts."""

    seen: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    captures: list[Counter[str]] = field(default_factory=list)

    @contextmanager
    def capture(self) -> Iterator[Counter[str]]:
        """Also collect, into the yielded counter, what is recorded inside the block."""
        sink: Counter[str] = Counter()
        with self.lock:
            self.captures.append(sink)
        try:
            yield sink
        finally:
            with self.lock:
                self.captures.remove(sink)

    def record(self, query: Any, cursor: Any, params: Any = None) -> None:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(_SKIP):
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None or not frame.f_code.co_filename.startswith(_PACKAGE):
            return
        if isinstance(query, bytes):
            text = query.decode()
        elif isinstance(query, str):
            text = query
        else:  # psycopg.sql.Composable
            text = query.as_string(cursor)
        if text in CONTROL:
            return
        texts = [text, *call_statements(text, params)]
        with self.lock:
            for t in texts:
                self.seen[t] += 1
                for sink in self.captures:
                    sink[t] += 1

    def per_user(self) -> list[str]:
        """The distinct recorded statements that name a per-user table (DDL excluded)."""
        with self.lock:
            texts = list(self.seen)
        return per_user(texts)


def call_statements(text: str, params: Any) -> list[str]:
    """The statement a call of ``langmem_on_shard`` runs (``on_shard_statement``), as
    the store sends it (``$n`` placeholders, the values in order: the user, the text,
    the tables) or as built (named); none for any other statement."""
    if "langmem_on_shard(" not in text or not params:
        return []
    if isinstance(params, dict):
        body, tables = params.get("sql"), params.get("tables")
    else:
        body, tables = params[1], params[2]
    return [on_shard_statement(body, tables)] if isinstance(body, str) else []


def on_shard_statement(body: str, tables: list[str]) -> str:
    """The statement a call of ``langmem_on_shard`` runs (``sql.citus.on_shard``), with
    its tables named and its values as ``$n``: the call passes the text as a value, so
    its own text names no table, and the statement is checked as if sent itself."""
    text = re.sub(r"\(\$1\[(\d+)\]\)::[\w ]+(\[\])?", r"$\1", body)
    return re.sub(r"%(\d+)\$s", lambda m: tables[int(m.group(1)) - 1], text).replace("%%", "%")


def per_user(texts: Iterable[str]) -> list[str]:
    """Those of ``texts`` that name a per-user table, DDL excluded."""
    return [t for t in texts if not _DDL.match(normalise(t)) and references(normalise(t))]


RECORDER = Recorder()
_installed: list[tuple[type, str, Callable[..., Any]]] = []


def _wrap(cls: type, name: str) -> None:
    original = getattr(cls, name)

    if name == "executemany":
        @functools.wraps(original)
        def wrapper(self: Any, query: Any, params_seq: Any, *a: Any, **k: Any) -> Any:
            RECORDER.record(query, self)
            return original(self, query, params_seq, *a, **k)
    else:
        @functools.wraps(original)
        def wrapper(self: Any, query: Any, *a: Any, **k: Any) -> Any:
            # Recorded when called (in the caller's frame), before an async one is awaited.
            RECORDER.record(query, self, a[0] if a else k.get("params"))
            return original(self, query, *a, **k)

    _installed.append((cls, name, original))
    setattr(cls, name, wrapper)


def install() -> None:
    """Wrap psycopg's cursors (idempotent)."""
    if _installed:
        return
    for cls in (psycopg.Cursor, psycopg.AsyncCursor):
        for name in ("execute", "executemany"):
            _wrap(cls, name)


def uninstall() -> None:
    """Put psycopg's cursors back."""
    while _installed:
        cls, name, original = _installed.pop()
        setattr(cls, name, original)


@dataclass
class Report:
    """What the audit found over the session."""

    statements: int
    distinct: int
    per_user: int
    allowed: Counter[str]
    violations: list[tuple[str, list[str]]]

    def lines(self) -> list[str]:
        out = [
            f"statements seen: {self.statements}, distinct: {self.distinct}, "
            f"distinct per-user: {self.per_user}, allowlisted: {sum(self.allowed.values())}, "
            f"violations: {len(self.violations)}",
        ]
        out += [f"  allowed {name}: {n} distinct" for name, n in sorted(self.allowed.items())]
        unused = [a.name for a in ALLOWLIST if a.name not in self.allowed]
        if unused:
            out.append(f"  allowlist entries not met in this run: {', '.join(unused)}")
        for sql, problems in self.violations:
            out.append(f"VIOLATION: {'; '.join(problems)}")
            out.append(f"  {normalise(sql)[:600]}")
        return out


def report(seen: Counter[str] | None = None) -> Report:
    """Check every distinct statement of ``seen`` (default: all recorded so far)."""
    if seen is None:
        with RECORDER.lock:
            seen = Counter(RECORDER.seen)
    allowed_counts: Counter[str] = Counter()
    violations = []
    statements = per_user(seen)
    for sql in statements:
        problems = check(sql)
        if not problems:
            continue
        entry = allowed(sql)
        if entry is not None:
            allowed_counts[entry.name] += 1
        else:
            violations.append((sql, problems))
    return Report(sum(seen.values()), len(seen), len(statements), allowed_counts, violations)


# ---------------------------------------------------------------------------------------
# pytest hooks

_RESULT = pytest.StashKey[Report]()


def pytest_configure(config: pytest.Config) -> None:
    install()


def pytest_unconfigure(config: pytest.Config) -> None:
    uninstall()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    result = report()
    session.config.stash[_RESULT] = result
    if result.violations and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config
                            ) -> None:
    result = config.stash.get(_RESULT, None)
    if result is None:
        return
    terminalreporter.write_sep("-", "SQL statement audit (tests/audit.py)",
                               red=bool(result.violations), green=not result.violations)
    for line in result.lines():
        terminalreporter.write_line(line)


__all__ = [
    "ALLOWLIST",
    "PER_USER_TABLES",
    "RECORDER",
    "Allowed",
    "Recorder",
    "Report",
    "allowed",
    "check",
    "install",
    "normalise",
    "per_user",
    "references",
    "report",
    "uninstall",
]
