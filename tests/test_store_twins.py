"""The async store's transaction runner is the sync one's with ``await`` added.

Both stores send what :class:`~langmem_layer.store.driver.Rounds` lays out with their
own psycopg calls (the async ones awaited); the logic is one, so the two bodies must
read the same once the async spelling is taken out. A change to one that is not made
to the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import langmem_layer.store.aio as aio
import langmem_layer.store.sync as sync

_ASYNC = [("async def", "def"), ("await ", ""), ("async with", "with"),
          ("AsyncRawCursor", "RawCursor"),
          ("__aenter__", "__enter__"),
          ("__aexit__", "__exit__")]


def _transaction_cases(module: object) -> str:
    """The store's ``_abandon`` and the database arms of its ``_io`` (``Fetch``,
    ``RunTransaction``), comments and blank lines dropped, whitespace folded, the async
    spelling removed."""
    text = Path(module.__file__).read_text()  # type: ignore[attr-defined]
    start = text.index("def _abandon(")
    end = text.index("            case EmbedDocuments(texts):")
    body = text[start:end]
    for a, b in _ASYNC:
        body = body.replace(a, b)
    lines = [line.split("#")[0].strip() for line in body.splitlines()]
    return re.sub(r"\s+", " ", " ".join(line for line in lines if line))


def test_the_async_transaction_runner_is_the_sync_one_awaited() -> None:
    mine, theirs = _transaction_cases(sync), _transaction_cases(aio)
    assert "rounds.next()" in mine and "pipeline()" in mine
    assert mine == theirs
