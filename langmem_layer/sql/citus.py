"""Distributing the schema on Citus: per-user tables on ``user_id``, the rest as reference tables.

``setup(distributed=True)`` (automatic when the database has the ``citus`` extension)
runs ``distribute()`` after the migrations, in a transaction of its own:

- every table of ``USER_TABLES`` becomes a distributed table on ``user_id``, colocated
  with ``langmem_items``, so each statement of one user runs on one shard group (a
  router plan); every other ``langmem_`` table (``langmem_migrations``,
  ``langmem_job_runs``: no ``user_id``) becomes a reference table. A table already
  distributed is skipped, so running it again after a migration added a table
  distributes just that one.
- the row-level-security policies are rewritten without the scalar-subquery wrapper of
  the single-server policies (Citus refuses subqueries in the policies of a distributed
  table): the same predicate, evaluated per row instead of once per statement.
- the triggers of ``langmem_items`` that keep ``langmem_terms`` (BM25 document
  frequencies) and ``langmem_decay`` fire on the workers, on each shard of the items
  table. There a statement on ``langmem_terms`` would be a distributed query nested in
  a shard's query, which Citus refuses, and its planner cannot read a trigger's
  transition table (``new_rows``/``old_rows``). The functions are replaced by ones that
  write to the colocated shard of ``langmem_terms``/``langmem_decay`` on the same node
  (``langmem_colocated_shard``: the shard of the target table covering the same hash
  range), as plain local statements; on the coordinator's empty shell table they do
  nothing. The statistics stay exact and in the writing transaction, as on one server.
- the binding of a transaction's user (``langmem_bind``, migration 33) sends SET LOCAL
  commands, which Citus passes on to the workers inside a transaction block, instead
  of set_config() calls, which it does not: the policies on the shards then see the
  bound user (a store whose role they apply to opens a block for every transaction,
  ``sql.citus.session``). The policies are not forced on the owner there: the workers
  refuse COPY under row-level security, and Citus sends a multi-row insert's rows by
  COPY; so the owner, like a superuser, is kept to its user by the statements alone
  (the audit), and a store given ``rls=True`` (the app role) cannot write several rows
  in one statement.
- the reads the migrations run as the schema's owner (``OWNER_READS``: a large user's
  keyword, reference and time-window matches through their own indexes, a small user's
  reference matches, the write path's identical memory and thread; and
  ``langmem_user_nearest[_halfvec]``), called from a user's router statement, so on the
  worker of the user's shard group, query the user's shard of the table on that node
  (``langmem_user_relation``), as plain local statements, where a query of the
  distributed table would be a distributed query nested in a shard's query, which
  Citus refuses. Called on the coordinator (no shard there) they query the distributed
  table. They run as their caller (no ``SECURITY DEFINER``): the settings binding a
  user (``sql/rls.py``) are local to the coordinator's session, so the owner's check of
  the binding could not pass on a worker; the caller's own policies apply instead.
  Each is made from its migration's text (``owner_read``), so the two cannot drift.
- ``langmem_on_shard`` (migration 34), the call a statement of one user is sent as
  (``on_shard``: recall's candidates), names the user's shards on the node where it
  runs, and is distributed by its user argument, colocated with ``langmem_items`` and
  delegated even inside a transaction block (``force_delegation``): the coordinator
  sends the call to the worker holding the user's shards, planning no more than a
  function call, and the worker plans the statement as a plain local one. Sent as
  itself, the statement (a router plan: its distribution key a parameter, not a lone
  table) would be planned in full on every call, on the coordinator and again on the
  worker: Citus keeps a generic plan only for a query of one table.

Nothing here runs on a server without Citus.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langmem_layer.sql import Ddl, Sql
from langmem_layer.sql.migrations import MIGRATIONS, split_statements
from langmem_layer.sql.rls import APP_ROLE, MAINTENANCE_SETTING, USER_SETTING, policy_names
from langmem_layer.sql.users import USER_TABLES

__all__ = [
    "COLOCATE_WITH",
    "DISTRIBUTION_COLUMN",
    "OWNER_READS",
    "distribute",
    "distribution",
    "has_citus",
    "migrating",
    "on_shard",
    "owner_read",
    "session",
]

#: The table every per-user table is colocated with, and the distribution column.
COLOCATE_WITH = "langmem_items"
DISTRIBUTION_COLUMN = "user_id"


def has_citus() -> Sql:
    """Whether the database has the Citus extension (one row of ``citus``)."""
    return ("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus", {})


def session() -> Sql:
    """Whether the database has Citus, and whether the policies apply to the session's
    role (one row: ``citus``, ``subject``): on Citus a role they apply to needs its
    binding sent to the workers, which only a transaction block does. Before
    ``setup()`` (no table yet): subject unless a superuser or ``BYPASSRLS``. And
    ``bind_function``: whether the schema has ``langmem_bind`` (migration 33) yet."""
    return ("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus,"
            " CASE WHEN to_regclass(%(table)s) IS NULL THEN NOT (SELECT"
            " rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)"
            " ELSE row_security_active(%(table)s::regclass) END AS subject,"
            " to_regprocedure(%(bind)s) IS NOT NULL AS bind_function",
            {"table": COLOCATE_WITH, "bind": "langmem_bind(text, text)"})


def migrating() -> Ddl:
    """The settings of a transaction running migrations on a cluster: a migration run
    again (or a new one) may create triggers on tables already distributed, which
    ``distribute()`` then points at the colocated shards."""
    return "SET LOCAL citus.enable_unsafe_triggers = on", None


def distribution() -> Sql:
    """How each ``langmem_`` table is distributed: rows of ``table_name`` and ``method``
    (``h``: hash-distributed, ``n``: reference table, NULL: a local table)."""
    return (
        """SELECT c.relname AS table_name, p.partmethod AS method,
                  p.colocationid AS colocation
        FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
        WHERE c.relkind = 'r' AND c.relname LIKE 'langmem\\_%'
          AND c.relnamespace = current_schema()::regnamespace
        ORDER BY c.relname""",
        {},
    )


# The trigger functions of langmem_items (ddl_schema: langmem_terms_*, ddl_features:
# langmem_decay_*) with the same statements aimed at the colocated shard (its name as
# shard_name() gives it, quoted and schema-qualified as needed: format's %1$s).
_TRIGGER_FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION langmem_colocated_shard(p_shard oid, p_table regclass)
RETURNS text LANGUAGE sql STABLE AS $fn$
    SELECT shard_name(p_table, t.shardid)
    FROM pg_dist_shard i
    JOIN pg_dist_shard t ON t.logicalrelid = p_table AND t.shardminvalue = i.shardminvalue
    WHERE i.shardid = substring(p_shard::regclass::text FROM '_([0-9]+)$')::bigint
$fn$;
CREATE OR REPLACE FUNCTION langmem_terms_add() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE s text := langmem_colocated_shard(TG_RELID, 'langmem_terms');
BEGIN
    IF s IS NULL THEN RETURN NULL; END IF;
    EXECUTE format($q$
        INSERT INTO %1$s AS t (user_id, prefix, lexeme, df)
        SELECT n.user_id, n.prefix, l.lexeme, count(*)
        FROM new_rows n CROSS JOIN LATERAL langmem_terms_of(n.tsv) AS l(lexeme)
        WHERE n.is_memory
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (user_id, prefix, lexeme) DO UPDATE SET df = t.df + EXCLUDED.df$q$, s);
    RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION langmem_terms_remove() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE s text := langmem_colocated_shard(TG_RELID, 'langmem_terms');
BEGIN
    IF s IS NULL THEN RETURN NULL; END IF;
    EXECUTE format($q$
        UPDATE %1$s t SET df = t.df - d.n
        FROM (SELECT o.user_id, o.prefix, l.lexeme, count(*) AS n
              FROM old_rows o CROSS JOIN LATERAL langmem_terms_of(o.tsv) AS l(lexeme)
              WHERE o.is_memory
              GROUP BY 1, 2, 3 ORDER BY 1, 2, 3) d
        WHERE t.user_id = d.user_id AND t.prefix = d.prefix AND t.lexeme = d.lexeme$q$, s);
    RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION langmem_terms_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE s text := langmem_colocated_shard(TG_RELID, 'langmem_terms');
BEGIN
    IF s IS NULL THEN RETURN NULL; END IF;
    IF OLD.is_memory THEN
        EXECUTE format($q$
            UPDATE %1$s t SET df = t.df - 1
            WHERE t.user_id = $1 AND t.prefix = $2
              AND t.lexeme IN (SELECT langmem_terms_of($3))$q$, s)
        USING OLD.user_id, OLD.prefix, OLD.tsv;
    END IF;
    IF NEW.is_memory THEN
        EXECUTE format($q$
            INSERT INTO %1$s AS t (user_id, prefix, lexeme, df)
            SELECT $1, $2, l.lexeme, 1
            FROM langmem_terms_of($3) AS l(lexeme) ORDER BY 3
            ON CONFLICT (user_id, prefix, lexeme) DO UPDATE SET df = t.df + 1$q$, s)
        USING NEW.user_id, NEW.prefix, NEW.tsv;
    END IF;
    RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION langmem_terms_reset() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE s text := langmem_colocated_shard(TG_RELID, 'langmem_terms');
BEGIN
    IF s IS NOT NULL THEN EXECUTE format('DELETE FROM %1$s', s); END IF;
    RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION langmem_decay_remove() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE s text := langmem_colocated_shard(TG_RELID, 'langmem_decay');
BEGIN
    IF s IS NULL THEN RETURN NULL; END IF;
    EXECUTE format($q$
        DELETE FROM %1$s d USING old_rows o
        WHERE d.user_id = o.user_id AND d.prefix = o.prefix AND d.key = o.key$q$, s);
    RETURN NULL;
END $fn$;
CREATE OR REPLACE FUNCTION langmem_decay_reset() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE s text := langmem_colocated_shard(TG_RELID, 'langmem_decay');
BEGIN
    IF s IS NOT NULL THEN EXECUTE format('DELETE FROM %1$s', s); END IF;
    RETURN NULL;
END $fn$;
"""

