"""Where configuration comes from, resolved in one place.

The command line, ``graphs/``, ``checkpointers/``, the demo and ``MemoryLayer``
all ask here, so a deployment configures the library once, through the environment:

- database: the ``url`` argument, else ``LANGMEM_DATABASE_URL``, else the embedded
  PostgreSQL in the data directory (started when needed);
- data directory: the ``data_dir`` argument, else ``LANGMEM_DATA_DIR``, else the
  platform's per-user data directory (``~/.local/share/langmem-layer`` on Linux), so a
  script finds the same memory from any working directory (a ``.langmem`` that an
  earlier version made in the working directory is still used, with a warning);
- settings: ``MemorySettings.from_env`` (``LANGMEM_*`` variables);
- embedder: OpenAI ``text-embedding-3-small`` with ``OPENAI_API_KEY`` or
  ``OPENAI_BASE_URL``, else the local all-MiniLM-L6-v2;
- chat model and extractor: ``ChatOpenAI`` (``OPENAI_MODEL``, default ``gpt-4o-mini``)
  and the LLM extractor when OpenAI is configured, else the rule extractor (and the
  offline chat model for the demo agent);
- synthesizer of the reflection jobs: a model synthesizer on that chat model, else the
  offline (template) synthesizer.

Nothing here connects or loads a model at import.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langmem_layer.errors import ConfigurationError
from langmem_layer.sanitize import redact
from langmem_layer.settings import MemorySettings
from langmem_layer.store.embedding.default_embedder import openai_configured
from langmem_layer.store.options import check_conninfo

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from langmem_layer.extract.extractor import Extractor
    from langmem_layer.store.aio import AsyncPostgresMemoryStore
    from langmem_layer.store.sync import PostgresMemoryStore
    from langmem_layer.synth.synthesizer import Synthesizer

__all__ = [
    "agent_chat_model",
    "aopen_store",
    "data_dir",
    "database_url",
    "default_chat_model",
    "default_extractor",
    "default_synthesizer",
    "describe_database",
    "open_store",
    "settings_from_env",
    "settings_from_file",
]

#: The data directory earlier versions made in the working directory.
LEGACY_DATA_DIR = ".langmem"
DEFAULT_OPENAI_CHAT_MODEL = "gpt-4o-mini"
_warned_legacy = False
logger = logging.getLogger("langmem_layer")


def data_dir(path: str | Path | None = None) -> Path:
    """The embedded server's directory, absolute: ``path``, else ``LANGMEM_DATA_DIR``,
    else a ``.langmem`` database an earlier version made in the working directory, else
    ``default_data_dir``."""
    chosen = path or os.environ.get("LANGMEM_DATA_DIR")
    if chosen:
        return Path(chosen).expanduser().resolve()
    from langmem_layer.store.embedded import default_data_dir

    legacy = Path(LEGACY_DATA_DIR).resolve()
    if (legacy / "PG_VERSION").exists():
        global _warned_legacy
        if not _warned_legacy:
            _warned_legacy = True
            logger.warning(
                "using the embedded database in %s, found in the working directory; the "
                "default is now %s (set LANGMEM_DATA_DIR to choose one)", legacy,
                default_data_dir())
        return legacy
    return default_data_dir()


_data_dir = data_dir  # database_url() takes a parameter of the same name


def configured_url(url: str | None = None) -> str | None:
    """``url`` or ``LANGMEM_DATABASE_URL``; None means the embedded server.

    Raises:
        ConfigurationError: The URL is not a PostgreSQL connection string.
    """
    found = url or os.environ.get("LANGMEM_DATABASE_URL") or None
    return None if found is None else check_conninfo(found)


def database_url(url: str | None = None, *, data_dir: str | Path | None = None,
                 create: bool = True) -> str:
    """The memory database: ``url``, else ``LANGMEM_DATABASE_URL``, else the embedded one.

    The embedded server (in ``data_dir``) is started when needed.

    Args:
        url: A PostgreSQL URL.
        data_dir: The embedded server's directory when no URL is configured.
        create: False: an embedded database that does not exist yet is an error
            (``DatabaseNotFoundError``) rather than created.
    """
    found = configured_url(url)
    if found:
        return found
    from langmem_layer.store.embedded import embedded_uri

    return embedded_uri(_data_dir(data_dir), create=create)


def describe_database(url: str | None = None, *, data_dir: str | Path | None = None) -> str:
    """Where the memory lives, for a log line or a terminal: the configured URL with its
    password masked, or the embedded database's absolute directory."""
    found = configured_url(url)
    if found:
        return f"PostgreSQL at {redact(found)}"
    return f"embedded PostgreSQL in {_data_dir(data_dir)}"


