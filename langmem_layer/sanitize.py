"""What crosses the library's edges: NUL characters in text, secrets and long input in
error messages.

**NUL characters (U+0000).** PostgreSQL ``text`` and ``jsonb`` cannot hold U+0000, so a
NUL in a message would fail the statement that stores it, and with it the turn.
Conversation text (the messages a turn queues and logs, the text recall searches for,
what a model extracts from them) is cleaned: the NUL is **removed**. It carries no
meaning in conversation text, removal keeps stored memories and logs free of stand-in
characters, and nothing downstream uses character offsets into a message. Content a
caller gives explicitly (``remember``'s content and references) is rejected instead,
with an error saying so: silently changing what a caller asked to store would be a
surprise.

**Messages.** No error, log line or HTTP response carries a password from a connection
string (``redact``), nor more than a short prefix of a caller's input (``excerpt``): a
malformed URL is echoed masked, a 3 MB message as its first words. A log line names a
text holding the user's words by its ``fingerprint`` only, and quotes an error by its
``headline`` (a validation error's later lines quote the input).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

from langchain_core.messages import BaseMessage, messages_from_dict, messages_to_dict

from langmem_layer.errors import InvalidContentError

__all__ = ["NUL", "clean", "clean_deep", "clean_messages", "excerpt", "fingerprint",
           "headline", "redact", "reject_nul"]

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


# -- messages ---------------------------------------------------------------------------

MASK = "***"
#: ``password=VALUE`` of libpq's key=value form (VALUE quoted or a bare word), and the
#: password of a URI's ``user:password@``; both masked wherever they appear in a text.
_KEYWORD_PASSWORD = re.compile(r"((?<![?&])\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s'\"]+)",
                               re.IGNORECASE)
#: (Not the placeholder of our own hints, ``postgresql://USER:PASSWORD@HOST``.)
_URI_PASSWORD = re.compile(
    r"(\b(?i:[a-z][a-z0-9+.-]*)://[^\s:/@'\"]*:)(?!PASSWORD@)([^\s@'\"]*)@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)([^&\s'\"]*)", re.IGNORECASE)
#: Secret values shorter than this are masked only where the patterns find them: a
#: literal search for a one-letter password would mask every such letter of a message.
_MIN_LITERAL = 4


def _secrets(conninfo: str) -> set[str]:
    """The passwords written in ``conninfo`` (raw and percent-decoded), parsed leniently:
    the string may be malformed, which is when it ends up in an error."""
    found: set[str] = set()
    for pattern in (_KEYWORD_PASSWORD, _URI_PASSWORD, _QUERY_PASSWORD):
        for m in pattern.finditer(conninfo):
            value = m.group(2)
            if value.startswith("'"):  # libpq's quoting: \' and \\ stand for ' and \
                value = re.sub(r"\\(.)", r"\1", value.strip("'"))
            found.update({value, unquote(value)})
    return {v for v in found if len(v) >= _MIN_LITERAL}


def redact(text: str, *conninfos: str | None) -> str:
    """``text`` with every password masked: those written in the connection strings it
    quotes, and each password of ``conninfos`` wherever it appears (libpq may quote a
    piece of a malformed URI in its error).

    Example:
        >>> redact("bad: 'host=db password=s3cret port=x'")
        "bad: 'host=db password=*** port=x'"
    """
    text = _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    text = _URI_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    for conninfo in conninfos:
        for secret in sorted(_secrets(conninfo or ""), key=len, reverse=True):
            text = text.replace(secret, MASK)
    return text


#: How much of a caller's input an error quotes.
EXCERPT = 60


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    """A short quote of ``value`` for an error message: its ``repr``, cut to ``limit``
    characters with the total length said, so an error never carries a whole input."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    shown = repr(text[:limit]) if isinstance(value, str) else text[:limit]
    return f"{shown}… ({len(text):,} characters)"


def fingerprint(text: str) -> str:
    """What a log line says of a text it must not show (a model's raw output holds the
    user's words): its length and the start of its SHA-256, enough to match it with the
    copy kept where the user's data is (the decision log)."""
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{len(text):,} characters, sha256 {digest}"


def headline(error: str) -> str:
    """An error's first line, cut to 200 characters, for a log line: a validation error
    quotes the values it refused on its later lines, and those are the user's words."""
    first = error.strip().splitlines()[0] if error.strip() else ""
    return first[:200]
