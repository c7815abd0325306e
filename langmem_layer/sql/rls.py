"""Row-level security: the policies on every per-user table, and the statement binding a user.

Defence in depth under the statement audit (``tests/audit.py``): every per-user table
(``USER_TABLES``) has RLS enabled and forced, so a
statement that forgot its ``user_id = %(user_id)s`` still sees only the bound user's rows.
Two permissive policies, applying to every role that is not a superuser or
``BYPASSRLS`` (FORCE makes them apply to the tables' owner too):

- ``langmem_user``: the row's ``user_id`` is the user bound to the transaction by
  ``bind`` (setting ``USER_SETTING``). The setting holds ``=`` + the user id,
  so a setting that is unset (NULL) or reset to ``''`` after an earlier transaction
  binds no one, not even the shared tenant ``''``.
- ``langmem_maintenance``: any row, while ``MAINTENANCE_SETTING`` is ``on`` in
  the transaction. Only the statements that list users for maintenance set it
  (docs/isolation.md).

Both read the settings through a scalar subquery, which PostgreSQL evaluates once per
statement (an InitPlan) rather than once per row.
"""

from __future__ import annotations

from langmem_layer.sql import Params, Sql

__all__ = [
    "APP_ROLE",
    "MAINTENANCE_SETTING",
    "USER_SETTING",
    "bind",
    "enable_rls",
    "policy_names",
]

#: The role the store switches to with ``rls=True``: DML on the langmem tables only,
#: subject to the policies (not the owner, not a superuser, not BYPASSRLS).
APP_ROLE = "langmem_app"
#: The transaction-local setting naming the bound user (``=`` + user id).
USER_SETTING = "langmem.user_id"
#: The transaction-local setting of the maintenance bypass (``on``).
MAINTENANCE_SETTING = "langmem.maintenance"

#: The table whose grant says the app role was given the tables (``bind``).
_GRANTED = "langmem_items"
_USER_POLICY = "langmem_user"
_MAINTENANCE_POLICY = "langmem_maintenance"


def policy_names() -> tuple[str, str]:
    """The names of the two policies every per-user table carries."""
    return _USER_POLICY, _MAINTENANCE_POLICY


def bind(user_id: str | None, *, role: str | None, switch_role: bool,
         commit_async: bool = False, where_possible: bool = False,
         schema_ready: bool = True) -> Sql:
    """The statement that binds a user (or, with ``None``, the maintenance bypass) to the
    rest of the transaction, and sets its role.

    Args:
        user_id: The user every following statement acts for; ``None`` for maintenance.
        role: The role to act as when ``switch_role``; ``None``: the session's own.
        switch_role: Act as ``role`` (``True``), or as the session's role (``False``:
            DDL such as a user's own index needs the owner).
        commit_async: Also let the transaction commit without waiting for its WAL to
            reach the disk (``synchronous_commit`` off, for this transaction only): for
            transactions that write nothing a crash must keep (the ops registered
            with ``async_commit``, ``langmem_layer.store.ops.dispatch.Operation``).
        where_possible: Act as ``role`` only where the database allows it (the
            default of a store given neither ``rls`` nor ``LANGMEM_RLS``): the role
            exists, the connection may act as it, and it was granted the tables; on
            Citus too, where the statements that would send rows to the workers
            with COPY, which they refuse under row-level security, have forms
            without it (``langmem_layer.sql.citus``). Decided by the server in the
            same statement, so it costs no round trip; elsewhere the transaction
            acts as the connection's own role, still bound.
        schema_ready: Bind through ``langmem_bind`` (migration 33), which a server
            defines its own way: on Citus as commands the workers receive too
            (``langmem_layer.sql.citus``). ``False`` for setup's statements and a
            schema older than that migration: the two settings are set directly, on
            this server only.
    """
    value = "" if user_id is None else "=" + user_id
    maintenance = "on" if user_id is None else ""
    params: Params = {"user": value, "maintenance": maintenance}
    if schema_ready:
        sql = "SELECT langmem_bind(%(user)s, %(maintenance)s)"
    else:
        sql = ("SELECT set_config(%(user_setting)s, %(user)s, true), "
               "set_config(%(maintenance_setting)s, %(maintenance)s, true)")
        params.update(user_setting=USER_SETTING, maintenance_setting=MAINTENANCE_SETTING)
    if role is not None and switch_role and where_possible:
        # CASE, not AND: its branches are evaluated in order, and pg_has_role and
        # has_table_privilege raise for a role or table that does not exist. Granted
        # the tables: a database restored without its privileges has the role (roles
        # are the server's) but not its grants until setup() or restore gives them.
        sql += (", set_config('role', CASE WHEN to_regrole(%(role)s) IS NULL THEN 'none'"
                " WHEN to_regclass(%(granted)s) IS NULL THEN 'none'"
                " WHEN NOT pg_has_role(%(role)s, 'MEMBER') THEN 'none'"
                " WHEN has_table_privilege(%(role)s, %(granted)s, 'SELECT')"
                " THEN %(role)s ELSE 'none' END, true)")
        params.update(role=role, granted=_GRANTED)
    elif role is not None:
        sql += ", set_config('role', %(role)s, true)"
        params["role"] = role if switch_role else "none"
    if commit_async:
        sql += ", set_config('synchronous_commit', 'off', true)"
    return sql, params