# langmem_user_relation: the user's shard of a table on this node, else the table.
_USER_RELATION = r"""
CREATE OR REPLACE FUNCTION langmem_user_relation(p_table regclass, p_user text)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
DECLARE s text := shard_name(p_table, get_shard_id_for_distribution_column(p_table, p_user));
BEGIN
    IF to_regclass(s) IS NOT NULL THEN RETURN s; END IF;
    RETURN p_table::text;
END $fn$;
"""

#: The owner-read functions of the migrations (29-32) that read ``langmem_items``: on
#: the cluster each is made from its migration's text, reading the user's shard.
OWNER_READS = ("langmem_user_matches", "langmem_user_ref_matches", "langmem_ref_matches",
               "langmem_identical", "langmem_thread_memories", "langmem_user_window")

_FUNCTION = re.compile(r"CREATE OR REPLACE FUNCTION (\w+)\(([^)]*)\)")
_GUARD = re.compile(r"\n\s*IF NOT langmem_bound\(p_user\) THEN RETURN; END IF;")
_STATIC = re.compile(r"RETURN QUERY\s*\n(\s*SELECT .*?);\s*\n(\s*)END", re.DOTALL)
_RELATION = "langmem_user_relation('langmem_items', p_user)"


def _migration_text(name: str) -> str:
    """The latest statement of the migrations that creates the function ``name``."""
    return next(t for t in reversed([s for m in MIGRATIONS for s in split_statements(m)])
                if (f := _FUNCTION.search(t)) and f.group(1) == name)


