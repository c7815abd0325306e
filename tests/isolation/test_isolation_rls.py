"""Row-level security: the database itself keeps a statement to the user bound to it.

The statement audit checks the SQL the library writes; these tests send SQL that
forgets its user predicate on purpose, as the app role, and get only the bound user's
rows (none when no user is bound).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, PutOp, SearchOp

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.sql import rls
from langmem_layer.sql.users import USER_TABLES
from langmem_layer.store import core
from langmem_layer.store.driver import Fetch
from langmem_layer.store.ops import GetManyOp
from langmem_layer.store.ops.dispatch import OPERATIONS, Registry
from langmem_layer.store.plan import MAINTENANCE, Binding, Query
from tests.conftest import on_citus
from tests.fakes import Clock

_RLS_TABLES = """
    SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity,
           array(SELECT p.polname::text FROM pg_policy p WHERE p.polrelid = c.oid
                 ORDER BY 1) AS policies
    FROM pg_class c
    WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
      AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid
                  AND a.attname = 'user_id' AND NOT a.attisdropped)
      AND c.relname LIKE 'langmem\\_%'
"""


@pytest.fixture
def two_users(store: PostgresMemoryStore, clock: Clock) -> Iterator[PostgresMemoryStore]:
    """Alice and Bob with the same words in every per-user table the layer writes."""
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)
    from langchain_core.messages import AIMessage, HumanMessage

    for user in ("alice", "bob"):
        layer.ingest(user, [HumanMessage("I am allergic to penicillin.", id=f"{user}-1"),
                            AIMessage("Noted.")], thread_id="t1")
        layer.remember(user, "Visited Lisbon in May.", thread_id="t1")
        layer.threads.record_turn(user, [HumanMessage("Where did I go?", id=f"{user}-2"),
                                 AIMessage("Lisbon.")], thread_id="t2")
        store.put(("memories", user, "notes"), "n1", {"text": "same note"})
    store.put(("shared", "docs"), "d1", {"text": "shared note"})
    yield store


def _as_app(conn: psycopg.Connection[Any], user: str | None, *, bind: bool = True) -> None:
    conn.execute("SET LOCAL ROLE " + rls.APP_ROLE)
    if bind:
        conn.execute(*rls.bind(user, role=None, switch_role=True))


def test_every_per_user_table_forces_rls_with_both_policies(pg_uri: str) -> None:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(_RLS_TABLES).fetchall()
    assert {r[0] for r in rows} == set(USER_TABLES)
    # On Citus not forced on the owner (sql/citus.py: the workers refuse COPY under RLS).
    force = not on_citus(pg_uri)
    for name, enabled, forced, policies in rows:
        assert enabled and forced == force, name
        assert set(rls.policy_names()) <= set(policies), (name, policies)


def test_the_app_role_is_subject_to_the_policies(pg_uri: str) -> None:
    with psycopg.connect(pg_uri) as conn:
        role = conn.execute(
            "SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s",
            [rls.APP_ROLE]).fetchone()
        owners = conn.execute(
            "SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class WHERE relname = ANY(%s)",
            [list(USER_TABLES)]).fetchall()
    assert role == (False, False)
    assert (rls.APP_ROLE,) not in owners


def test_a_statement_without_its_user_predicate_sees_only_the_bound_user(
    two_users: PostgresMemoryStore, pg_uri: str
) -> None:
    with psycopg.connect(pg_uri) as conn:
        everyone = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
                    for t in USER_TABLES}
        assert everyone["langmem_items"] > 2 and everyone["langmem_messages"] >= 4
        for user in ("alice", "bob"):
            with conn.transaction(force_rollback=True):
                _as_app(conn, user)
                for table in USER_TABLES:
                    users = {r[0] for r in conn.execute(f"SELECT user_id FROM {table}")}
                    assert users <= {user}, (table, users)
                # the statement the audit's own leak test sends, through the app role
                n = conn.execute("SELECT count(*) FROM langmem_items").fetchone()[0]  # type: ignore[index]
                assert 0 < n < everyone["langmem_items"]
                assert conn.execute(
                    "SELECT count(*) FROM langmem_items WHERE value::text LIKE '%same note%'"
                ).fetchone()[0] == 1  # type: ignore[index]


def test_with_no_user_bound_the_app_role_sees_nothing(
    two_users: PostgresMemoryStore, pg_uri: str
) -> None:
    with psycopg.connect(pg_uri) as conn:
        with conn.transaction(force_rollback=True):
            _as_app(conn, None, bind=False)  # never set in this session: NULL
            for table in USER_TABLES:
                assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0  # type: ignore[index]
        with conn.transaction():
            conn.execute(*rls.bind("alice", role=None, switch_role=True))
        with conn.transaction(force_rollback=True):
            # After a bound transaction the setting reads '' (not NULL): still no one,
            # not even the shared tenant, whose user_id is ''.
            _as_app(conn, None, bind=False)
            assert conn.execute("SHOW langmem.user_id").fetchone()[0] == ""  # type: ignore[index]
            for table in USER_TABLES:
                assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0  # type: ignore[index]


def test_the_app_role_cannot_write_another_users_rows(
    two_users: PostgresMemoryStore, pg_uri: str
) -> None:
    with psycopg.connect(pg_uri) as conn:
        with conn.transaction(force_rollback=True):
            _as_app(conn, "alice")
            assert conn.execute("UPDATE langmem_items SET key = key WHERE user_id = 'bob'"
                                ).rowcount == 0
            assert conn.execute("DELETE FROM langmem_messages").rowcount > 0  # alice's only
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                _as_app(conn, "alice")
                conn.execute("""INSERT INTO langmem_threads (user_id, thread_id, profile,
                    created_at, last_active_at) VALUES ('bob', 'x', 'work', now(), now())""")
        # Handing one's rows to another user: the policy's check refuses it; on Citus,
        # Citus itself first (a row's distribution column never changes).
        refused = (psycopg.errors.FeatureNotSupported if on_citus(pg_uri)
                   else psycopg.errors.InsufficientPrivilege)
        with conn.transaction(force_rollback=True):
            _as_app(conn, "alice")
            with pytest.raises(refused):
                conn.execute("UPDATE langmem_items SET user_id = 'bob'")


def test_the_maintenance_bypass_sees_every_user_and_only_while_set(
    two_users: PostgresMemoryStore, pg_uri: str
) -> None:
    with psycopg.connect(pg_uri) as conn:
        with conn.transaction(force_rollback=True):
            _as_app(conn, None)
            users = {r[0] for r in conn.execute("SELECT DISTINCT user_id FROM langmem_items")}
            assert users == {"alice", "bob", ""}
        with conn.transaction(force_rollback=True):
            _as_app(conn, None, bind=False)
            assert conn.execute("SELECT count(*) FROM langmem_items").fetchone()[0] == 0  # type: ignore[index]


def test_an_rls_store_acts_as_the_app_role_bound_to_each_statements_user(
    two_users: PostgresMemoryStore, pg_uri: str, index: dict, clock: Clock
) -> None:
    # A statement the audit's heuristic passes (an equality inside an OR, one of its
    # documented limits) yet that spans users: only RLS keeps it to the bound user.
    leak = Query("SELECT DISTINCT user_id, current_user AS who FROM langmem_items "
                 "WHERE user_id = %(user_id)s OR true ORDER BY user_id", {"user_id": "nobody"})
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock,
                                              rls=True) as store:
        rows = store._io(Fetch(leak, Binding("alice")))
        assert rows == [{"user_id": "alice", "who": rls.APP_ROLE}]
        assert store._io(Fetch(leak, Binding("carol"))) == []
        everyone = {r["user_id"] for r in store._io(Fetch(leak, MAINTENANCE))}
        assert everyone == {"alice", "bob", ""}
        # Every read surface still works, and sees its own user only.
        assert [i.key for i in store.search(("memories", "alice"))] != []
        assert {i.namespace[1] for i in store.search(("memories", "bob"))} == {"bob"}
        assert store.get(("shared", "docs"), "d1") is not None
        assert ("memories", "alice", "notes") in store.list_namespaces()
        store.put(("memories", "carol", "notes"), "n", {"text": "carol's"})
        assert store.get(("memories", "carol", "notes"), "n") is not None
    # Without rls the owner (here a superuser, which RLS never restricts) is itself.
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock,
                                              rls=False) as store:
        assert store._io(Fetch(leak, Binding("alice")))[0]["who"] != rls.APP_ROLE


def test_rls_comes_from_the_environment_unless_given(
    pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANGMEM_RLS", "1")
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        assert store.rls and store.rls_role == rls.APP_ROLE
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None, rls=False) as store:
        assert not store.rls and store.rls_role is None
    monkeypatch.setenv("LANGMEM_RLS", "0")
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        assert not store.rls


def test_every_op_has_a_deliberate_binding() -> None:
    """An op acts for the user it names, or is a declared maintenance op: a new op
    without a user must be classified here, not fall into the bypass by accident."""
    base = (GetOp, PutOp, SearchOp, ListNamespacesOp, GetManyOp)
    table: dict[type, Any] = dict(OPERATIONS)
    for cls in Registry.__subclasses__():
        table.update(cls._handlers)
    table.update(core.StoreCore._handlers)
    unclassified = [
        t.__name__ for t in table
        if t.__module__.startswith("langmem_layer.")  # not the ops tests define
        and t not in base and not core.spans_users(t)
        and "user_id" not in getattr(t, "_fields", ())
    ]
    assert unclassified == []


def test_bindings_of_ops(store: PostgresMemoryStore) -> None:
    from langmem_layer.store import ops as mops

    assert store.binding(GetOp(("memories", "a", "work"), "k")) == Binding("a")
    assert store.binding(GetOp(("shared",), "k")) == Binding("")
    assert store.binding(SearchOp(("memories", "a"))) == Binding("a")
    assert store.binding(ListNamespacesOp()) == MAINTENANCE
    assert store.binding(ListNamespacesOp(
        (MatchCondition("prefix", ("memories", "a")),))) == Binding("a")
    assert store.binding(mops.SweepExpiredOp(None)) == MAINTENANCE
    assert store.binding(mops.ClaimOp(user_id=None)) == MAINTENANCE
    assert store.binding(mops.IndexUserOp("a")) == Binding("a", owner=True)
    # A batch of several users' puts: each user's run under its own binding.
    plan = store.plan([PutOp(("memories", u, "w"), "k", {"x": 1}) for u in "aab"])
    assert [s.bind for s in plan.steps] == [Binding("a"), Binding("b")]


def test_the_large_user_functions_answer_only_for_the_bound_user(
    two_users: PostgresMemoryStore, pg_uri: str
) -> None:
    """The per-user index readers run as their owner (so an index stays usable under
    the policies) and answer exactly what the policies allow: the bound user's rows,
    another user's never, no one's without a binding."""
    call = ("SELECT count(*) FROM langmem_user_matches(%s, to_tsquery('english', "
            "'penicillin'), ARRAY['memories.alice.identity', 'memories.bob.identity', "
            "'memories.alice.work', 'memories.bob.work'], ARRAY['active'], now(), 10)")
    refs = ("SELECT count(*) FROM langmem_user_ref_matches(%s, ARRAY[%s || '.lisbon'], "
            "ARRAY['memories.alice.work', 'memories.bob.work'], ARRAY['active'], now())")
    small_refs = refs.replace("langmem_user_ref_matches", "langmem_ref_matches")
    thread = "SELECT count(*) FROM langmem_thread_memories(%s, 't1')"
    identical = "SELECT count(*) FROM langmem_identical(%s, %s, %s, now())"
    # every memory has an occurred_at: the widest window holds them all
    window = ("SELECT count(*) FROM langmem_user_window(%s, '0', '~', ARRAY["
              "'memories.alice.identity', 'memories.bob.identity', 'memories.alice.work', "
              "'memories.bob.work'], ARRAY['active'], now(), 10)")
    with psycopg.connect(pg_uri) as conn:
        # both users hold a memory with the same text: the same hash, in the same scope
        prefix, digest = conn.execute(
            "SELECT prefix, value ->> 'content_hash' FROM langmem_items WHERE user_id = "
            "'alice' AND is_memory AND value ->> 'content_hash' IS NOT NULL LIMIT 1"
        ).fetchone()  # type: ignore[misc]
        for bound, asked, expected in (("alice", "alice", True), ("alice", "bob", False),
                                       (None, "bob", True)):
            with conn.transaction(force_rollback=True):
                _as_app(conn, bound)  # None: the maintenance binding
                found = conn.execute(call, (asked,)).fetchone()[0]  # type: ignore[index]
                named = conn.execute(refs, (asked, asked)).fetchone()[0]  # type: ignore[index]
                dated = conn.execute(window, (asked,)).fetchone()[0]  # type: ignore[index]
                small = conn.execute(small_refs, (asked, asked)).fetchone()[0]  # type: ignore[index]
                threaded = conn.execute(thread, (asked,)).fetchone()[0]  # type: ignore[index]
                scope = prefix.replace(".alice.", f".{asked}.")
                same = conn.execute(identical, (asked, scope, digest)).fetchone()[0]  # type: ignore[index]
                assert (found > 0, named > 0, dated > 0, small > 0, threaded > 0, same > 0) == (
                    (expected,) * 6), (bound, asked)
        with conn.transaction(force_rollback=True):
            _as_app(conn, None, bind=False)  # no one bound
            assert conn.execute(call, ("alice",)).fetchone()[0] == 0  # type: ignore[index]
            assert conn.execute(window, ("alice",)).fetchone()[0] == 0  # type: ignore[index]
            assert conn.execute(small_refs, ("alice", "alice")).fetchone()[0] == 0  # type: ignore[index]
            assert conn.execute(thread, ("alice",)).fetchone()[0] == 0  # type: ignore[index]


def test_by_default_a_store_acts_as_the_app_role_where_the_database_allows_it(
    pg_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neither rls nor LANGMEM_RLS: the app role wherever it exists and the connection
    # may act as it; a database without it runs the transaction as the connection's
    # own role, still bound, instead of failing every statement.
    monkeypatch.delenv("LANGMEM_RLS", raising=False)
    leak = Query("SELECT current_user AS who", None)
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        assert store.rls and store.rls_where_possible
        who = store._io(Fetch(leak, Binding("alice")))[0]["who"]
        assert who == rls.APP_ROLE  # on Citus too
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None, rls=True) as store:
        assert not store.rls_where_possible  # asked for: required
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None,
                                              rls_role="langmem_no_such_role") as store:
        assert store._io(Fetch(leak, Binding("alice")))[0]["who"] != "langmem_no_such_role"
    with (
        PostgresMemoryStore.from_conn_string(pg_uri, index=None, rls=True,
                                             rls_role="langmem_no_such_role") as store,
        pytest.raises(psycopg.errors.InvalidParameterValue, match="langmem_no_such_role"),
    ):
        store._io(Fetch(leak, Binding("alice")))


def test_the_cluster_form_of_each_owner_read_is_its_migrations_text_on_the_users_shard() -> None:
    # Made from the migration's text: the same name, arguments, columns and conditions,
    # run as the caller (the binding is the coordinator's) on the user's shard.
    from langmem_layer.sql import citus
    from langmem_layer.sql.migrations import MIGRATIONS, split_statements

    texts = [s for m in MIGRATIONS for s in split_statements(m)]
    for name in citus.OWNER_READS:
        single = next(t for t in reversed(texts) if f"FUNCTION {name}(" in t)
        cluster = citus.owner_read(name)
        assert "SECURITY DEFINER" in single and "langmem_bound(p_user)" in single
        assert "SECURITY INVOKER" in cluster and "langmem_bound" not in cluster
        assert "langmem_user_relation('langmem_items', p_user), p_user)" in cluster
        assert "FROM langmem_items" not in cluster and "FROM %1$s i" in cluster
        head = single.split("AS $fn$")[0].replace("SECURITY DEFINER", "SECURITY INVOKER")
        assert cluster.startswith(head)
    assert citus.owner_read("langmem_identical").count("$2") == 1  # each value its own $n