def enable_rls(tables: tuple[str, ...]) -> str:
    """Idempotent DDL: the app role (if this role may create it), its grants, and RLS
    with both policies on each of ``tables``."""
    names = ", ".join(f"'{t}'" for t in tables)
    user_qual = (
        f"user_id = (SELECT substr(nullif(current_setting('{USER_SETTING}', true), ''), 2))"
    )
    maint_qual = f"(SELECT current_setting('{MAINTENANCE_SETTING}', true) = 'on')"
    # Both go inside a quoted format() string below.
    user_qual, maint_qual = user_qual.replace("'", "''"), maint_qual.replace("'", "''")
    return f"""
    DO $rls$
    DECLARE t text;
    BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
            BEGIN
                CREATE ROLE {APP_ROLE} NOLOGIN;
            EXCEPTION WHEN insufficient_privilege OR duplicate_object OR unique_violation THEN
                RAISE NOTICE 'role {APP_ROLE} not created (%): create it as an '
                    'administrator and run setup() again to grant it', SQLERRM;
            END;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO {APP_ROLE}', current_schema());
            FOR t IN SELECT c.relname FROM pg_class c
                     WHERE c.relname LIKE 'langmem\\_%' AND c.relkind = 'r'
                       AND c.relnamespace = current_schema()::regnamespace LOOP
                EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO {APP_ROLE}', t);
            END LOOP;
            EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO {APP_ROLE}',
                           current_schema());
            BEGIN
                EXECUTE format('GRANT {APP_ROLE} TO %I', current_user);
            EXCEPTION WHEN OTHERS THEN
                RAISE NOTICE 'not granted {APP_ROLE} to %: %', current_user, SQLERRM;
            END;
        END IF;
        FOREACH t IN ARRAY ARRAY[{names}] LOOP
            -- A table a later migration creates gets RLS from that migration.
            CONTINUE WHEN to_regclass(quote_ident(t)) IS NULL;
            EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
            EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
            IF NOT EXISTS (SELECT 1 FROM pg_policies WHERE tablename = t
                           AND schemaname = current_schema() AND policyname = '{_USER_POLICY}')
            THEN
                EXECUTE format('CREATE POLICY {_USER_POLICY} ON %I USING ({user_qual}) '
                               'WITH CHECK ({user_qual})', t);
            END IF;
            IF NOT EXISTS (SELECT 1 FROM pg_policies WHERE tablename = t
                           AND schemaname = current_schema()
                           AND policyname = '{_MAINTENANCE_POLICY}') THEN
                EXECUTE format('CREATE POLICY {_MAINTENANCE_POLICY} ON %I USING ({maint_qual}) '
                               'WITH CHECK ({maint_qual})', t);
            END IF;
        END LOOP;
    END
    $rls$;
    """