def owner_read(name: str) -> str:
    """The migration's latest text of ``name`` (its single-server version), as it runs on
    the cluster: as its caller (the binding the owner's version checks is local to the
    coordinator's session), reading the user's shard where it is (%1$s,
    ``langmem_user_relation``) with the user as %2$L. A static query becomes an
    EXECUTE: a statement on the distributed table would be a distributed query nested
    in the shard's query, which Citus refuses."""
    text = _migration_text(name)
    args = [a.split()[0] for a in _FUNCTION.search(text).group(2).split(",")]  # type: ignore[union-attr]
    text = _GUARD.sub("", text.replace("SECURITY DEFINER", "SECURITY INVOKER"))
    if (static := _STATIC.search(text)) is not None:
        query, indent = static.groups()
        params = [a for a in args if a != "p_user"]
        query = re.sub(r"= p_user\b", "= %2$L", query)
        for n, param in enumerate(params, 1):
            query = re.sub(rf"\b{param}\b", f"${n}", query)
        query = query.strip().replace("'", "''").replace("FROM langmem_items i", "FROM %1$s i")
        execute = (f"RETURN QUERY EXECUTE format('{query}', {_RELATION}, p_user)\n"
                   f"{indent}    USING {', '.join(params)};\n{indent}END")
        return text[:static.start()] + execute + text[static.end():]
    return (text.replace("FROM langmem_items i", "FROM %1$s i").replace("%L", "%2$L")
            .replace("', p_user)", f"', {_RELATION}, p_user)"))


