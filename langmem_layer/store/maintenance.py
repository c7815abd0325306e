"""Maintenance: schema migrations, and the jobs behind the stores' maintenance methods.

The jobs combine several plans (one transaction each) and are run by either store's
driver, so ``setup()``, ``sweep_ttl()``, ``purge_embedding_cache()`` and
``index_large_users()`` are one line in each store. The ops they run (TTL sweep,
cache purge, indexes of large users) are in ``langmem_layer.store.ops.housekeeping``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import psycopg

from langmem_layer.errors import ConfigurationError, LangmemError
from langmem_layer.sql import backfills as bfsql
from langmem_layer.sql import citus as citussql
from langmem_layer.sql import migrations as migsql
from langmem_layer.store import ops as mops
from langmem_layer.store.base_store import ItemHandlers
from langmem_layer.store.driver import Autocommit, Execution, Fetch, Job, Sleep
from langmem_layer.store.plan import Binding, Handler, Plan, Query, Step

__all__ = ["ANN_MIN_USER_VECTORS", "MIGRATION_ATTEMPTS", "Maintenance"]

logger = logging.getLogger("langmem_layer.store")

#: Tries of one migration whose lock waits time out (``migsql.LOCK_TIMEOUT``), with a
#: growing pause between them.
MIGRATION_ATTEMPTS = 8
LOCK_NOT_AVAILABLE = "55P03"


def _sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a database error, or of the one behind a library error."""
    return getattr(error, "sqlstate", None) or getattr(error.__cause__, "sqlstate", None)

#: Users with at least this many vectors of the store's model get their own HNSW index
#: (benchmarks/vector_bench.py: exact search costs ~10 ms p50 at 5k vectors, an index
#: ~2 ms at any size). Not lower: every partial index adds to the planning of
#: statements on the embeddings table, so indexes are kept for the few large users.
ANN_MIN_USER_VECTORS = 5_000


#: Setup's transactions: as the owner, under the maintenance binding, set without the
#: binding function (``langmem_layer.sql.rls.bind``, ``schema_ready``), which a schema
#: older than migration 33 lacks, and which on Citus would send SET LOCAL commands to
#: the workers, where they meet Citus' own DDL. No statement of setup's reads rows under
#: the policies a binding sent on would serve: the owner is not held to them on Citus.
_SETUP = Binding(None, owner=True, early=True)


