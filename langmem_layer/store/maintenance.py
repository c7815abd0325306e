"""Maintenance: schema migrations, and the jobs behind the stores' maintenance methods.

The jobs combine several plans (one transaction each) and are run by either store's
driver, so ``setup()``, ``sweep_ttl()``, ``purge_embedding_cache()`` and
``index_large_users()`` are one line in each store. The ops they run (TTL sweep,
cache purge, indexes of large users) are in ``langmem_layer.store.ops.housekeeping``.
"""

from __future__ import annotations

from langmem_layer.errors import ConfigurationError
from langmem_layer.sql import citus as citussql
from langmem_layer.sql import migrations as migsql
from langmem_layer.store import ops as mops
from langmem_layer.store.base_store import ItemHandlers
from langmem_layer.store.driver import Execution, Job
from langmem_layer.store.plan import Binding, Handler, Plan, Query, Step

__all__ = ["ANN_MIN_USER_VECTORS", "Maintenance"]

#: Users with at least this many vectors of the store's model get their own HNSW index
#: (benchmarks/vector_bench.py: exact search costs ~10 ms p50 at 5k vectors, an index
#: ~2 ms at any size). Not lower: every partial index adds to the planning of
#: statements on the embeddings table, so indexes are kept for the few large users.
ANN_MIN_USER_VECTORS = 5_000


class Maintenance(ItemHandlers, Execution):
    """Maintenance handlers and the jobs behind the stores' maintenance methods."""

    # -- jobs -------------------------------------------------------------------------

    def setup_plan(self) -> Plan:
        """The plan that applies pending migrations (see ``setup()``)."""
        # Migrations run as the owner, under the maintenance bypass: a data migration
        # on a table with forced RLS would otherwise see no rows.
        return Plan([Step([0], self._setup(), bind=Binding(None, owner=True))], 1, None, None)

    def distribute_plan(self, distributed: bool | None = None) -> Plan:
        """The plan that distributes the schema on Citus (see ``setup()``), in a
        transaction after the migrations': ``None`` distributes when the database has
        the ``citus`` extension."""
        return Plan([Step([0], self._distribute(distributed), bind=Binding(None, owner=True))],
                    1, None, None)

    def _setup_job(self, distributed: bool | None = None) -> Job:
        applied = (yield from self._execution(self.setup_plan))[0]
        yield from self._execution(lambda: self.distribute_plan(distributed))
        return applied

    def _index_large_users_job(self, threshold: int) -> Job:
        # One transaction per user: each build holds writes to the embeddings table.
        users: list[tuple[str, int]] = yield from self._op_job(mops.LargeUsersOp(threshold))
        for user_id, _ in users:
            yield from self._op_job(mops.IndexUserOp(user_id))
        return [u for u, _ in users]

    # -- handlers ---------------------------------------------------------------------

    def _setup(self) -> Handler:
        yield Query(*migsql.create_version_table())
        yield Query(*migsql.lock_setup())
        done = {r["v"] for r in (yield Query(*migsql.applied_versions()))}
        applied = []
        for version in range(len(migsql.MIGRATIONS)):
            if version in done:
                continue
            yield Query(*migsql.migration(version))
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
