"""A user's data out and back in, in one place: the export and import ops, their SQL
and their handlers.

An export holds every item of the user (memories and plain items, with their
original timestamps and TTLs) and every link; an import writes them back through the
core's ``write_items``, re-embedding each item, then restores the links.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.errors import InvalidNamespaceError
from langmem_layer.sql import Sql
from langmem_layer.sql.generic_items import VALUE
from langmem_layer.sql.moved import UPDATED
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.ops.items import Write
from langmem_layer.store.ops.links import Link, insert_link
from langmem_layer.store.plan import Handler, Query
from langmem_layer.store.tenancy import ns_tuple

__all__ = [
    "ExportOp",
    "ExportedItem",
    "ImportOp",
    "UserExport",
    "user_items",
    "user_links",
]


# -- SQL: builders return ``(sql, params)`` and do no I/O; each binds ``user_id`` ---------


def user_items(user_id: str) -> Sql:
    """Every item of a tenant (memories and generic items), for export."""
    return (
        f"""SELECT i.prefix, i.key, {VALUE} AS value, i.is_memory, i.created_at,
               {UPDATED} AS updated_at,
               i.expires_at, i.ttl_minutes
        FROM langmem_items i WHERE i.user_id = %(user_id)s ORDER BY i.prefix, i.key""",
        {"user_id": user_id},
    )


def user_links(user_id: str) -> Sql:
    """Every link of a tenant, for export."""
    return (
        """SELECT src_key, link_type, dst_key, created_at, metadata FROM langmem_links
        WHERE user_id = %(user_id)s ORDER BY src_key, link_type, dst_key""",
        {"user_id": user_id},
    )


# -- handlers -----------------------------------------------------------------------------


def _export(ctx: Context, op: ExportOp) -> Handler:
    rows = yield Query(*user_items(op.user_id))
    links = yield Query(*user_links(op.user_id))
    items = [
        ExportedItem(
            namespace=ns_tuple(r["prefix"]),
            key=r["key"],
            value=r["value"],
            is_memory=r["is_memory"],
            created_at=r["created_at"],
            updated_at=r["updated_at"],
            ttl_minutes=r["ttl_minutes"],
        )
        for r in rows
    ]
    return UserExport(op.user_id, items, [Link(**r) for r in links])


def _import(ctx: Context, op: ImportOp) -> Handler:
    for item in op.data.items:
        if ctx.tenant(item.namespace) != op.user_id:
            raise InvalidNamespaceError(
                f"Item {item.namespace!r}/{item.key} does not belong to user {op.user_id!r}."
            )
    yield from ctx.write_items(
        [
            Write(i.namespace, i.key, i.value, None, i.ttl_minutes, i.created_at,
                  i.updated_at)
            for i in op.data.items
        ],
        ctx.now(),
    )
    for link in op.data.links:
        yield Query(
            *insert_link(
                op.user_id, link.src_key, link.link_type, link.dst_key, link.created_at,
                json.dumps(link.metadata),
            )
        )
    return len(op.data.items)


# -- ops ----------------------------------------------------------------------------------


@operation(_export)
class ExportOp(NamedTuple):
    """Everything a user has: items and links (result: ``UserExport``)."""

    user_id: str


@operation(_import)
class ImportOp(NamedTuple):
    """Restore a ``UserExport`` into the store, re-embedding (result: int items)."""

    user_id: str
    data: UserExport


@dataclass(frozen=True, slots=True)
class ExportedItem:
    """One stored item as exported, with its original timestamps."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    is_memory: bool
    created_at: datetime
    updated_at: datetime
    ttl_minutes: float | None = None


@dataclass(frozen=True, slots=True)
class UserExport:
    """All of one user's data: items and links."""

    user_id: str
    items: list[ExportedItem]
    links: list[Link]