def _nearest(name: str, vector_type: str) -> str:
    """``langmem_user_nearest`` (of ``vector_type``) on the user's shard."""
    return f"""
CREATE OR REPLACE FUNCTION {name}(
    p_user text, p_model text, p_dims integer, p_query text,
    p_prefix text, p_prefix_like text, p_limit integer, p_ef integer)
RETURNS TABLE (prefix text, key text, sim double precision)
LANGUAGE plpgsql SECURITY INVOKER
SET search_path FROM CURRENT
SET enable_sort = off
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 100
AS $fn$
BEGIN
    PERFORM set_config('hnsw.ef_search', greatest(p_ef, 1)::text, true);
    RETURN QUERY EXECUTE format(
        'SELECT e.prefix, e.key, 1 - (e.embedding::{vector_type}(%1$s)
                                      <=> $1::{vector_type}(%1$s))
         FROM %4$s e
         WHERE e.user_id = %2$L AND e.model_id = %3$L
           AND ($2 IS NULL OR e.prefix = $2 OR e.prefix LIKE $3)
         ORDER BY e.embedding::{vector_type}(%1$s) <=> $1::{vector_type}(%1$s)
         LIMIT $4',
        p_dims, p_user, p_model, langmem_user_relation('langmem_embeddings', p_user))
    USING p_query, p_prefix, p_prefix_like, p_limit;
END
$fn$;
"""


#: ``langmem_bind`` on Citus (migration 33 on one server): the binding as SET LOCAL
#: commands, which Citus sends to every worker the transaction reaches (with
#: ``citus.propagate_set_commands = 'local'``), so the policies on the shards see the
#: bound user. A set_config() would stay on the coordinator, and on a worker the
#: policies would see no user: a role subject to them (any but a superuser, the owner
#: too, as RLS is forced) would read no row and write none.
_BIND = f"""
CREATE OR REPLACE FUNCTION langmem_bind(p_user text, p_maintenance text)
RETURNS text LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM set_config('citus.propagate_set_commands', 'local', true);
    EXECUTE format('SET LOCAL {USER_SETTING} = %L', p_user);
    EXECUTE format('SET LOCAL {MAINTENANCE_SETTING} = %L', p_maintenance);
    RETURN p_user || p_maintenance;
END
$fn$;
"""


#: ``langmem_on_shard`` with the tables of its statement as the user's shards on this
#: node (the tables themselves where the node holds none, as on the coordinator).
_SHARDS = """format(p_sql, VARIADIC ARRAY(
            SELECT langmem_user_relation(t.name::regclass, p_user)
            FROM unnest(p_tables) WITH ORDINALITY AS t(name, n) ORDER BY t.n))"""
_ON_SHARD_SIGNATURE = "langmem_on_shard(text, text, text[], text[], text[])"


def _on_shard() -> str:
    """``langmem_on_shard`` on Citus: made from migration 34's text, reading the user's
    shards, and distributed by its user, delegated even inside a transaction block."""
    text = _migration_text("langmem_on_shard")
    assert "format(p_sql, VARIADIC p_tables)" in text
    return text.replace("format(p_sql, VARIADIC p_tables)", _SHARDS) + f""";
DO $dist$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_dist_object
                   WHERE objid = '{_ON_SHARD_SIGNATURE}'::regprocedure
                     AND distribution_argument_index IS NOT NULL) THEN
        PERFORM create_distributed_function(
            '{_ON_SHARD_SIGNATURE}', 'p_user',
            colocate_with := '{COLOCATE_WITH}', force_delegation := true);
    END IF;
END
$dist$;
"""


