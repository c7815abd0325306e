"""Store operations on generic items beyond LangGraph's own (``GetOp``, ``PutOp`` ...),
and the item shapes the handlers share: a ``Write`` of the core's ``write_items`` and
``row_to_item``.

Re-exported by ``langmem_layer.store.ops``, where callers import them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple

from langgraph.store.base import Item

from langmem_layer.store.tenancy import ns_tuple

__all__ = ["GetManyOp", "Write", "row_to_item"]


class GetManyOp(NamedTuple):
    """Gets of several keys of one namespace as one statement; the result is a dict of
    key -> ``Item`` of the keys found. The async store turns concurrent ``aget`` calls
    into these (see ``langmem_layer.store.aio``)."""

    namespace: tuple[str, ...]
    keys: tuple[str, ...]
    refresh_ttl: bool = True


class Write(NamedTuple):
    """One item to upsert (``value``) or delete (``value is None``)."""

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    index: Any = None
    ttl: float | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


def row_to_item(row: dict[str, Any]) -> Item:
    """An ``Item`` of a row of the items table."""
    return Item(
        namespace=ns_tuple(row["prefix"]),
        key=row["key"],
        value=row["value"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
