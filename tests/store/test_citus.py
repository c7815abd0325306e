"""On Citus (``make test-citus``): the schema distributed by ``setup()``, and a turn's
statements planned as router plans (one task, on the shard group of the user).

Runs only against a Citus coordinator (``LANGMEM_TEST_DATABASE_URL``, set by ``make
test-citus``); ``make test`` does not collect it (``collect_ignore`` in
``tests/conftest.py``: it needs a cluster, which ``make test`` does not start).
``CITUS_PENDING`` lists the tests of the suite that ``make test-citus`` runs but that
cannot pass on Citus yet, each with its reason; ``tests/conftest.py`` marks them as
expected failures there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.base import PutOp
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo as conninfo_for

from langmem_layer import Kind, Layer, MemoryLayer, MemoryRecord, MemorySettings
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.sql.users import USER_TABLES
from langmem_layer.store import ops as mops
from langmem_layer.store.ops import RecallOp
from langmem_layer.store.sync import PostgresMemoryStore
from tests import audit
from tests.conftest import SERVER_ENV, on_citus
from tests.fakes import Clock

_NODE_STATISTICS = (
    "a deliberate difference: the test reads the server's own statistics views "
    "(pg_stat_*: index scans, HOT updates), which on Citus count on the worker that "
    "holds the shard, not on the coordinator the test is connected to; what the "
    "statistics stand for is checked there by the plans (this file's EXPLAIN tests)")

#: Tests ``make test-citus`` runs that do not pass on Citus (node id, or a parametrised
#: test's name, -> reason); tests/conftest.py marks them as expected failures there.
#: Remove an entry when its test passes on Citus (it then XPASSes).
CITUS_PENDING: dict[str, str] = {
    "tests/store/test_vector_search.py::test_exact_then_per_user_hnsw_keep_limit_and_recall":
        _NODE_STATISTICS,
    "tests/jobs/test_lifecycle_hot.py::test_a_nights_moves_are_hot": _NODE_STATISTICS,
    "tests/jobs/test_lifecycle_pass.py::test_one_pass_equals_the_rules_one_by_one": (
        "a deliberate difference (docs/scaling.md): the test runs the one-server form of "
        "the nightly pass (sql/transitions.lifecycle_pass, one statement) against its "
        "rule-by-rule reference; on Citus the store runs the pass as steps on the user's "
        "shard group instead, which tests/jobs/test_lifecycle_decay_table.py and "
        "tests/jobs/test_jobs.py check there"),
}


NOW = datetime(2026, 11, 18, tzinfo=UTC)
_NO_WAKE = MemorySettings(extract_every_n_turns=1000)


@pytest.fixture(autouse=True)
def _citus(pg_uri: str) -> None:
    if not on_citus(pg_uri):
        pytest.fail(f"{SERVER_ENV} is not a Citus coordinator (no citus extension)")


# -- the schema ---------------------------------------------------------------------------

def _distribution(uri: str) -> dict[str, tuple[str | None, int | None]]:
    with psycopg.connect(uri) as conn:
        rows = conn.execute(
            """SELECT c.relname, p.partmethod, p.colocationid
            FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
            WHERE c.relkind = 'r' AND c.relname LIKE 'langmem\\_%'
              AND c.relnamespace = current_schema()::regnamespace""").fetchall()
    return {name: (method, colocation) for name, method, colocation in rows}


def test_every_per_user_table_is_distributed_with_the_items_and_the_rest_replicated(
    pg_uri: str,
) -> None:
    tables = _distribution(pg_uri)
    colocation = tables["langmem_items"][1]
    for name in USER_TABLES:
        assert tables[name] == ("h", colocation), name
    for name in set(tables) - set(USER_TABLES):
        assert tables[name][0] == "n", name  # reference tables: migrations, job runs


def test_setup_again_changes_nothing_and_distributes_a_new_table(pg_uri: str) -> None:
    before = _distribution(pg_uri)
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        assert store.setup() == []
    assert _distribution(pg_uri) == before
    # A table a later migration adds: a per-user one (in USER_TABLES in the library)
    # would be distributed; one without user_id becomes a reference table.
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("CREATE TABLE langmem_citus_probe (v int PRIMARY KEY)")
    try:
        with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
            store.setup(distributed=True)
        after = _distribution(pg_uri)
        assert after["langmem_citus_probe"][0] == "n"
        assert {k: v for k, v in after.items() if k != "langmem_citus_probe"} == before
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute("DROP TABLE langmem_citus_probe")


def test_the_policies_of_distributed_tables_read_the_settings_without_a_subquery(
    pg_uri: str,
) -> None:
    with psycopg.connect(pg_uri) as conn:
        quals = conn.execute(
            """SELECT tablename, policyname, qual FROM pg_policies
            WHERE tablename = ANY(%s)""", [list(USER_TABLES)]).fetchall()
    assert len(quals) == 2 * len(USER_TABLES)
    for table, policy, qual in quals:
        assert "SELECT" not in qual.upper(), (table, policy, qual)
        assert "current_setting" in qual, (table, policy, qual)


@pytest.fixture
def login_uri(pg_uri: str) -> Iterator[str]:
    """The database as a login that is neither a superuser nor the tables' owner, so
    subject to the policies, which the workers check: its binding must reach them
    (langmem_bind's SET LOCAL, inside a block), or it would read no row and write none."""
    role = "langmem_citus_login"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP ROLE IF EXISTS {r}").format(r=pgsql.Identifier(role)))
        conn.execute(pgsql.SQL("CREATE ROLE {r} LOGIN NOSUPERUSER").format(
            r=pgsql.Identifier(role)))
        conn.execute(pgsql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN "
                               "SCHEMA public TO {r}").format(r=pgsql.Identifier(role)))
        conn.execute(pgsql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {r}"
                               ).format(r=pgsql.Identifier(role)))
    try:
        yield conninfo_for(pg_uri, user=role)
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(pgsql.SQL("DROP OWNED BY {r}").format(r=pgsql.Identifier(role)))
            conn.execute(pgsql.SQL("DROP ROLE {r}").format(r=pgsql.Identifier(role)))