#: What marks a value or a table in a statement given to ``on_shard``; a quoted literal
#: or a comment first, kept as it is: a table's name inside one (a user id quoted into a
#: large user's walk, ``vector.user_walk``) is text, not the table, and an apostrophe in
#: a comment opens no literal.
_SHARD_TOKENS = re.compile(
    r"('(?:[^']|'')*'|--[^\n]*)|%\((\w+)\)s|%%|\b(" + "|".join(USER_TABLES) + r")\b")
#: The kinds of piece ``_pieces`` cuts a text into.
_VERBATIM, _VALUE, _TABLE = range(3)


def on_shard(user_id: str, statement: Sql, columns: str, *,
             settings: Sequence[tuple[str, str]] = ()) -> Sql:
    """``statement``, a read of ``user_id`` alone, as one call of ``langmem_on_shard``
    (see the module's docstring): its result as ``columns`` (a column definition list,
    the statement's columns and types in order), ``settings`` set first.

    The text goes as a format() string: each table it names becomes an argument the
    function fills in (the user's shard where it runs), and each value the element of
    the function's one ``text[]`` parameter, cast back to its type, so the text is the
    same whatever the values and its prepared plan serves every call. The coordinator
    routes the call by its first argument, which must be the statement's user: the
    shards named are that user's.

    Raises:
        TypeError: a value of a type the call cannot carry (a programming error).
    """
    text, params = statement
    tables: list[str] = []
    args: list[str | None] = []
    names: dict[str, int] = {}
    out: list[str] = []
    for kind, piece in _pieces(text):
        if kind == _VERBATIM:
            out.append(piece)
        elif kind == _VALUE:
            value = params[piece]
            if piece not in names:
                args.append(_text(value))
                names[piece] = len(args)
            out.append(f"($1[{names[piece]}])::{_type(value)}")
        else:
            if piece not in tables:
                tables.append(piece)
            out.append(f"%{tables.index(piece) + 1}$s")
    return (f"SELECT * FROM langmem_on_shard(%(user_id)s, %(sql)s, %(tables)s::text[],"
            f" %(args)s::text[], %(settings)s::text[]) AS r({columns})",
            {"user_id": user_id, "sql": "".join(out), "tables": tables, "args": args,
             "settings": [v for pair in settings for v in pair]})


@functools.lru_cache(maxsize=512)
def _pieces(text: str) -> tuple[tuple[int, str], ...]:
    """``text`` cut at its values and tables (``_SHARD_TOKENS``), once per text: a turn
    sends the same few texts again and again, recall's some thousands of characters."""
    out: list[tuple[int, str]] = []
    pos = 0
    for m in _SHARD_TOKENS.finditer(text):
        out.append((_VERBATIM, text[pos:m.start()]))
        if m.group(1) is not None:  # its '%' doubled already, as psycopg's need
            out.append((_VERBATIM, m.group(1)))
        elif m.group(2) is not None:
            out.append((_VALUE, m.group(2)))
        elif m.group(3) is not None:
            out.append((_TABLE, m.group(3)))
        else:
            out.append((_VERBATIM, "%%"))
        pos = m.end()
    out.append((_VERBATIM, text[pos:]))
    return tuple(out)


def _type(value: Any) -> str:
    """The type a value is cast back to, as psycopg would bind it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if -2**31 <= value < 2**31 else "bigint"
    if isinstance(value, float):
        return "double precision"
    if isinstance(value, datetime):
        return "timestamptz"
    if isinstance(value, list | tuple):
        if all(isinstance(v, str) for v in value):
            return "text[]"
    elif isinstance(value, str) or value is None:
        return "text"
    raise TypeError(f"on_shard cannot carry a value of type {type(value).__name__}")


def _text(value: Any) -> str | None:
    """A value's text, as its type reads it."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list | tuple):  # an array literal, each element quoted
        return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
                              for v in value) + "}"
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value).lower() if isinstance(value, bool) else repr(value)


