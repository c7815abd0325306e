"""Working-memory checkpointer wiring (LangGraph's own PostgreSQL checkpointer).

Thin: the database is the one ``langmem_layer.environment`` resolves (LANGMEM_DATABASE_URL,
else the embedded one in LANGMEM_DATA_DIR, default the per-user data directory). Nothing connects at
import. The logic is in ``langmem_layer.working.sessions``.

From code::

    with checkpointer() as saver:
        graph = builder.compile(store=store, checkpointer=saver)

From ``langgraph.json`` (the server enters the async context manager once)::

    "checkpointer": {"path": "./checkpointers/postgres.py:acheckpointer"}
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

from langmem_layer.environment import database_url as _database_url
from langmem_layer.server import served as serving
from langmem_layer.working.sessions import apostgres_checkpointer, postgres_checkpointer

if TYPE_CHECKING:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver


def database_url() -> str:
    """The PostgreSQL URL the checkpointer uses."""
    return _database_url()


@contextmanager
def checkpointer() -> Iterator[PostgresSaver]:
    """A set-up sync PostgresSaver on the memory database."""
    with postgres_checkpointer() as saver:
        yield saver


@asynccontextmanager
async def acheckpointer() -> AsyncIterator[AsyncPostgresSaver]:
    """A set-up async PostgresSaver on the memory database (``langgraph.json``).

    It holds the embedded server with the store (``langmem_layer.server.served.database``):
    the server stops when both are closed.
    """
    async with serving.database() as url, apostgres_checkpointer(url) as saver:
        yield saver
