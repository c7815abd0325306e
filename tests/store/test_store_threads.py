"""The async store's sync methods work from other threads at once, and refuse (by type)
on the event loop's own thread, where they would deadlock."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from langmem_layer.errors import LangmemError, SyncCallOnEventLoopError
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from tests.conftest import _truncate


async def test_fresh_store_serves_a_thread_at_once(pg_uri: str) -> None:
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        await asyncio.to_thread(store.put, ("docs",), "a", {"v": 1})
        item = await asyncio.to_thread(store.get, ("docs",), "a")
    assert item is not None and item.value == {"v": 1}


async def test_store_made_in_a_loop_knows_it() -> None:
    store = AsyncPostgresMemoryStore(None, index=None)
    assert store.loop is asyncio.get_running_loop()


async def test_sync_call_on_the_loop_thread_is_a_typed_error(pg_uri: str) -> None:
    async with AsyncPostgresMemoryStore.from_conn_string(pg_uri, index=None) as store:
        with pytest.raises(SyncCallOnEventLoopError) as info:
            store.get(("docs",), "a")
    assert isinstance(info.value, asyncio.InvalidStateError)
    assert isinstance(info.value, LangmemError)


def test_store_made_outside_a_loop_says_how_to_use_it() -> None:
    store = AsyncPostgresMemoryStore(None, index=None)
    with pytest.raises(SyncCallOnEventLoopError, match="PostgresMemoryStore"):
        store.get(("docs",), "a")


async def test_a_thousand_sync_calls_from_ten_threads(pg_uri: str) -> None:
    _truncate(pg_uri)
    async with AsyncPostgresMemoryStore.from_conn_string(
        pg_uri, index=None, pool_size=4
    ) as store:

        def worker(n: int) -> list[int]:
            seen = []
            for i in range(50):
                store.put(("docs", f"t{n}"), f"k{i}", {"v": i})
                item = store.get(("docs", f"t{n}"), f"k{i}")
                assert item is not None
                seen.append(item.value["v"])
            return seen

        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=10) as threads:  # ten threads at once
            results = await asyncio.gather(
                *(loop.run_in_executor(threads, worker, n) for n in range(10)))
        assert results == [list(range(50))] * 10
        assert len(await store.asearch(("docs",), limit=1000)) == 500
