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
from langgraph.store.base import GetOp, Item, ListNamespacesOp, PutOp

from langmem_layer.errors import (
    InvalidInputError,
    InvalidMemoryError,
    InvalidNamespaceError,
    OperationAppliedError,
)
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.ops import FindMemoryOp, MarkAppliedOp, RecallOp
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


# -- coalescing concurrent calls -------------------------------------------------------


def _memory(content: str) -> dict[str, Any]:
    return {"content": content, "kind": "preference", "layer": "semantic",
            "occurred_at": "2026-11-18T15:00:00Z", "last_accessed_at": "2026-11-18T15:00:00Z"}


class _Counted:
    """Counts the transactions (executions of a batch) a store runs."""

    def __init__(self, store: AsyncPostgresMemoryStore) -> None:
        self.count = 0
        drive = store._drive

        async def counted(job: Any) -> Any:
            self.count += 1
            return await drive(job)

        store._drive = counted  # type: ignore[method-assign]


async def _seed(store: AsyncPostgresMemoryStore) -> None:
    await store.abatch(
        [PutOp(("docs", f"d{i % 3}"), f"k{i}", {"text": f"note {i} about tea"}) for i in range(12)]
        + [PutOp(("memories", "u1", "work"), f"m{i}", _memory(f"likes tea number {i}"))
           for i in range(4)]
    )


def _mixed_calls(store: AsyncPostgresMemoryStore) -> list[Any]:
    """Concurrent calls whose results do not depend on each other's order."""
    calls: list[Any] = []
    for i in range(12):
        calls += [
            store.aget(("docs", f"d{i % 3}"), f"k{i}"),
            store.aget(("docs", f"d{i % 3}"), f"k{i}"),  # twin reads share one run
            store.aget(("docs", "d0"), f"missing{i}"),
            store.asearch(("docs",), limit=5),
            store.asearch(("docs",), query="tea note", limit=3),
            store.asearch(("docs",), filter={"text": f"note {i} about tea"}),
            store.alist_namespaces(prefix=("docs",), max_depth=2),
            store.aput(("new", str(i % 2)), f"n{i}", {"v": i}),
            store.adelete(("gone",), f"g{i}"),
            store.abatch([PutOp(("pairs",), f"p{i}", {"v": i}), GetOp(("pairs",), f"p{i}")]),
            store.abatch([RecallOp("u1", ("work",), query="tea"),
                          FindMemoryOp("u1", f"m{i % 4}")]),
        ]
    return calls


def _comparable(value: Any) -> Any:
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, Item):
        return (type(value).__name__, value.dict())
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return _comparable(list(value))
    return value


async def test_coalesced_results_equal_one_call_at_a_time(pg_uri: str, index: dict,
                                                          clock: Clock) -> None:
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=index,
                                                         clock=clock) as store:
        await _seed(store)
        alone = []
        for call in _mixed_calls(store):  # each awaited before the next starts
            alone.append(await call)
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(
        pg_uri, index=index, clock=clock, pool_size=10
    ) as store:
        await _seed(store)
        counted = _Counted(store)
        together = await asyncio.gather(*_mixed_calls(store))
        assert counted.count <= 2  # the first call, then everything queued behind it
        assert await store.aget(("new", "1"), "n11") is not None
    assert len(together) == len(alone) == 12 * 11
    assert _comparable(together) == _comparable(alone)


async def test_six_thousand_small_calls_on_a_pool_complete(pg_uri: str) -> None:
    _truncate(pg_uri)
    n, m = 100, 10  # upstream's shape (1000 x 10 x 6 = 60,000) at a tenth of the size
    async with AsyncPostgresMemoryStore.from_conn_string(
        pg_uri, index=None, pool_size=10
    ) as store:
        calls: list[Any] = []
        for j in range(m):
            for i in range(n):
                ns = ("test", "foo", "bar", "baz", str(j % 2))
                calls += [
                    store.aput(ns, f"key{i}", {"foo": f"bar{i}"}),
                    store.aget(ns, f"key{i}"),
                    store.alist_namespaces(prefix=None, max_depth=j + 1),
                    store.asearch(("test",)),
                    store.aput(ns, f"key{i}", {"foo": f"bar{i}"}),
                    store.adelete(ns, f"key{i}"),
                ]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
        assert len(results) == n * m * 6
        for j in range(m):
            lists = results[j * n * 6 + 2]
            assert all(len(ns) <= j + 1 for ns in lists)
        assert all(r is None for r in results[0::6] + results[4::6] + results[5::6])
        # Every key was put twice, then deleted: nothing is left.
        assert await store.asearch(("test",), limit=1000) == []
        # The calls arriving after the first batch were coalesced, not run one by one.
        await store.aput(("test", "x"), "k", {"v": 1})
        got = await asyncio.gather(*(store.aget(("test", "x"), "k") for _ in range(50)))
        assert {g.value["v"] for g in got if g is not None} == {1} and None not in got