def test_a_role_the_policies_apply_to_reads_and_writes_its_users_rows_on_the_workers(
        store: PostgresMemoryStore, login_uri: str) -> None:
    store.put(("memories", "alice"), "k1", {"text": "alice's"})
    store.put(("memories", "bob"), "k1", {"text": "bob's"})
    # As itself (rls=False), not as the app role: the policies apply to the login.
    with PostgresMemoryStore.from_conn_string(login_uri, index=None, rls=False) as as_login:
        item = as_login.get(("memories", "alice"), "k1")
        assert item is not None and item.value == {"text": "alice's"}
        as_login.put(("memories", "bob"), "k2", {"text": "bob's second"})
        assert as_login.transaction_blocks
        assert sorted(i.key for i in as_login.search(("memories", "bob"))) == ["k1", "k2"]
        with psycopg.connect(login_uri) as conn:  # unbound, the same statement sees nothing
            assert conn.execute("SELECT count(*) FROM langmem_items").fetchone() == (0,)


@pytest.mark.parametrize("vectors", [False, True])
def test_a_role_the_policies_apply_to_records_a_turn_and_its_extraction_writes_memories(
        login_uri: str, index: dict, clock: Clock, vectors: bool) -> None:
    # The workers refuse COPY under row-level security: every write of a turn and of its
    # extraction must reach the shard as an INSERT (Query.parts), none copied through
    # the coordinator, or the extraction would fail and the turn be remembered by nothing.
    with PostgresMemoryStore.from_conn_string(login_uri, index=index if vectors else None,
                                              clock=clock, rls=False) as as_login:
        layer = MemoryLayer(as_login, extractor=RuleExtractor(), clock=clock,
                            settings=_NO_WAKE)
        turn = [HumanMessage("I moved to Lisbon last year and I love green tea.", id="h1"),
                AIMessage("Noted.", id="a1")]
        user = "carol" if vectors else "dave"
        assert layer.threads.record_turn(user, turn, thread_id="t1") is not None
        layer.admin.process_pending(user_id=user)
        found = layer.threads.load_thread(user, [HumanMessage("Where do I live?")],
                                          "Where do I live?", thread_id="t1",
                                          reinforce=False)
        assert any("Lisbon" in r.record.content for r in found.recalled)
        assert as_login.transaction_blocks
        layer.close()


