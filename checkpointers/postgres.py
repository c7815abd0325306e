"""Working-memory checkpointer wiring (LangGraph's own PostgreSQL checkpointer).

Thin: the database is LANGMEM_DATABASE_URL when set, else the embedded one in
LANGMEM_DATA_DIR (default `.langmem`). Nothing connects at import.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

from langmem_layer.store.embedded import embedded_uri


def database_url() -> str:
    """The PostgreSQL URL the checkpointer uses."""
    return os.environ.get("LANGMEM_DATABASE_URL") or embedded_uri(
        os.environ.get("LANGMEM_DATA_DIR", ".langmem")
    )


@contextmanager
def checkpointer() -> Iterator[PostgresSaver]:
    """A set-up sync PostgresSaver on the memory database."""
    with PostgresSaver.from_conn_string(database_url()) as saver:
        saver.setup()
        yield saver


@asynccontextmanager
async def acheckpointer() -> AsyncIterator[AsyncPostgresSaver]:
    """A set-up async PostgresSaver on the memory database."""
    async with AsyncPostgresSaver.from_conn_string(database_url()) as saver:
        await saver.setup()
        yield saver
