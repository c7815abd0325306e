"""Compile BaseStore search filters to SQL over the ``value`` jsonb column.

Supported: equality (``{"k": v}``), nested objects (``{"a": {"b": 1}}``), dotted keys
(``{"a.b": 1}``), and the operators ``$eq $ne $gt $gte $lt $lte $in $nin`` plus the
combinators ``$and`` / ``$or`` (lists of filters). Unlike LangGraph's PostgresStore,
ordering operators compare numbers as numbers (``{"score": {"$gt": 5}}`` matches 10
and 100, not only 9.5) and strings as strings; a value of the other type never matches.

Values always travel as parameters; operators come from a lookup table.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langmem_layer.errors import InvalidFilterError
from langmem_layer.sql import Params, Sql

__all__ = ["compile_filter"]

_ORDERING = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
_COMBINATORS = {"$and": " AND ", "$or": " OR "}


def _path(key: str) -> list[str]:
    parts = key.split(".")
    if not all(parts):
        raise InvalidFilterError(f"Filter key {key!r} has an empty segment.")
    return parts


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _operator(column: str, path: list[str], op: str, value: Any, names: Iterator[str]
              ) -> tuple[str, Params]:
    p, v = next(names), next(names)
    target = f"{column} #> %({p})s::text[]"
    if op == "$eq":
        return f"({target} = %({v})s::jsonb)", {p: path, v: json.dumps(value)}
    if op == "$ne":
        return f"({target} IS DISTINCT FROM %({v})s::jsonb)", {p: path, v: json.dumps(value)}
    if op in ("$in", "$nin"):
        if not isinstance(value, list | tuple):
            raise InvalidFilterError(f"{op} takes a list, got {type(value).__name__}.")
        values = [json.dumps(x) for x in value]
        clause = f"coalesce({target} = ANY(%({v})s::jsonb[]), false)"
        return (f"({clause})" if op == "$in" else f"(NOT {clause})"), {p: path, v: values}
    if op in _ORDERING:
        sql_op = _ORDERING[op]
        if _is_number(value):
            # Cast only values that are JSON numbers, so text never breaks the cast.
            return (
                f"(jsonb_typeof({target}) = 'number' AND "
                f"({column} #>> %({p})s::text[])::numeric {sql_op} %({v})s::numeric)",
                {p: path, v: value},
            )
        if isinstance(value, str):
            return (
                f"(jsonb_typeof({target}) = 'string' AND "
                f"({column} #>> %({p})s::text[]) {sql_op} %({v})s)",
                {p: path, v: value},
            )
        raise InvalidFilterError(
            f"{op} compares numbers or strings; got {type(value).__name__} for {'.'.join(path)!r}."
        )
    raise InvalidFilterError(
        f"Unsupported filter operator {op!r}; use one of "
        "$eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $and, $or."
    )


def _compile(column: str, filt: Mapping[str, Any], base: list[str], names: Iterator[str]
             ) -> tuple[str, Params]:
    clauses: list[str] = []
    params: Params = {}
    for key, value in filt.items():
        if key in _COMBINATORS:
            if not isinstance(value, Sequence) or isinstance(value, str) or not value:
                raise InvalidFilterError(f"{key} takes a non-empty list of filters.")
            parts = []
            for sub in value:
                if not isinstance(sub, Mapping):
                    raise InvalidFilterError(f"Each {key} entry must be a filter dict.")
                sub_sql, sub_params = _compile(column, sub, base, names)
                parts.append(sub_sql)
                params.update(sub_params)
            clauses.append("(" + _COMBINATORS[key].join(parts) + ")")
            continue
        if key.startswith("$"):
            raise InvalidFilterError(f"Operator {key!r} must be nested under a field name.")
        path = base + _path(key)
        if isinstance(value, Mapping) and value and all(k.startswith("$") for k in value):
            for op, op_value in value.items():
                sql, p = _operator(column, path, op, op_value, names)
                clauses.append(sql)
                params.update(p)
        elif isinstance(value, Mapping) and value:
            sql, p = _compile(column, value, path, names)
            clauses.append(sql)
            params.update(p)
        else:
            sql, p = _operator(column, path, "$eq", value, names)
            clauses.append(sql)
            params.update(p)
    return (" AND ".join(clauses) if clauses else "TRUE"), params


def compile_filter(
    filt: Mapping[str, Any] | None, *, column: str = "i.value"
) -> Sql:
    """Compile a filter dict to a SQL boolean expression and its parameters.

    Args:
        filt: The filter, as passed to ``BaseStore.search``. ``None`` or ``{}`` matches all.
        column: The jsonb column expression to filter (trusted, never user input).

    Returns:
        ``(sql, params)``; the placeholders are named ``filter_0``, ``filter_1`` ...
        (no other builder's names), so the fragment merges into any statement.

    Raises:
        InvalidFilterError: On an unknown operator or a value of the wrong type.
    """
    if not filt:
        return "TRUE", {}
    if not isinstance(filt, Mapping):
        raise InvalidFilterError(f"A filter is a dict, got {type(filt).__name__}.")
    return _compile(column, filt, [], (f"filter_{n}" for n in itertools.count()))
