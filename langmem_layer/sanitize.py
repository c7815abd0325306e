"""NUL characters (U+0000) at the edges of the library.

PostgreSQL ``text`` and ``jsonb`` cannot hold U+0000, so a NUL in a message would fail
the statement that stores it, and with it the turn. Conversation text (the messages a
turn queues and logs, the text recall searches for, what a model extracts from them) is
cleaned: the NUL is **removed**. It carries no meaning in conversation text, removal
keeps stored memories and logs free of stand-in characters, and nothing downstream uses
character offsets into a message. Content a caller gives explicitly (``remember``'s
content and references) is rejected instead, with an error saying so: silently changing
what a caller asked to store would be a surprise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict

from langmem_layer.errors import InvalidContentError

__all__ = ["NUL", "clean", "clean_deep", "clean_messages", "reject_nul"]

NUL = "\x00"
T = TypeVar("T")


def clean(text: str) -> str:
    """``text`` without NUL characters."""
    return text.replace(NUL, "") if NUL in text else text


def clean_deep(value: T) -> T:
    """A JSON-like value (dicts, lists, strings) with NUL removed from every string."""
    if isinstance(value, str):
        return clean(value)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {clean_deep(k): clean_deep(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list | tuple):
        return type(value)(clean_deep(v) for v in value)  # type: ignore[return-value]
    return value


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def clean_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages with NUL removed from their content and fields (the same objects when
    none has one)."""
    dicts = messages_to_dict(list(messages))
    if not _has_nul(dicts):
        return list(messages)
    return messages_from_dict(clean_deep(dicts))


def reject_nul(value: str, what: str) -> str:
    """``value`` unchanged, or a clear error if it holds a NUL character.

    Raises:
        InvalidContentError: ``value`` contains U+0000.
    """
    if NUL in value:
        raise InvalidContentError(
            f"{what} contains a NUL character (U+0000) at position {value.index(NUL)}, "
            "which PostgreSQL cannot store; remove it (e.g. value.replace('\\x00', ''))."
        )
    return value