class Maintenance(ItemHandlers, Execution):
    """Maintenance handlers and the jobs behind the stores' maintenance methods."""

    # -- jobs -------------------------------------------------------------------------

    def pending_plan(self) -> Plan:
        """The plan that creates the version table if needed and reads which migrations
        are pending."""
        return Plan([Step([0], self._pending_versions(), bind=_SETUP)], 1, None, None)

    def setup_plan(self, version: int | None = None, *, record: bool = True) -> Plan:
        """The plan that applies migration ``version`` (``None``: every pending one) in
        one transaction, unless another ``setup()`` applied it first (see ``setup()``).
        ``record=False``: a migration with a backfill (``sql/backfills.py``) is sent
        without its data statement, and its version is left to be recorded after the
        backfill's batches."""
        # Migrations run as the owner, under the maintenance bypass: a data migration
        # on a table with forced RLS would otherwise see no rows.
        return Plan([Step([0], self._setup(version, record=record),
                          bind=_SETUP)], 1, None, None)

    def _owner_plan(self, statements: list[Query]) -> Plan:
        """One transaction of ``statements`` as the owner, under the maintenance
        binding, its lock waits bounded as a migration's."""
        def handler() -> Handler:
            yield Query(*migsql.set_lock_timeout())
            rows = None
            for q in statements:
                rows = yield q
            return rows

        return Plan([Step([0], handler(), bind=_SETUP)], 1, None, None)

    def distribute_plan(self, distributed: bool | None = None) -> Plan:
        """The plan that distributes the schema on Citus (see ``setup()``), in a
        transaction after the migrations': ``None`` distributes when the database has
        the ``citus`` extension."""
        return Plan([Step([0], self._distribute(distributed), bind=_SETUP)],
                    1, None, None)

    def _setup_job(self, distributed: bool | None = None) -> Job:
        # Each pending migration in a transaction of its own, its indexes on tables that
        # exist built beforehand without blocking writes, and its locks waited for at
        # most migsql.LOCK_TIMEOUT (then the migration is tried again): an upgrade of a
        # served database blocks its reads and writes for a migration's DDL, not for
        # the whole upgrade (benchmarks/migration_locks.py).
        pending = (yield from self._execution(self.pending_plan))[0]
        applied = []
        for version in pending:
            if indexes := migsql.online_indexes(version):
                yield from self._index_functions(version)
            for index in indexes:
                yield from self._online_index(index)
            backfill = bfsql.backfill(version)
            done = yield from self._retrying(
                lambda v=version, r=backfill is None: self.setup_plan(  # type: ignore[misc]
                    v, record=r),
                f"migration {version}")
            if backfill is not None and done:  # not applied by another setup() first
                yield from self._backfill(backfill, version)
                record = Query(*migsql.record_version(version))
                yield from self._retrying(lambda q=record: self._owner_plan([q]),  # type: ignore[misc]
                                          f"migration {version}")
            applied.extend(done)
        yield from self._execution(lambda: self.distribute_plan(distributed))
        # Read again by the next transaction: the tables now exist, perhaps distributed.
        self.transaction_blocks = None
        return applied

    def _retrying(self, plan: Callable[[], Plan], what: str) -> Job:
        """``plan``'s result, tried again when its lock waits time out (at most
        ``MIGRATION_ATTEMPTS`` tries, with a growing pause between them)."""
        for attempt in range(1, MIGRATION_ATTEMPTS + 1):
            try:
                return (yield from self._execution(plan))[0]
            except (LangmemError, psycopg.Error) as e:
                if _sqlstate(e) != LOCK_NOT_AVAILABLE or attempt == MIGRATION_ATTEMPTS:
                    raise
                logger.warning("%s waited %s for a lock; trying again (attempt %d of %d)",
                               what, migsql.LOCK_TIMEOUT, attempt + 1, MIGRATION_ATTEMPTS)
                yield Sleep(min(30.0, 0.5 * 2 ** attempt))
        raise AssertionError("unreachable")

    def _backfill(self, backfill: bfsql.Backfill, version: int) -> Job:
        """Migration ``version``'s data statement, a batch of users per transaction."""
        if (check := backfill.applies) is not None:
            applies = yield from self._retrying(
                lambda: self._owner_plan([Query(*check)]), f"migration {version}")
            if not applies[0]["applies"]:
                return
        after = ""
        while page := (yield from self._retrying(
                lambda a=after: self._owner_plan([Query(*bfsql.users_after(a))]),  # type: ignore[misc]
                f"migration {version}")):
            for users in bfsql.batches([(r["user_id"], r["n"]) for r in page]):
                yield from self._retrying(
                    lambda u=users: self._owner_plan(  # type: ignore[misc]
                        [Query(*s) for s in backfill.batch(u)]),
                    f"migration {version}'s backfill")
            after = page[-1]["user_id"]
        if (finish := backfill.finish) is not None:
            yield from self._retrying(
                lambda: self._owner_plan([Query(*finish)]), f"migration {version}")

    def _index_functions(self, version: int) -> Job:
        """The functions migration ``version``'s online indexes use, created first."""
        for statement in migsql.index_functions(version):
            try:
                yield Autocommit(statement)
            except psycopg.Error as e:  # e.g. a connection inside the caller's transaction
                logger.info("functions of migration %d left to it (%s)", version, e.sqlstate)
                return

    def _online_index(self, index: migsql.OnlineIndex) -> Job:
        """Build ``index`` concurrently when its table exists; a migration on a new
        table, or a connection inside the caller's transaction, builds it itself."""
        state = (yield from self._database(Fetch(Query(*migsql.index_state(index)),
                                                 _SETUP)))[0]
        if not state["has_table"] or state["valid"]:
            return
        try:
            if state["valid"] is False:  # a failed concurrent build's leftover
                yield Autocommit(migsql.drop_invalid_index(index))
            yield Autocommit(index.concurrently)
        except psycopg.Error as e:
            # e.g. a column the migration itself adds: its own statement builds it.
            logger.info("index %s left to its migration (%s)", index.name, e.sqlstate)

    def _index_large_users_job(self, threshold: int) -> Job:
        # One transaction per user: each build holds writes to the embeddings table.
        users: list[tuple[str, int]] = yield from self._op_job(mops.LargeUsersOp(threshold))
        for user_id, _ in users:
            yield from self._op_job(mops.IndexUserOp(user_id))
        return [u for u, _ in users]

    # -- handlers ---------------------------------------------------------------------

    def _pending_versions(self) -> Handler:
        yield Query(*migsql.create_version_table())
        done = {r["v"] for r in (yield Query(*migsql.applied_versions()))}
        return [v for v in range(len(migsql.MIGRATIONS)) if v not in done]

    def _setup(self, only: int | None = None, *, record: bool = True) -> Handler:
        yield Query(*migsql.create_version_table())
        yield Query(*migsql.lock_setup())
        yield Query(*migsql.set_lock_timeout())
        done = {r["v"] for r in (yield Query(*migsql.applied_versions()))}
        if len(done) < len(migsql.MIGRATIONS) and (yield Query(*citussql.has_citus()))[0]["citus"]:
            # Migrations on tables already distributed (sql/citus.py).
            yield Query(*citussql.migrating())
        applied = []
        for version in range(len(migsql.MIGRATIONS)) if only is None else [only]:
            if version in done:
                continue
            # record=False: the data statement and the version are the runner's, after
            # the backfill's batches (sql/backfills.py)
            backfill = None if record else bfsql.backfill(version)
            for statement in migsql.migration_statements(version):
                if backfill is None or not backfill.deferred(statement[0]):
                    yield Query(*statement)
            if backfill is None:
                yield Query(*migsql.record_version(version))
            applied.append(version)
        return applied

    def _distribute(self, distributed: bool | None) -> Handler:
        if distributed is False:
            return False
        citus = (yield Query(*citussql.has_citus()))[0]["citus"]
        if not citus:
            if distributed:
                raise ConfigurationError(
                    "setup(distributed=True) needs the citus extension in the database "
                    "(CREATE EXTENSION citus, on the coordinator)")
            return False
        yield Query(*citussql.distribute())
        return True
