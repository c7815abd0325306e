"""Checks of caller input, before anything is read or written.

Each check raises a ``LangmemError`` subclass whose message
says what to pass instead, and returns the value in the form the flows use. A string
where a sequence of strings is expected (``refs="acme"``, ``statuses="active"``) is
taken as one element, never split into characters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from langmem_layer.errors import InvalidContentError, InvalidInputError, InvalidMemoryError
from langmem_layer.types import Status

__all__ = [
    "check_choice",
    "check_content_text",
    "check_is_text",
    "check_limit",
    "check_messages",
    "check_score",
    "check_statuses",
    "check_strings",
    "check_time",
]

E = TypeVar("E", bound=StrEnum)


def _type(value: Any) -> str:
    return type(value).__name__


def check_messages(messages: Any) -> Sequence[BaseMessage]:
    """A turn: a non-empty sequence of LangChain messages."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInputError(
            f"messages must be a list of LangChain messages, got {_type(messages)}: "
            "pass e.g. [HumanMessage('...'), AIMessage('...')]."
        )
    if not messages:
        raise InvalidInputError(
            "messages is empty: pass the turn's messages, e.g. [HumanMessage('...')]."
        )
    for m in messages:
        if not isinstance(m, BaseMessage):
            raise InvalidInputError(
                f"messages must hold LangChain messages, got {_type(m)}: wrap text as "
                "HumanMessage('...')."
            )
    return messages


def check_limit(limit: Any, name: str = "limit") -> int | None:
    """A result count: ``None`` (the default) or an int of at least 1."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInputError(f"{name} must be an int of at least 1, got {_type(limit)}.")
    if limit < 1:
        raise InvalidInputError(
            f"{name} must be at least 1, got {limit}; pass None for the default."
        )
    return limit


def check_strings(values: Any, name: str) -> tuple[str, ...]:
    """Strings: a sequence of them, or one string taken as one element."""
    if values is None:
        return ()
    if isinstance(values, str):
        return (values,)
    if not isinstance(values, Sequence) or isinstance(values, bytes):
        raise InvalidInputError(
            f"{name} must be a list of strings (or one string), got {_type(values)}."
        )
    for v in values:
        if not isinstance(v, str):
            raise InvalidInputError(
                f"{name} must hold strings, got {_type(v)} {v!r}: pass e.g. ['acme']."
            )
    return tuple(values)


def check_statuses(statuses: Any) -> tuple[str, ...] | None:
    """Lifecycle statuses to list: ``None`` (every status), one, or several."""
    if statuses is None:
        return None
    found = check_strings(statuses, "statuses")
    valid = [s.value for s in Status]
    for s in found:
        if s not in valid:
            raise InvalidInputError(f"Unknown status {s!r}: use one of {valid}.")
    if not found:
        raise InvalidInputError(
            f"statuses is empty: pass some of {valid}, or None for every status."
        )
    return found


def check_choice(value: Any, enum: type[E], name: str) -> E:
    """A member of ``enum`` (or its value)."""
    try:
        return enum(value)
    except ValueError as e:
        valid = [m.value for m in enum]
        raise InvalidMemoryError(f"Invalid {name} {value!r}: use one of {valid}.") from e


def check_score(value: Any, name: str) -> float:
    """A score in [0, 1] (confidence, salience)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidMemoryError(f"{name} must be a number in [0, 1], got {_type(value)}.")
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise InvalidMemoryError(f"{name} must be in [0, 1], got {value}.")
    return float(value)


def check_time(value: Any, name: str) -> datetime | None:
    """A time: ``None`` or a datetime (naive ones are taken as UTC)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInputError(
            f"{name} must be a datetime, got {_type(value)}: pass e.g. "
            "datetime(2026, 5, 1, tzinfo=UTC)."
        )
    try:
        value.utcoffset()  # a naive time is taken as UTC, as everywhere in the library
    except Exception as e:  # a tzinfo that cannot say its offset
        raise InvalidInputError(
            f"{name} has an unusable timezone ({e}): pass a datetime with "
            "tzinfo=UTC or a zoneinfo.ZoneInfo."
        ) from e
    return value


def check_is_text(content: Any, name: str = "content") -> str:
    """A string (memory content is then held to the content rule,
    ``langmem_layer.extract.gate.content_problem``)."""
    if not isinstance(content, str):
        raise InvalidContentError(f"{name} must be a string, got {_type(content)}.")
    return content


def check_content_text(content: Any, name: str = "content") -> str:
    """Text PostgreSQL can store: a string without NUL characters."""
    check_is_text(content, name)
    if "\x00" in content:
        raise InvalidContentError(
            f"{name} contains a NUL character (\\x00), which PostgreSQL cannot store: "
            "remove it."
        )
    return content
