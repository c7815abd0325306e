"""Every SQL statement the library sends, as builders of :data:`Sql` that do no I/O.

One statement type and one placeholder style for all of them: the text uses named
placeholders (``%(user_id)s``) and the parameters are a dict, so fragments compose by
merging their dicts (:func:`merge`). DDL is :data:`Ddl`: sent as is, without
parameters, so its text needs no ``%`` escaping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["Ddl", "Params", "Sql", "merge"]

#: A statement's parameters, by placeholder name.
Params = dict[str, Any]
#: ``(sql, params)``: a statement with named placeholders and their values.
Sql = tuple[str, Params]
#: ``(sql, None)``: DDL (text, or a psycopg ``Composed`` of identifiers), sent as is.
Ddl = tuple[Any, None]


def merge(*parts: Mapping[str, Any] | None) -> Params:
    """The parameters of fragments composed into one statement.

    Raises:
        ValueError: Two fragments give one name different values (a builder bug: the
            composed text would bind one of them to both).
    """
    out: Params = {}
    for part in parts:
        for name, value in (part or {}).items():
            if name in out and out[name] is not value and out[name] != value:
                raise ValueError(f"parameter {name!r} given two values")
            out[name] = value
    return out
