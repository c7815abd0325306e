"""Every SQL statement the library sends, as builders of ``Sql`` that do no I/O.

One statement type and one placeholder style for all of them: the text uses named
placeholders (``%(user_id)s``) and the parameters are a dict, so fragments compose by
merging their dicts (``merge``). DDL is ``Ddl``: sent as is, without
parameters, so its text needs no ``%`` escaping.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

__all__ = ["Ddl", "Params", "Sql", "merge", "numbered", "renamed", "with_writes"]

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


# An escaped percent sign first, so "%%(x)s" (literal text) is not taken for a placeholder.
_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s")
# Every percent sign: escaped, a named placeholder, or (an error) anything else.
_ANY_PERCENT = re.compile(_PLACEHOLDER.pattern + "|%")
# A statement's own CTE list, which the writes of with_writes join.
_WITH = re.compile(r"WITH(\s+RECURSIVE)?\s+", re.IGNORECASE)


def renamed(statement: Sql, prefix: str) -> Sql:
    """``statement`` with each placeholder ``%(name)s`` renamed ``%(<prefix>name)s``, so
    it composes with fragments that give the same names other values.

    Only the placeholders ``statement``'s params give a value are renamed: the others
    are the enclosing statement's to bind (a lifecycle rule's condition reads its own
    ``days`` and the pass's ``now``)."""
    text, params = statement
    return (_PLACEHOLDER.sub(
                lambda m: f"%({prefix}{m.group(1)})s" if m.group(1) in params
                else m.group(0), text),
            {prefix + name: value for name, value in params.items()})


def numbered(query: Any, params: Mapping[str, Any] | None) -> tuple[Any, list[Any] | None]:
    """A statement in PostgreSQL's own ``$n`` placeholders, for psycopg's raw cursors.

    psycopg converts ``%(name)s`` to ``$n`` on every execute and keeps the conversion
    only for statements under 4 KiB; recall's is longer, so it was parsed again each
    turn. Here each distinct text is converted once (``%%`` becomes ``%``; a name used
    twice is one ``$n``). A statement without parameters (DDL, a psycopg ``Composed``)
    is sent as is, as psycopg sends it.

    Raises:
        ValueError: A ``%`` that is neither ``%%`` nor a named placeholder, or a
            placeholder without a value (psycopg refuses both too).
    """
    if params is None:
        return query, None
    text, names = _numbered(query if isinstance(query, str) else query.as_string(None))
    try:
        return text, [params[name] for name in names]
    except KeyError as e:
        raise ValueError(f"no value for placeholder %({e.args[0]})s") from None


@lru_cache(maxsize=1024)
def _numbered(query: str) -> tuple[str, tuple[str, ...]]:
    names: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is None:
            raise ValueError(f"a '%' that is neither '%%' nor %(name)s in {query[:80]!r}")
        return f"${names.setdefault(match.group(1), len(names) + 1)}"

    return _ANY_PERCENT.sub(number, query), tuple(names)


def with_writes(main: Sql, *writes: Sql) -> Sql:
    """``main`` with ``writes`` run as data-modifying CTEs of it: one statement.

    PostgreSQL runs every data-modifying CTE once, to completion, whether or not the
    statement reads its rows. All parts see one snapshot, so none may read a row
    another part writes: ``writes`` must touch other tables than ``main`` and each
    other. The result is ``main``'s rows. Each part's placeholders are renamed apart;
    a ``main`` with CTEs of its own keeps them, after the writes.
    """
    if not writes:
        return main
    parts = [renamed(w, f"w{n}_") for n, w in enumerate(writes)]
    text, params = renamed(main, "m_")
    ctes = ",\n        ".join(f"w{n} AS ({sql})" for n, (sql, _) in enumerate(parts))
    head, rest = "WITH", text.lstrip()
    if (own := _WITH.match(rest)) is not None:  # one WITH list: the writes join it
        head, rest = own.group(0).strip(), rest[own.end():]
        ctes += ","
    return (f"{head} {ctes}\n        {rest}", merge(params, *(p for _, p in parts)))