def _terms(uri: str, user: str) -> dict[str, int]:
    with psycopg.connect(uri) as conn:
        rows = conn.execute("SELECT lexeme, df FROM langmem_terms WHERE user_id = %s "
                            "AND df > 0", [user]).fetchall()
    return dict(rows)


def _recount(uri: str, user: str) -> dict[str, int]:
    with psycopg.connect(uri) as conn:
        rows = conn.execute(
            """SELECT l.lexeme, count(*) FROM langmem_items i
            CROSS JOIN LATERAL langmem_terms_of(i.tsv) AS l(lexeme)
            WHERE i.user_id = %s AND i.is_memory GROUP BY 1""", [user]).fetchall()
    return dict(rows)


def test_term_statistics_and_decay_scores_follow_the_items_on_the_workers(
    store: PostgresMemoryStore, pg_uri: str,
) -> None:
    layer = MemoryLayer(store, settings=_NO_WAKE)
    for user in ("alice", "bob"):
        layer.remember(user, f"{user} drinks green tea every morning")
        layer.remember(user, f"{user} lives in Lisbon")
    kept = layer.remember("alice", "Alice plays the cello")
    assert _terms(pg_uri, "alice") == _recount(pg_uri, "alice") != {}
    assert _terms(pg_uri, "bob") == _recount(pg_uri, "bob") != {}
    with psycopg.connect(pg_uri) as conn:
        conn.execute("INSERT INTO langmem_decay (user_id, prefix, key, decay) "
                     "SELECT user_id, prefix, key, 0.5 FROM langmem_items "
                     "WHERE user_id = 'alice' AND is_memory")
    assert layer.forget("alice", kept.key, hard=True)
    assert _terms(pg_uri, "alice") == _recount(pg_uri, "alice")
    with psycopg.connect(pg_uri) as conn:
        (left,) = conn.execute("SELECT count(*) FROM langmem_decay d WHERE user_id = 'alice' "
                               "AND NOT EXISTS (SELECT 1 FROM langmem_items i WHERE "
                               "i.user_id = d.user_id AND i.prefix = d.prefix "
                               "AND i.key = d.key)").fetchone()
    assert left == 0
    layer.close()


# -- router plans -------------------------------------------------------------------------

@contextmanager
def _statements() -> Iterator[list[tuple[str, Any]]]:
    """The statements library code sends inside the block, with their parameters."""
    seen: list[tuple[str, Any]] = []
    original = psycopg.Cursor.execute

    def execute(self: Any, query: Any, params: Any = None, *a: Any, **k: Any) -> Any:
        if isinstance(query, str):
            seen.append((query, params))
        return original(self, query, params, *a, **k)

    psycopg.Cursor.execute = execute  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        psycopg.Cursor.execute = original  # type: ignore[method-assign]


