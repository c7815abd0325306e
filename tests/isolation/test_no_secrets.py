"""No error, log line or HTTP response carries a password from a connection string.

A URL enters the library as an argument (``open_store``, ``from_conn_string``, the
CLI's ``--database-url``, ``create_app``), through ``LANGMEM_DATABASE_URL`` (the CLI,
``open_store``, the HTTP app), or through ``langgraph.json``'s environment (the store the
LangGraph server enters, ``graphs/store.py``). Each is tried with malformed and
unreachable URLs whose password is ``PASSWORD``; the error raised (with its whole
traceback), everything logged at DEBUG, everything printed and the HTTP answer must not
contain it.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from langmem_layer import ConfigurationError, LangmemError
from langmem_layer.cli import main
from langmem_layer.environment import open_store
from langmem_layer.sanitize import excerpt, redact
from langmem_layer.server.http.app import create_app
from langmem_layer.server.served import langgraph_store
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore

PASSWORD = "s3cretPW%41"  # percent-encoded in a URI: libpq decodes it to s3cretPWA
DECODED = "s3cretPWA"
URLS = [
    f"host=127.0.0.1 password={PASSWORD} port=1 bogus",  # malformed key=value
    f"host=127.0.0.1 password='{PASSWORD}' port=1",  # unreachable
    f"postgresql://user:{PASSWORD}@127.0.0.1:1/db",  # unreachable URI
    f"postgresql://user:{PASSWORD}@127.0.0.1:notaport/db",  # bad port
    f"postgresql://user:{PASSWORD}%zz@127.0.0.1:1/db",  # libpq quotes the bad token
    f"postgresql://127.0.0.1:1/db?user=u&password={PASSWORD}&sslmode=bogus",
    f"host=127.0.0.1 port=1 password={PASSWORD} sslmode=bogus",
]


def _clean(text: str) -> None:
    assert PASSWORD not in text and DECODED not in text, text


def _clean_error(error: BaseException) -> None:
    _clean("".join(traceback.format_exception(error)))


@pytest.fixture(autouse=True)
def _every_log(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.DEBUG)
    yield
    _clean("\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records))


@pytest.mark.parametrize("url", URLS)
def test_an_argument(url: str) -> None:
    with pytest.raises(LangmemError) as caught, open_store(url):
        pass
    _clean_error(caught.value)
    with pytest.raises(LangmemError) as caught, PostgresMemoryStore.from_conn_string(url):
        pass
    _clean_error(caught.value)


@pytest.mark.parametrize("url", URLS)
async def test_an_argument_async(url: str) -> None:
    with pytest.raises(LangmemError) as caught:
        async with AsyncPostgresMemoryStore.from_conn_string(url):
            pass
    _clean_error(caught.value)


@pytest.mark.parametrize("url", URLS)
def test_the_command_line(url: str, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--database-url", url, "list", "carol"]) == 1
    monkeypatch.setenv("LANGMEM_DATABASE_URL", url)
    assert main(["list", "carol"]) == 1
    out = capsys.readouterr()
    assert out.err.count("langmem-layer:") == 2
    _clean(out.out + out.err)


@pytest.mark.parametrize("url", URLS)
def test_the_environment_of_the_http_app(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGMEM_DATABASE_URL", url)
    with pytest.raises(LangmemError) as caught, TestClient(create_app(agent=False)):
        pass
    _clean_error(caught.value)
    with pytest.raises(LangmemError) as caught, \
            TestClient(create_app(database_url=url, agent=False)):
        pass
    _clean_error(caught.value)


@pytest.mark.parametrize("url", URLS)
async def test_the_environment_langgraph_json_gives_the_server(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGMEM_DATABASE_URL", url)  # langgraph.json's "env"
    with pytest.raises(LangmemError) as caught:
        async with langgraph_store():
            pass
    _clean_error(caught.value)


def test_a_bad_port_is_said_to_be_one() -> None:
    with pytest.raises(ConfigurationError, match="Invalid port 'notaport'"), \
            open_store("postgres://user:pw-secret@host:notaport/db"):
        pass


def test_redact_masks_each_form() -> None:
    assert redact("'host=h password=abcd port=1 x'") == "'host=h password=*** port=1 x'"
    assert redact("postgresql://u:abcd@h/db") == "postgresql://u:***@h/db"
    assert redact("postgresql://h/db?password=abcd&sslmode=x") == \
        "postgresql://h/db?password=***&sslmode=x"
    assert redact("token: 'abcd'", "host=h password=abcd") == "token: '***'"
    assert redact("no secret here") == "no secret here"


def test_excerpt_quotes_a_prefix() -> None:
    assert excerpt("short") == "'short'"
    assert excerpt("x" * 3_000_000).endswith("… (3,000,000 characters)")
    assert len(excerpt("x" * 3_000_000)) < 100