def distribute() -> Ddl:
    """Idempotent DDL distributing the schema (see the module's docstring)."""
    user_policy, maintenance_policy = policy_names()
    user_qual = f"user_id = substr(nullif(current_setting('{USER_SETTING}', true), ''), 2)"
    maint_qual = f"current_setting('{MAINTENANCE_SETTING}', true) = 'on'"
    user_qual, maint_qual = user_qual.replace("'", "''"), maint_qual.replace("'", "''")
    tables = ", ".join(f"'{t}'" for t in USER_TABLES if t != COLOCATE_WITH)
    large_user = (_USER_RELATION + "".join(owner_read(f) + ";\n" for f in OWNER_READS)
                  + _nearest("langmem_user_nearest", "vector")
                  + _nearest("langmem_user_nearest_halfvec", "halfvec"))
    return _TRIGGER_FUNCTIONS + _BIND + f"""
    SET LOCAL citus.enable_unsafe_triggers = on;
    DO $dist$
    DECLARE t text;
    BEGIN
        -- The owner is not subject to the policies here, as a superuser is not: the
        -- workers refuse COPY under row-level security, and Citus sends a multi-row
        -- insert's rows to them by COPY. Every statement still binds its user.
        FOREACH t IN ARRAY ARRAY['{COLOCATE_WITH}', {tables}] LOOP
            CONTINUE WHEN to_regclass(quote_ident(t)) IS NULL;
            EXECUTE format('ALTER TABLE %I NO FORCE ROW LEVEL SECURITY', t);
        END LOOP;
        -- Citus opens a transaction's connections to the workers as its current role:
        -- a store acting as the app role (rls=True) logs in as it there.
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}' AND NOT rolcanlogin)
        THEN
            BEGIN
                ALTER ROLE {APP_ROLE} LOGIN;
            EXCEPTION WHEN insufficient_privilege THEN
                RAISE NOTICE 'role {APP_ROLE} may not log in, so rls=True fails on this '
                    'cluster: give it LOGIN as an administrator';
            END;
        END IF;
        FOREACH t IN ARRAY ARRAY['{COLOCATE_WITH}', {tables}] LOOP
            CONTINUE WHEN to_regclass(quote_ident(t)) IS NULL;
            CONTINUE WHEN EXISTS (SELECT 1 FROM pg_dist_partition
                                  WHERE logicalrelid = to_regclass(quote_ident(t)));
            -- Citus refuses subqueries in the policies of a distributed table.
            IF EXISTS (SELECT 1 FROM pg_policies WHERE tablename = t
                       AND schemaname = current_schema() AND policyname = '{user_policy}')
            THEN
                EXECUTE format('ALTER POLICY {user_policy} ON %I USING ({user_qual}) '
                               'WITH CHECK ({user_qual})', t);
            END IF;
            IF EXISTS (SELECT 1 FROM pg_policies WHERE tablename = t
                       AND schemaname = current_schema()
                       AND policyname = '{maintenance_policy}') THEN
                EXECUTE format('ALTER POLICY {maintenance_policy} ON %I USING ({maint_qual}) '
                               'WITH CHECK ({maint_qual})', t);
            END IF;
            IF t = '{COLOCATE_WITH}' THEN
                PERFORM create_distributed_table(t, '{DISTRIBUTION_COLUMN}');
            ELSE
                PERFORM create_distributed_table(t, '{DISTRIBUTION_COLUMN}',
                                                 colocate_with => '{COLOCATE_WITH}');
            END IF;
        END LOOP;
        FOR t IN SELECT c.relname FROM pg_class c
                 WHERE c.relkind = 'r' AND c.relname LIKE 'langmem\\_%'
                   AND c.relnamespace = current_schema()::regnamespace
                   AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                                   AND a.attname = '{DISTRIBUTION_COLUMN}' AND NOT a.attisdropped)
                   AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p
                                   WHERE p.logicalrelid = c.oid)
                 ORDER BY 1 LOOP
            PERFORM create_reference_table(t);
        END LOOP;
    END
    $dist$;
    """ + large_user + _on_shard(), None
