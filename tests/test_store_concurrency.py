"""Concurrent calls: TTL refresh on read never blocks or fails a read, and the async
store coalesces concurrent calls into one batch without changing their results."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from langgraph.store.base import PutOp

from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore
from tests.conftest import _truncate
from tests.fakes import Clock

TTL = {"default_ttl": 5, "refresh_on_read": True}
ITEMS = 20
ROUNDS = 200
NS = ("docs",)


def _expiries(uri: str) -> dict[str, Any]:
    with psycopg.connect(uri) as conn:
        rows = conn.execute(
            "SELECT key, expires_at FROM langmem_items WHERE user_id = '' AND prefix = 'docs'"
        ).fetchall()
    return dict(rows)


def _no_lost_transactions(caplog: pytest.LogCaptureFixture) -> None:
    lost = [r.getMessage() for r in caplog.records if "lost to a concurrent" in r.getMessage()]
    assert lost == []


def test_sync_store_reads_refresh_from_ten_threads_without_error(
    pg_uri: str, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    _truncate(pg_uri)
    caplog.set_level(logging.WARNING, logger="langmem_layer.store")
    with PostgresMemoryStore.from_conn_string(
        pg_uri, index=None, ttl=TTL, clock=clock, pool_size=10
    ) as store:
        store.batch([PutOp(NS, f"k{i}", {"v": i}, ttl=5) for i in range(ITEMS)])
        clock.advance(minutes=3)

        def one(n: int) -> list[Any]:
            return [
                store.put(NS, f"k{n % ITEMS}", {"v": n}),
                store.search(NS, limit=ITEMS),
                store.search(NS, limit=ITEMS),
            ]

        with ThreadPoolExecutor(max_workers=10) as threads:
            results = list(threads.map(one, range(ROUNDS)))
    assert len(results) == ROUNDS
    assert all(len(r[1]) == ITEMS and len(r[2]) == ITEMS for r in results)
    _no_lost_transactions(caplog)
    # Every item was written or refreshed at the new time: 5 minutes from it.
    assert set(_expiries(pg_uri).values()) == {clock.now + timedelta(minutes=5)}


async def _async_workload(store: AsyncPostgresMemoryStore, clock: Clock) -> list[Any]:
    await store.abatch([PutOp(NS, f"k{i}", {"v": i}, ttl=5) for i in range(ITEMS)])
    clock.advance(minutes=3)
    calls = []
    for n in range(ROUNDS):
        calls += [
            store.aput(NS, f"k{n % ITEMS}", {"v": n}),
            store.asearch(NS, limit=ITEMS),
            store.asearch(NS, limit=ITEMS),
        ]
    return await asyncio.gather(*calls, return_exceptions=True)


@pytest.mark.parametrize("pool_size", [None, 10])
async def test_async_store_reads_refresh_under_gather_without_error(
    pg_uri: str, clock: Clock, caplog: pytest.LogCaptureFixture, pool_size: int | None
) -> None:
    _truncate(pg_uri)
    caplog.set_level(logging.WARNING, logger="langmem_layer.store")
    async with AsyncPostgresMemoryStore.from_conn_string(
        pg_uri, index=None, ttl=TTL, clock=clock, pool_size=pool_size
    ) as store:
        results = await _async_workload(store, clock)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert errors == []
        assert all(len(r) == ITEMS for r in results[1::3])
        # A read at 4 minutes past the refresh still finds every item: refreshed, not
        # expired at the 5 minutes from the first puts.
        clock.advance(minutes=4)
        assert len(await store.asearch(NS, limit=ITEMS, refresh_ttl=False)) == ITEMS
    _no_lost_transactions(caplog)
    assert set(_expiries(pg_uri).values()) == {clock.now + timedelta(minutes=1)}


def test_overlapping_refreshes_skip_rows_held_by_another_transaction(
    pg_uri: str, clock: Clock
) -> None:
    """A refresh never waits on a row lock: a row another transaction holds is skipped."""
    _truncate(pg_uri)
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None, ttl=TTL, clock=clock) as store:
        store.batch([PutOp(NS, f"k{i}", {"v": i}, ttl=5) for i in range(3)])
        before = _expiries(pg_uri)
        clock.advance(minutes=2)
        with psycopg.connect(pg_uri) as holder:  # holds k1 locked, uncommitted
            holder.execute(
                "SELECT 1 FROM langmem_items WHERE user_id = '' AND key = 'k1' FOR UPDATE")
            with psycopg.connect(pg_uri, autocommit=True) as conn:
                conn.execute("SET lock_timeout = '2s'")  # a wait would fail, not hang
                store_on = PostgresMemoryStore(conn, index=None, ttl=TTL, clock=clock)
                found = store_on.search(NS, limit=10)
            holder.rollback()
    assert sorted(i.key for i in found) == ["k0", "k1", "k2"]
    after = _expiries(pg_uri)
    assert after["k1"] == before["k1"]  # skipped, unchanged
    assert after["k0"] == after["k2"] == clock.now + timedelta(minutes=5)
