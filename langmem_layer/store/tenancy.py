"""Tenancy: which user a namespace belongs to, and which namespaces a store accepts.

Items under a tenant root (``("memories", user_id, ...)`` by default) belong to the
user named by the second label; every statement binds that user, so one user's data
never mixes with another's. Items elsewhere belong to the shared tenant ``""``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Literal, cast

from langgraph.store.base import (
    NOT_PROVIDED,
    GetOp,
    NotProvided,
    PutOp,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base import InvalidNamespaceError as _LGInvalidNamespace

from langmem_layer.errors import InvalidInputError, InvalidNamespaceError

__all__ = ["Tenancy", "check_key", "check_namespace", "match_namespace", "ns_text", "ns_tuple"]


def ns_text(namespace: tuple[str, ...]) -> str:
    """A namespace as stored: its labels joined by dots."""
    return ".".join(namespace)


def ns_tuple(prefix: str) -> tuple[str, ...]:
    """The namespace of a stored prefix."""
    return tuple(prefix.split("."))


def match_namespace(path: tuple[str, ...], namespace: tuple[str, ...], suffix: bool) -> bool:
    """Whether ``namespace`` starts (or with ``suffix`` ends) with ``path`` (``*``: any)."""
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(reversed(namespace), reversed(path), strict=False)
        if suffix
        else zip(namespace, path, strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


def check_key(key: Any) -> None:
    """Refuse a key that is not a string or holds a NUL (``InvalidInputError``)."""
    if not isinstance(key, str):
        raise InvalidInputError(
            f"key must be a string, got {type(key).__name__} ({key!r}): pass str(key)."
        )
    if "\x00" in key:
        raise InvalidInputError(f"key {key!r} contains a NUL character: remove it.")


def check_namespace(namespace: Any) -> None:
    """Refuse a namespace a put may not write to (``InvalidNamespaceError``)."""
    if not isinstance(namespace, tuple) or not namespace:
        raise InvalidNamespaceError(
            f"Namespace cannot be empty and must be a tuple of strings, got {namespace!r}."
        )
    _check_labels(GetOp(namespace, ""))
    _check_root(namespace)


def _check_labels(op: Any) -> None:
    """LangGraph's label checks of ``op``'s namespace, raising the library's own error."""
    try:
        validate_op_namespace(op)
    except _LGInvalidNamespace as e:
        raise InvalidNamespaceError(str(e)) from e


def _check_root(namespace: tuple[str, ...]) -> None:
    """LangGraph keeps the root label ``langgraph`` for itself."""
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph". Got: {namespace}'
        )


def _check_put_namespace(namespace: Any) -> None:
    """What a put's namespace must be besides LangGraph's label rules."""
    _check_labels(PutOp(namespace, "", None))
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    _check_root(namespace)
    # The labels are strings: validate_op_namespace checked them.
    if not all(map(str.strip, namespace)):
        raise InvalidNamespaceError(
            f"Namespace labels cannot be blank (only whitespace), got {namespace!r}: "
            "name each level, e.g. ('memories', 'alice', 'notes')."
        )


# Namespaces already found valid, so the ops of a busy store skip re-checking every label
# (a set lookup instead of LangGraph's per-label checks). Reads and puts apart: a put's
# rules are stricter. Bounded: cleared when full.
_READ_NAMESPACES: set[tuple[str, ...]] = set()
_PUT_NAMESPACES: set[tuple[str, ...]] = set()
_KNOWN_MAX = 4096


def _once(known: set[tuple[str, ...]], namespace: Any, check: Callable[[Any], None],
          subject: Any) -> None:
    """``check(subject)``, unless ``namespace`` passed it before; remembered once it does."""
    try:
        if namespace in known:
            return
    except TypeError:  # an unhashable label: the full check says what is wrong
        pass
    check(subject)
    if type(namespace) is tuple:
        if len(known) >= _KNOWN_MAX:
            known.clear()
        known.add(namespace)