async def test_a_bad_call_fails_alone(pg_uri: str) -> None:
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        bad_memory = {"content": "x", "kind": "preference", "layer": "nonsense"}
        results = await asyncio.gather(
            store.aput(("docs",), "a", {"v": 1}),
            store.aput(("memories", "u1", "work"), "bad", bad_memory),  # found in the plan
            store.aput(("docs",), "nul", {"v": "a\x00b"}),  # refused by PostgreSQL
            store.abatch([PutOp(("langgraph",), "c", {"v": 1})]),  # refused before queueing
            store.aget(("docs",), "a"),
            return_exceptions=True,
        )
        assert results[0] is None
        assert isinstance(results[1], InvalidMemoryError)
        assert isinstance(results[2], InvalidInputError)
        assert isinstance(results[3], InvalidNamespaceError)
        assert not isinstance(results[4], BaseException)
        assert (await store.aget(("docs",), "a")) is not None
        assert (await store.aget(("docs",), "nul")) is None


async def test_a_replayed_operation_fails_its_own_call_alone(pg_uri: str,
                                                             clock: Clock) -> None:
    # A turn's apply records its operations' ids optimistically (MarkAppliedOp): one
    # applied before rolls the coalesced batch back, and only its own call fails.
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        await store.abatch([MarkAppliedOp("u1", "op-1", clock())])
        results = await asyncio.gather(
            store.aput(("docs",), "a", {"v": 1}),
            store.abatch([MarkAppliedOp("u1", "op-1", clock()),
                          PutOp(("docs",), "b", {"v": 2})]),
            store.abatch([MarkAppliedOp("u1", "op-2", clock())]),
            return_exceptions=True,
        )
        assert results[0] is None and results[2] == [None]
        assert isinstance(results[1], OperationAppliedError)
        assert (await store.aget(("docs",), "a")) is not None
        assert (await store.aget(("docs",), "b")) is None  # rolled back with its call
    with psycopg.connect(pg_uri) as conn:
        applied = conn.execute("SELECT op_id FROM langmem_applied_ops WHERE user_id = 'u1'"
                               " ORDER BY op_id").fetchall()
    assert applied == [("op-1",), ("op-2",)]


@pytest.mark.parametrize("runs_before", [4, 5, 6])
def test_a_statement_skipped_by_a_failed_pipeline_runs_again(pg_uri: str, clock: Clock,
                                                             runs_before: int) -> None:
    # A statement sent after a failing one in the same pipeline is skipped by the
    # server; the next run on that connection must not name a prepared statement the
    # skipped Parse never made. Whichever run it is: psycopg's threshold (the sixth)
    # promoted it to prepared at send time.
    _truncate(pg_uri)
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None, pool_size=1) as store:
        store.batch([MarkAppliedOp("u1", "op-1", clock())])
        for n in range(runs_before):
            store.put(("docs",), f"k{n}", {"v": n})
        with pytest.raises(OperationAppliedError):
            store.batch([MarkAppliedOp("u1", "op-1", clock()),
                         PutOp(("docs",), "skipped", {"v": -1})])
        store.put(("docs",), "after", {"v": 1})
        assert store.get(("docs",), "after") is not None
        assert store.get(("docs",), "skipped") is None


async def test_sync_calls_from_threads_are_coalesced_too(pg_uri: str) -> None:
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(
        pg_uri, index=None, pool_size=4
    ) as store:

        def worker(n: int) -> list[Any]:
            store.put(("docs", f"t{n}"), "k", {"v": n})
            got = store.get(("docs", f"t{n}"), "k")
            (listed,) = store.batch([ListNamespacesOp(max_depth=1)])
            return [got.value["v"] if got else None, listed]

        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=8) as threads:
            results = await asyncio.gather(
                *(loop.run_in_executor(threads, worker, n) for n in range(40)))
        assert results == [[n, [("docs",)]] for n in range(40)]
