"""Store operations on generic items beyond LangGraph's own (``GetOp``, ``PutOp`` ...).

Re-exported by ``langmem_layer.store.ops``, where callers import them."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["GetManyOp"]


class GetManyOp(NamedTuple):
    """Gets of several keys of one namespace as one statement; the result is a dict of
    key -> ``Item`` of the keys found. The async store turns concurrent ``aget`` calls
    into these (see ``langmem_layer.store.aio``)."""

    namespace: tuple[str, ...]
    keys: tuple[str, ...]
    refresh_ttl: bool = True