def _one_user(seen: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The statements on per-user tables that bind one user (not DDL, not maintenance),
    and the calls that run a statement on the user's shard (``citus.on_shard``)."""
    out = []
    for sql, params in seen:
        if sql in {s for s, _ in out}:
            continue
        if "FROM langmem_on_shard" not in sql and (
                not audit.per_user([sql]) or audit.check(sql)):
            continue
        out.append((sql, params))
    return out


def _plan(uri: str, sql: str, params: Any) -> str:
    """EXPLAIN of the statement with its parameters written in as literals (Citus cannot
    plan some statements with parameters under EXPLAIN; a turn's run binds them)."""
    with psycopg.connect(uri) as conn:
        if isinstance(params, dict):
            sql = psycopg.ClientCursor(conn).mogrify(sql, params)
        elif params:
            literals = [pgsql.Literal(p).as_string(conn) for p in params]
            sql = re.sub(r"\$(\d+)", lambda m: literals[int(m.group(1)) - 1], sql)
        plan = "\n".join(r[0] for r in conn.execute(
            pgsql.SQL("EXPLAIN ") + pgsql.SQL(sql)).fetchall())  # type: ignore[arg-type]
        conn.rollback()
    return plan


def _not_router(plan: str) -> str | None:
    """Why a plan is not one task on one shard group (None: it is)."""
    if "Citus" not in plan:
        return "not a distributed plan"
    if "Distributed Subplan" in plan:
        return "a distributed subplan (run first, its result sent back)"
    if "pull to coordinator" in plan:
        return "INSERT ... SELECT pulled to the coordinator"
    tasks = [int(n) for n in re.findall(r"Task Count: (\d+)", plan)]
    if not tasks or set(tasks) != {1}:
        return f"task counts {tasks}"
    return None


def _shards_written(uri: str, sql: str, params: Any, user: str) -> set[str]:
    """Run the statement in a transaction rolled back, with Citus logging the commands it
    sends to the workers: the shard groups (hash ranges) of the distributed tables they
    name."""
    notices: list[str] = []
    with psycopg.connect(uri) as conn, psycopg.RawCursor(conn) as cur:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        cur.execute("SET LOCAL citus.log_remote_commands = on")
        cur.execute("SET LOCAL client_min_messages = log")
        try:
            with conn.transaction():
                cur.execute(sql, params)
        except psycopg.DatabaseError as e:  # Citus reports a worker's as internal
            if "duplicate key" not in str(e):
                raise
            # A write applied once already (an op's marker): the same for another user.
            notices.clear()
            cur.execute(sql, [f"{p}-again" if p == user else p for p in params])
        cur.execute("SET LOCAL client_min_messages = notice")
        ids = {int(n) for m in notices for n in re.findall(r"langmem_\w+?_(\d{6,})", m)}
        ranges = {r[0] for r in conn.execute(
            "SELECT shardminvalue FROM pg_dist_shard WHERE shardid = ANY(%s) "
            "AND shardminvalue IS NOT NULL", [list(ids)]).fetchall()}
        conn.rollback()
    return ranges


#: Plans that are not router plans but execute on one shard group: Citus plans an
#: INSERT ... SELECT whose rows come from parameters (unnest, jsonb_to_recordset) by
#: computing the rows on the coordinator and copying them to their shard, even when
#: every row has the same user_id (no router plan for INSERT ... SELECT without a
#: distributed table in the SELECT). Checked by running them: one shard group written.
COORDINATOR_INSERT = ("INSERT ... SELECT pulled to the coordinator",
                      "a distributed subplan (run first, its result sent back)")


def _assert_router(uri: str, seen: list[tuple[str, Any]], least: int = 1,
                   user: str = "alice") -> None:
    statements = _one_user(seen)
    assert len(statements) >= least, [s for s, _ in seen]
    bad = []
    for sql, params in statements:
        why = _not_router(_plan(uri, sql, params))
        if (why in COORDINATOR_INSERT and "INSERT INTO" in sql.upper()
                and len(_shards_written(uri, sql, params, user)) == 1):
            print(f"one shard, via the coordinator: {' '.join(sql.split())[:100]}")
            continue
        print(f"{why or 'router'}: {' '.join(sql.split())[:100]}")
        if why is not None:
            bad.append(f"{why}: {' '.join(sql.split())[:160]}")
    assert not bad, "\n".join(bad)


def _value(i: int, content: str) -> dict[str, Any]:
    return MemoryRecord(content=content, kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                        occurred_at=NOW - timedelta(days=i), last_accessed_at=NOW,
                        refs=["lisbon"] if "Lisbon" in content else []).to_value()


def test_the_stores_put_get_and_search_of_one_user_are_router_plans(
    store: PostgresMemoryStore, pg_uri: str,
) -> None:
    ns = ("memories", "alice", "work")
    with _statements() as seen:
        store.put(ns, "k1", _value(0, "Alice moved to Lisbon in May"))
        store.put(ns, "k2", _value(1, "the quarterly report is due on Friday"))
        assert store.get(ns, "k1") is not None
        assert store.search(ns, query="Lisbon", limit=5)
        store.delete(ns, "k2")
    _assert_router(pg_uri, seen, least=4)


def test_a_turns_read_is_a_router_plan(store: PostgresMemoryStore, pg_uri: str) -> None:
    store.batch([PutOp(("memories", "alice", "work"), f"m{i}", _value(i, t)) for i, t in
                 enumerate(["Alice moved to Lisbon in May", "status meeting on thursday",
                            "Alice prefers short answers"])])
    with _statements() as seen:
        (cands,) = store.batch([RecallOp("alice", ("work",), query="where is Lisbon",
                                         now=NOW)])
    assert cands
    # Recall goes as one call the coordinator delegates to the user's worker: a single
    # task there, whose statement the worker plans alone.
    assert [s for s, _ in seen if "FROM langmem_on_shard(" in s]
    _assert_router(pg_uri, seen)


def test_a_turns_write_and_the_extractions_apply_are_router_plans(
    store: PostgresMemoryStore, pg_uri: str, clock: Clock,
) -> None:
    layer = MemoryLayer(store, clock=clock, settings=_NO_WAKE)
    turn = [HumanMessage("I moved to Lisbon last year and I love green tea.", id="h1"),
            AIMessage("Noted.", id="a1")]
    with _statements() as seen:
        assert layer.threads.record_turn("alice", turn, thread_id="t1") is not None
    _assert_router(pg_uri, seen)
    with _statements() as seen:
        layer.admin.process_pending(user_id="alice")
    with psycopg.connect(pg_uri) as conn:
        (memories,) = conn.execute("SELECT count(*) FROM langmem_items WHERE "
                                   "user_id = 'alice' AND is_memory").fetchone()
    assert memories > 0
    _assert_router(pg_uri, seen, least=2)
    layer.close()


def test_a_store_acting_as_the_app_role_commits_a_batch_mixing_the_owners_ops_in_parts(
    pg_uri: str, index: dict, clock: Clock,
) -> None:
    # Citus refuses a second role on shard placements one role modified in the same
    # transaction: the owner's op (the user's own index: DDL, and its record) and the
    # role's (a re-extraction fallback) go as one transaction each, in order.
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock,
                                              rls=True) as as_role:
        as_role.batch([PutOp(("memories", "carol", "work"), f"m{i}", _value(i, t))
                       for i, t in enumerate(["Carol moved to Lisbon", "tea at five"])])
        done = as_role.batch([
            mops.IndexUserOp("carol", NOW),
            mops.RecordFallbackOp("carol", "k1", "work", [{"type": "human"}], NOW,
                                  "rules", "t1"),
            mops.IndexUserOp("dave", NOW)])
    assert len(done) == 3
    with psycopg.connect(pg_uri) as conn:
        indexed = conn.execute("SELECT user_id FROM langmem_vector_indexes WHERE user_id "
                               "IN ('carol', 'dave') ORDER BY 1").fetchall()
        fallbacks = conn.execute("SELECT count(*) FROM langmem_reextract "
                                 "WHERE user_id = 'carol'").fetchone()
    assert indexed == [("carol",), ("dave",)] and fallbacks == (1,)