def settings_from_env(**overrides: Any) -> MemorySettings:
    """``MemorySettings`` from the ``LANGMEM_*`` environment, plus ``overrides``."""
    return MemorySettings.from_env(**overrides)


def default_chat_model() -> BaseChatModel | None:
    """``ChatOpenAI`` when OpenAI (or a compatible server) is configured, else None."""
    if not openai_configured():
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=os.environ.get("OPENAI_MODEL", DEFAULT_OPENAI_CHAT_MODEL))


def agent_chat_model() -> BaseChatModel:
    """The demo and Studio agent's model: ``default_chat_model``, else the offline one."""
    model = default_chat_model()
    if model is not None:
        return model
    from langmem_layer.offline_chat import OfflineChatModel

    return OfflineChatModel()


def default_extractor(chat_model: BaseChatModel | None = None) -> Extractor:
    """An LLM extractor on ``chat_model`` (or ``default_chat_model``), else the rules."""
    chat_model = chat_model or default_chat_model()
    if chat_model is not None:
        from langmem_layer.extract.llm import LLMExtractor

        return LLMExtractor(chat_model)
    from langmem_layer.extract.rules import RuleExtractor

    return RuleExtractor()


def default_synthesizer(chat_model: BaseChatModel | None = None) -> Synthesizer:
    """The reflection jobs' synthesizer: a ``ModelSynthesizer``
    on ``chat_model`` (or ``default_chat_model``), else the offline one."""
    chat_model = chat_model or default_chat_model()
    if chat_model is not None:
        from langmem_layer.synth.synthesizer import ModelSynthesizer

        return ModelSynthesizer(chat_model)
    from langmem_layer.synth.offline_synthesizer import OfflineSynthesizer

    return OfflineSynthesizer()


@contextmanager
def open_store(url: str | None = None, *, data_dir: str | Path | None = None,
               create: bool = True, **kwargs: Any) -> Iterator[PostgresMemoryStore]:
    """A ``PostgresMemoryStore`` on ``database_url``; closed on exit.

    Example:
        >>> with open_store() as store:
        ...     store.setup()
        ...     memory = MemoryLayer(store)

    Args:
        url: A PostgreSQL URL; default ``LANGMEM_DATABASE_URL``, else the embedded server.
        data_dir: The embedded server's directory when no URL is set.
        create: False: do not create an embedded database that does not exist yet.
        **kwargs: Passed to the store (``index``, ``pool_size``, ``ttl`` ...).
    """
    from langmem_layer.store.sync import PostgresMemoryStore

    with PostgresMemoryStore.from_conn_string(
            database_url(url, data_dir=data_dir, create=create), **kwargs) as store:
        yield store


@asynccontextmanager
async def aopen_store(url: str | None = None, *, data_dir: str | Path | None = None,
                      create: bool = True, pool_size: int | None = 10,
                      **kwargs: Any) -> AsyncIterator[AsyncPostgresMemoryStore]:
    """An ``AsyncPostgresMemoryStore`` on ``database_url``, with a connection
    pool (concurrent users' calls run side by side); closed on exit.

    Example:
        >>> async with aopen_store() as store:
        ...     await store.setup()
        ...     memory = MemoryLayer(store)

    Args:
        url: A PostgreSQL URL; default ``LANGMEM_DATABASE_URL``, else the embedded server.
        data_dir: The embedded server's directory when no URL is set.
        create: False: do not create an embedded database that does not exist yet.
        pool_size: Connections in the pool (None: one connection).
        **kwargs: Passed to the store (``index``, ``ttl`` ...).
    """
    from langmem_layer.store.aio import AsyncPostgresMemoryStore

    # Starting the embedded server blocks: kept off the event loop.
    found = await asyncio.to_thread(database_url, url, data_dir=data_dir, create=create)
    async with AsyncPostgresMemoryStore.from_conn_string(found, pool_size=pool_size,
                                                         **kwargs) as store:
        yield store


def settings_from_file(path: str | None) -> MemorySettings:
    """Settings from a JSON object of ``MemorySettings`` fields, over ``LANGMEM_*``.

    Args:
        path: The JSON file; None: ``settings_from_env`` alone.

    Raises:
        ConfigurationError: The file cannot be read, or holds no JSON object.
    """
    if path is None:
        return settings_from_env()
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigurationError(f"--settings {path}: {e}; pass a JSON object of "
                                 "MemorySettings fields, e.g. {\"rrf_k\": 5}") from e
    if not isinstance(data, dict):
        raise ConfigurationError(f"--settings {path} must hold a JSON object")
    return settings_from_env(**data)
