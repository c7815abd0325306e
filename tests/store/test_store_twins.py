"""The sync store's I/O is the async store's without ``await``: generated, not hand-kept.

Both stores execute the one job of :mod:`langmem_layer.store.driver`; what differs is how
each does one I/O step. As psycopg does, the sync methods that have an async twin are
generated from the async ones (``python -m tests.unasync``); this test fails when sync.py
is not what aio.py generates: sync.py edited by hand, or aio.py changed without
regenerating.
"""

from __future__ import annotations

import ast

import pytest

from tests import unasync

AIO = unasync.AIO.read_text()
SYNC = unasync.SYNC.read_text()


def test_sync_py_is_what_aio_py_generates() -> None:
    diff = unasync.check()
    assert not diff, (
        "langmem_layer/store/sync.py is not what langmem_layer/store/aio.py generates: make "
        "the change in aio.py (or outside the generated region of sync.py) and run "
        f"`python -m tests.unasync`.\n{diff}")


def test_every_method_both_stores_have_is_generated_or_said_to_be_written_by_hand() -> None:
    shared = (set(unasync.methods(AIO, unasync.AIO_CLASS))
              & set(unasync.methods(SYNC, unasync.SYNC_CLASS)))
    assert shared - set(unasync.TWINS) - set(unasync.HAND_WRITTEN) == set()
    assert not set(unasync.TWINS) & set(unasync.HAND_WRITTEN)
    assert set(unasync.HAND_WRITTEN) <= shared


@pytest.mark.parametrize("name", unasync.TWINS)
def test_a_generated_method_is_the_async_one_without_await(name: str) -> None:
    """What the old check compared: the sync tree is the async tree without async."""
    written = unasync.methods(SYNC, unasync.SYNC_CLASS)[name]
    source = unasync.methods(AIO, unasync.AIO_CLASS)[name]
    drop = {stmt.lineno for stmt in unasync.async_only(AIO, source)}
    derived = unasync.Unasync(drop).visit(source)
    assert derived is not None
    assert unasync.shape(derived) == unasync.shape(written)
    assert isinstance(written, ast.FunctionDef)


def test_the_check_sees_a_statement_changed_in_aio_py() -> None:
    changed = AIO.replace("                step.send(reply)\n",
                          "                step.send(reply or None)\n")
    assert changed != AIO
    diff = unasync.check(aio=changed)
    assert "-                step.send(reply)\n" in diff
    assert "+                step.send(reply or None)\n" in diff


def test_the_check_sees_a_hand_edit_of_the_generated_code() -> None:
    edited = SYNC.replace("return time.sleep(seconds)", "return time.sleep(seconds / 2)")
    assert edited != SYNC
    diff = unasync.check(sync=edited)
    assert "-                return time.sleep(seconds / 2)\n" in diff
    assert "+                return time.sleep(seconds)\n" in diff


def test_code_outside_the_generated_region_is_the_sync_store_own() -> None:
    edited = SYNC.replace('"""Run ``batch`` in a worker thread."""',
                          '"""Run ``batch`` in a thread of the loop\'s executor."""')
    assert edited != SYNC
    assert unasync.check(sync=edited) == ""


def test_the_text_written_keeps_the_layout_and_follows_the_tree() -> None:
    aio = '''class AsyncPostgresMemoryStore:
    async def f(self) -> None:
        """Async twin of ``PostgresMemoryStore.f``."""
        if self.loop is None:  # async only
            self.loop = 1
        async with self.conn.pipeline():  # a comment stays
            await cur.execute(query, params,
                              prepare=True)
        async for row in rows:
            await asyncio.sleep(0)
        x = await asyncio.to_thread(g, 1)
        return await self._model().aembed_query(x)
'''
    sync_doc = '        """Do f, as the sync store does it."""\n'
    node = unasync.methods(aio, unasync.AIO_CLASS)["f"]
    assert unasync.unasync_method(aio, node, sync_doc) == '''    def f(self) -> None:
        """Do f, as the sync store does it."""
        with self.conn.pipeline():  # a comment stays
            cur.execute(query, params,
                        prepare=True)
        for row in rows:
            time.sleep(0)
        x = g(1)
        return self._model().embed_query(x)
'''
    with pytest.raises(unasync.UnasyncError, match="docstring"):
        unasync.unasync_method(aio, node, None)


def test_the_command_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert unasync.main(["--check"]) == 0
    assert capsys.readouterr().out == ""