class Tenancy:
    """Namespace validation and the namespace → user rule; expects ``tenant_roots``.

    ``put``, ``get`` and ``delete`` (and their async twins) check the key before
    LangGraph's ``BaseStore`` methods turn it into text: ``put(ns, None, v)`` must not
    store an item under ``"None"``.
    """

    tenant_roots: frozenset[str]

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Literal[False] | list[str] | None = None, *,
            ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        """``BaseStore.put``, refusing a key that is not a string."""
        check_namespace(namespace)
        check_key(key)
        cast(Any, super()).put(namespace, key, value, index, ttl=ttl)

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Literal[False] | list[str] | None = None, *,
                   ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        """``BaseStore.aput``, refusing a key that is not a string."""
        check_namespace(namespace)
        check_key(key)
        await cast(Any, super()).aput(namespace, key, value, index, ttl=ttl)

    def get(self, namespace: tuple[str, ...], key: str, *,
            refresh_ttl: bool | None = None) -> Any:
        """``BaseStore.get``, refusing a key that is not a string."""
        check_key(key)
        return cast(Any, super()).get(namespace, key, refresh_ttl=refresh_ttl)

    async def aget(self, namespace: tuple[str, ...], key: str, *,
                   refresh_ttl: bool | None = None) -> Any:
        """``BaseStore.aget``, refusing a key that is not a string."""
        check_key(key)
        return await cast(Any, super()).aget(namespace, key, refresh_ttl=refresh_ttl)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """``BaseStore.delete``, refusing a key that is not a string."""
        check_key(key)
        cast(Any, super()).delete(namespace, key)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """``BaseStore.adelete``, refusing a key that is not a string."""
        check_key(key)
        await cast(Any, super()).adelete(namespace, key)

    def search(self, namespace_prefix: tuple[str, ...], /, **kwargs: Any) -> Any:
        """``BaseStore.search``; an invalid prefix raises the library's own error."""
        try:
            return cast(Any, super()).search(namespace_prefix, **kwargs)
        except _LGInvalidNamespace as e:
            if isinstance(e, InvalidNamespaceError):
                raise
            raise InvalidNamespaceError(str(e)) from e

    async def asearch(self, namespace_prefix: tuple[str, ...], /, **kwargs: Any) -> Any:
        """``BaseStore.asearch``; an invalid prefix raises the library's own error."""
        try:
            return await cast(Any, super()).asearch(namespace_prefix, **kwargs)
        except _LGInvalidNamespace as e:
            if isinstance(e, InvalidNamespaceError):
                raise
            raise InvalidNamespaceError(str(e)) from e

    def _validate(self, op: Any) -> None:
        if isinstance(op, PutOp):
            _once(_PUT_NAMESPACES, op.namespace, _check_put_namespace, op.namespace)
            check_key(op.key)
            if op.value is not None and not isinstance(op.value, dict):
                raise InvalidInputError(
                    f"value must be a dict (or None to delete), got {type(op.value).__name__}."
                )
            ttl = op.ttl
            if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))
                                    or math.isnan(ttl) or ttl <= 0):
                raise InvalidInputError(
                    f"ttl must be a positive number of minutes (or None: no expiry), got "
                    f"{ttl!r}; delete an item with store.delete(namespace, key)."
                )
        elif isinstance(op, GetOp):
            _once(_READ_NAMESPACES, op.namespace, _check_labels, op)
            check_key(op.key)
        elif isinstance(op, SearchOp):
            _once(_READ_NAMESPACES, op.namespace_prefix, _check_labels, op)
            for name in ("limit", "offset"):
                n = getattr(op, name)
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise InvalidInputError(
                        f"search {name} must be an int of at least 0, got {n!r}."
                    )
        else:
            _check_labels(op)

    def tenant(self, namespace: tuple[str, ...], *, prefix: bool = False) -> str:
        """The user a namespace belongs to; ``""`` outside the tenant roots."""
        if namespace and namespace[0] in self.tenant_roots:
            if len(namespace) < 2 or namespace[1] == "*":
                what = "search" if prefix else "store items"
                raise InvalidNamespaceError(
                    f"Namespace {namespace!r} is under {namespace[0]!r} but names no user: "
                    f"{what} under ({namespace[0]!r}, user_id, ...) so one user's data "
                    "never mixes with another's."
                )
            if not namespace[1].strip():
                raise InvalidNamespaceError(
                    f"Namespace {namespace!r} names a blank user ({namespace[1]!r}): pass "
                    f"({namespace[0]!r}, user_id, ...) with the user's id, e.g. 'alice'."
                )
            return namespace[1]
        return ""
