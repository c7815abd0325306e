"""Database errors become library errors by SQLSTATE; lost transactions are retried."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from langgraph.store.base import PutOp
from psycopg_pool import ConnectionPool

from langmem_layer.errors import (
    ConcurrencyError,
    DatabaseUnavailableError,
    InvalidInputError,
    LangmemError,
    PoolTimeoutError,
    SchemaNotReadyError,
)
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.db_errors import TRANSACTION_ATTEMPTS, translate
from langmem_layer.store.ops.dispatch import Registry, handles
from langmem_layer.store.plan import Handler, Query
from langmem_layer.store.sync import PostgresMemoryStore


def server_error(uri: str, sql: str, params: Any = None) -> psycopg.Error:
    """The error the server (or psycopg) raises for ``sql``."""
    with psycopg.connect(uri, autocommit=True) as conn:
        try:
            conn.execute(sql, params)
        except psycopg.Error as e:
            return e
    raise AssertionError(f"{sql!r} did not fail")


# -- the classifier, on errors the server really raises -----------------------------------


def test_data_exceptions_are_invalid_input(pg_uri: str) -> None:
    for sql, params, state in [
        ("SELECT 1/0", None, "22012"),
        ("SELECT %s::jsonb", ['{"a": "\\u0000"}'], "22P05"),
        ("SELECT %s::text", ["a\x00b"], None),  # refused by psycopg before sending
    ]:
        e = server_error(pg_uri, sql, params)
        assert e.sqlstate == state
        err = translate(e)
        assert isinstance(err, InvalidInputError) and isinstance(err, ValueError)
        assert "went away" not in str(err)


def test_program_limit_exceeded_is_invalid_input(pg_uri: str) -> None:
    e = server_error(pg_uri, "SELECT to_tsquery('simple', %s)",
                     ["(" * 100_000 + "a" + ")" * 100_000])
    assert e.sqlstate == "54001"
    err = translate(e)
    assert isinstance(err, InvalidInputError) and "too large" in str(err)


def test_undefined_table_asks_for_setup(pg_uri: str) -> None:
    err = translate(server_error(pg_uri, "SELECT * FROM langmem_no_such_table"))
    assert isinstance(err, SchemaNotReadyError) and "store.setup()" in str(err)


def test_a_missing_function_of_the_schema_asks_for_setup(pg_uri: str) -> None:
    # A schema older than the code (its binding function, langmem_bind, came with
    # migration 33): an upgrade, not an outage.
    err = translate(server_error(pg_uri, "SELECT langmem_no_such_function(1)"))
    assert isinstance(err, SchemaNotReadyError) and "older than this version" in str(err)
    other = server_error(pg_uri, "SELECT no_such_function(1)")
    assert translate(other) is other


def test_admin_shutdown_is_database_unavailable(pg_uri: str) -> None:
    with psycopg.connect(pg_uri, autocommit=True) as victim:
        pid = victim.info.backend_pid
        with psycopg.connect(pg_uri, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        time.sleep(0.1)
        try:
            victim.execute("SELECT 1")
        except psycopg.Error as e:
            err = translate(e)
        else:  # pragma: no cover
            raise AssertionError("terminated connection still works")
    assert isinstance(err, DatabaseUnavailableError) and "went away" in str(err)


def test_bugs_are_not_disguised(pg_uri: str) -> None:
    e = server_error(pg_uri, "SELEC 1")
    assert translate(e) is e


# -- through the store --------------------------------------------------------------------


def count_items(uri: str) -> int:
    with psycopg.connect(uri) as conn:
        row = conn.execute("SELECT count(*) FROM langmem_items").fetchone()
        assert row is not None
        return int(row[0])


def test_nul_in_a_value_is_invalid_input_and_writes_nothing(
    store: PostgresMemoryStore, pg_uri: str
) -> None:
    with pytest.raises(InvalidInputError, match="NUL") as info:
        store.batch([PutOp(("docs",), "ok", {"text": "fine"}),
                     PutOp(("docs",), "bad", {"text": "a\x00b"})])
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value.__cause__, psycopg.Error)
    assert count_items(pg_uri) == 0
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT count(*) FROM langmem_embedding_cache").fetchone() == (0,)


def test_store_used_before_setup_says_so(bare_uri: str, index: dict) -> None:
    with PostgresMemoryStore.from_conn_string(bare_uri, index=index) as s:
        with pytest.raises(SchemaNotReadyError, match=r"call store\.setup\(\)"):
            s.put(("docs",), "a", {"text": "hello"})
        with pytest.raises(SchemaNotReadyError, match="langmem-layer setup"):
            s.get(("docs",), "a")
        assert s.setup()  # and once set up, it works
        s.put(("docs",), "a", {"text": "hello"})
        assert s.get(("docs",), "a") is not None


def test_pool_timeout_names_the_pool_and_the_fix(pg_uri: str) -> None:
    with ConnectionPool(pg_uri, min_size=1, max_size=1, timeout=0.5,
                        kwargs={"autocommit": True}) as pool:
        store = PostgresMemoryStore(pool, index=None)
        # The pool's only connection is held elsewhere.
        with pool.connection(), pytest.raises(PoolTimeoutError) as info:
            store.get(("docs",), "a")
        assert isinstance(info.value, TimeoutError) and isinstance(info.value, LangmemError)
        message = str(info.value)
        assert "max_size=1" in message and "0.5 s" in message and "bigger pool" in message
        assert store.get(("docs",), "a") is None  # free again


# -- retries of lost transactions ---------------------------------------------------------


@dataclass(frozen=True)
class _LoseOp:
    """Test op: its transaction fails with ``sqlstate`` the first ``times`` attempts."""

    sqlstate: str
    times: int


class _Lose(Registry):
    attempts = 0

    @handles(_LoseOp)
    def _lose(self, op: _LoseOp) -> Handler:
        _Lose.attempts += 1
        yield Query("CREATE TEMP TABLE IF NOT EXISTS lose_probe (x int)", None)
        if _Lose.attempts <= op.times:
            yield Query(
                f"DO $$ BEGIN RAISE EXCEPTION 'lost' USING ERRCODE = '{op.sqlstate}'; END $$",
                None,
            )
        return _Lose.attempts


class _LosingStore(_Lose, PostgresMemoryStore):
    pass


class _AsyncLosingStore(_Lose, AsyncPostgresMemoryStore):
    pass


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"])
def test_lost_transaction_is_retried_then_a_concurrency_error(
    pg_uri: str, sqlstate: str
) -> None:
    with _LosingStore.from_conn_string(pg_uri, index=None) as s:
        _Lose.attempts = 0
        assert s.batch([_LoseOp(sqlstate, times=TRANSACTION_ATTEMPTS - 1)]) == [
            TRANSACTION_ATTEMPTS
        ]
        _Lose.attempts = 0
        with pytest.raises(ConcurrencyError, match=sqlstate) as info:
            s.batch([_LoseOp(sqlstate, times=TRANSACTION_ATTEMPTS)])
        assert _Lose.attempts == TRANSACTION_ATTEMPTS
        assert isinstance(info.value, RuntimeError)
        assert isinstance(info.value.__cause__, psycopg.Error)
        assert info.value.__cause__.sqlstate == sqlstate


async def test_async_store_retries_and_classifies_the_same(pg_uri: str) -> None:
    async with _AsyncLosingStore.from_conn_string(pg_uri, index=None) as s:
        _Lose.attempts = 0
        assert await s.abatch([_LoseOp("40P01", times=1)]) == [2]
        _Lose.attempts = 0
        with pytest.raises(ConcurrencyError):
            await s.abatch([_LoseOp("40001", times=TRANSACTION_ATTEMPTS)])
        with pytest.raises(InvalidInputError, match="NUL"):
            await s.aput(("docs",), "bad", {"text": "a\x00b"})
        assert await s.aget(("docs",), "bad") is None


def test_registry_of_a_subclass_keeps_the_core_handlers() -> None:
    assert _LoseOp in _LosingStore._handlers
    assert _LoseOp not in PostgresMemoryStore._handlers
    assert PutOp in _LosingStore._handlers


def test_real_deadlock_is_retried(
    store: PostgresMemoryStore, pg_uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's batch locks a then waits for b, which another transaction holds while
    it waits for a: the server aborts the store's transaction, which is run again."""
    store.put(("docs",), "a", {"v": "old"})
    store.put(("docs",), "b", {"v": "old"})
    pid = store.conn.info.backend_pid
    errors: list[BaseException] = []

    def write() -> None:
        try:
            store.batch([PutOp(("docs",), "a", {"v": "store"}),
                         PutOp(("docs",), "b", {"v": "store"})])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    caplog.set_level(logging.WARNING, logger="langmem_layer.store")
    with psycopg.connect(pg_uri) as other:
        other.execute("UPDATE langmem_items SET value = '{\"v\": \"other\"}' WHERE key = 'b'")
        writer = threading.Thread(target=write)
        writer.start()
        with psycopg.connect(pg_uri, autocommit=True) as watch:
            for _ in range(200):  # until the store waits for the lock on b
                row = watch.execute("SELECT wait_event_type FROM pg_stat_activity "
                                    "WHERE pid = %s", [pid]).fetchone()
                if row == ("Lock",):
                    break
                time.sleep(0.05)
            else:  # pragma: no cover
                raise AssertionError("the store never waited for the lock")
        other.execute("UPDATE langmem_items SET value = '{\"v\": \"other\"}' WHERE key = 'a'")
        other.commit()
        writer.join(30)
    assert not errors
    assert any("40P01" in r.getMessage() for r in caplog.records)
    assert store.get(("docs",), "a").value == {"v": "store"}  # type: ignore[union-attr]
    assert store.get(("docs",), "b").value == {"v": "store"}  # type: ignore[union-attr]
