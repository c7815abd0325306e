"""How a store embeds items: the index configuration, the model's name, field paths.

The lowest module of the store: ``langmem_layer.store.embedding.default_embedder`` builds
its default configuration from it, and the core reads it, so neither imports the other.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, TypedDict

from langchain_core.embeddings import Embeddings
from langgraph.store.base import tokenize_path

from langmem_layer.errors import ConfigurationError, DatabaseUnavailableError
from langmem_layer.sanitize import excerpt, redact

__all__ = [
    "ANN_KINDS",
    "DISTANCE_TYPES",
    "VECTOR_TYPES",
    "AnnIndexConfig",
    "FieldPath",
    "HnswParams",
    "MemoryIndexConfig",
    "PoolConfig",
    "check_conninfo",
    "check_index_config",
    "check_ttl_config",
    "connect_error",
    "distance_type",
    "field_path",
    "hnsw_params",
    "model_name",
    "omit_expired",
    "pool_options",
    "rls_enabled",
    "rls_where_possible",
    "sweep_interval",
    "vector_type",
]

#: Distance metrics of a vector search, as LangGraph's ``PostgresIndexConfig`` names them.
DISTANCE_TYPES = ("cosine", "l2", "inner_product")
#: ANN index kinds: a large user's own HNSW graph (small users are scanned exactly).
ANN_KINDS = ("hnsw",)
#: Vector types of large users' HNSW indexes: single or half precision.
VECTOR_TYPES = ("vector", "halfvec")
#: pgvector's largest HNSW-indexable dimensions per vector type.
HNSW_MAX_DIMS = {"vector": 2000, "halfvec": 4000}
#: pgvector's bounds on HNSW parameters.
HNSW_M_RANGE = (2, 100)
HNSW_EF_CONSTRUCTION_RANGE = (4, 1000)

#: A field to embed: its name as given, and its path as ``get_text_at_path`` takes it.
FieldPath = tuple[str, list[str] | str]


class AnnIndexConfig(TypedDict, total=False):
    """The ANN index of a large user (LangGraph's ``ANNIndexConfig`` / ``HNSWConfig``).

    Attributes:
        kind: ``"hnsw"`` only: a large user gets an HNSW graph of their own
            (``index_large_users``); everyone else is searched exactly.
        vector_type: ``"vector"`` (default, single precision) or ``"halfvec"``: large
            users' HNSW indexes hold half-precision copies (half the index size, up to
            4,000 dims); vectors are stored, and small users scanned, at single
            precision either way.
        m: HNSW links per node (2..100, default 16).
        ef_construction: HNSW build candidate list (4..1000, at least ``2 * m``,
            default 64).
    """

    kind: Literal["hnsw"]
    vector_type: Literal["vector", "halfvec"]
    m: int
    ef_construction: int


class MemoryIndexConfig(TypedDict, total=False):
    """How the store embeds items.

    Attributes:
        embed: A LangChain ``Embeddings``, an embedding function, or a provider string
            such as ``"openai:text-embedding-3-small"``.
        dims: Vector size the model returns; checked on every call.
        fields: JSON paths of generic items to embed (default ``["$"]``, the whole
            value). Typed memories always embed their ``content``.
        model_id: Name recorded with each vector (defaults to the model's name).
        max_input_tokens: Texts are cut to this many tokens (cl100k_base) before
            embedding. Defaults to 8191 for OpenAI ``text-embedding-*`` models, 256 for
            all-MiniLM-L6-v2, no limit otherwise; ``None`` disables truncation.
        distance_type: How ``search`` scores a query against items, as in LangGraph:
            ``"cosine"`` (default, 1 - cosine distance), ``"l2"`` (minus the Euclidean
            distance) or ``"inner_product"`` (the dot product). Memory recall always
            ranks by cosine similarity, which its relevance floors are defined in.
        ann_index_config: Parameters of large users' HNSW indexes (``AnnIndexConfig``).
    """

    embed: Embeddings | Callable[..., Any] | str
    dims: int
    fields: list[str]
    model_id: str
    max_input_tokens: int | None
    distance_type: Literal["cosine", "l2", "inner_product"]
    ann_index_config: AnnIndexConfig


class PoolConfig(TypedDict, total=False):
    """Connection pool settings of ``from_conn_string`` (LangGraph's ``PoolConfig``).

    Attributes:
        min_size: Connections kept open (default 1).
        max_size: Most connections at once (default: ``min_size``).
        kwargs: Extra arguments of each connection (``autocommit`` is always on).
    """

    min_size: int
    max_size: int | None
    kwargs: dict[str, Any]


class HnswParams(NamedTuple):
    """HNSW build parameters of a large user's index."""

    m: int
    ef_construction: int


def _choice(what: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigurationError(
            f"{what}={value!r} is not supported; use one of {', '.join(map(repr, allowed))}."
        )


def _int_in(what: str, value: Any, bounds: tuple[int, int]) -> int:
    lo, hi = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigurationError(f"{what} must be an integer from {lo} to {hi}, got {value!r}.")
    return value


def check_index_config(index: Mapping[str, Any] | None) -> None:
    """Refuse index settings the store cannot honour, saying what it supports.

    Raises:
        ConfigurationError: An unknown ``distance_type``, or an ``ann_index_config``
            asking for another index kind, another vector type, unknown keys or
            HNSW parameters out of pgvector's bounds.
    """
    if not index:
        return
    _choice("index['distance_type']", index.get("distance_type", "cosine"), DISTANCE_TYPES)
    hnsw_params(index)
    dims, vtype = index.get("dims"), vector_type(index)
    if vtype == "halfvec" and isinstance(dims, int) and dims > HNSW_MAX_DIMS[vtype]:
        raise ConfigurationError(
            f"ann_index_config['vector_type']='halfvec' indexes at most "
            f"{HNSW_MAX_DIMS[vtype]} dims, got dims={dims}; use a smaller model or drop "
            "vector_type."
        )


def hnsw_params(index: Mapping[str, Any] | None) -> HnswParams:
    """The HNSW parameters of large users' indexes (validated; pgvector's defaults)."""
    ann = dict((index or {}).get("ann_index_config") or {})
    _choice("ann_index_config['kind']", ann.pop("kind", "hnsw"), ANN_KINDS)
    _choice("ann_index_config['vector_type']", ann.pop("vector_type", "vector"), VECTOR_TYPES)
    m = _int_in("ann_index_config['m']", ann.pop("m", 16), HNSW_M_RANGE)
    efc = _int_in("ann_index_config['ef_construction']", ann.pop("ef_construction", 64),
                  HNSW_EF_CONSTRUCTION_RANGE)
    if efc < 2 * m:
        raise ConfigurationError(
            f"ann_index_config['ef_construction'] ({efc}) must be at least 2 * m ({2 * m})."
        )
    if ann:
        raise ConfigurationError(
            f"ann_index_config keys {sorted(ann)} are not supported; an HNSW index takes "
            "'kind', 'vector_type', 'm' and 'ef_construction' ('nlist' is for ivfflat, "
            "which this store does not build)."
        )
    return HnswParams(m, efc)


def vector_type(index: Mapping[str, Any] | None) -> str:
    """The vector type of large users' HNSW indexes (``"vector"`` unless configured)."""
    ann = (index or {}).get("ann_index_config") or {}
    return str(ann.get("vector_type") or "vector")


def distance_type(index: Mapping[str, Any] | None) -> str:
    """The distance ``search`` scores with (``"cosine"`` unless configured)."""
    return str((index or {}).get("distance_type") or "cosine")


def check_ttl_config(ttl: Mapping[str, Any] | None) -> None:
    """Refuse TTL settings of the wrong type (every ``TTLConfig`` key is honoured).

    Raises:
        ConfigurationError: ``sweep_interval_minutes`` not a positive number, or
            ``omit_expired`` / ``refresh_on_read`` not a bool.
    """
    if not ttl:
        return
    _check_interval("ttl['sweep_interval_minutes']", ttl.get("sweep_interval_minutes"))
    for key in ("omit_expired", "refresh_on_read"):
        if key in ttl and not isinstance(ttl[key], bool):
            raise ConfigurationError(f"ttl[{key!r}] must be True or False, got {ttl[key]!r}.")


def _check_interval(where: str, interval: Any) -> None:
    if interval is not None and (
        isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0
    ):
        raise ConfigurationError(
            f"{where} must be a positive number of minutes or None, got {interval!r}."
        )


def sweep_interval(ttl: Mapping[str, Any] | None, minutes: float | None = None) -> float:
    """Minutes between TTL sweeps: ``minutes``, else the config's, else 5 (as LangGraph).

    Raises:
        ConfigurationError: ``minutes`` is not a positive number.
    """
    _check_interval("sweep_interval_minutes", minutes)
    return float(minutes or (ttl or {}).get("sweep_interval_minutes") or 5)


def omit_expired(ttl: Mapping[str, Any] | None) -> bool:
    """Whether reads hide expired items not swept yet.

    True unless ``omit_expired=False`` is given: expired memories must not resurface.
    LangGraph's PostgresStore defaults to False; pass it to get that behaviour.
    """
    return bool((ttl or {}).get("omit_expired", True))


def pool_options(
    pool_size: int | None,
    pool_config: PoolConfig | None,
    *,
    pipeline: bool = False,
    deserializer: Any = None,
) -> dict[str, Any] | None:
    """The connection pool ``from_conn_string`` opens, as pool keyword arguments, or
    ``None`` for one connection.

    Raises:
        ConfigurationError: Both ``pool_size`` and ``pool_config``; ``autocommit=False``
            in the pool's connection kwargs; ``pipeline=True`` or a ``deserializer``,
            which this store does not take (the message says what to use instead).
    """
    if pipeline:
        raise ConfigurationError(
            "pipeline=True is not supported: the store already sends each batch as one "
            "transaction. Drop pipeline, and pass pool_config={'max_size': n} for "
            "concurrent callers."
        )
    if deserializer is not None:
        raise ConfigurationError(
            "deserializer= is not supported: values are stored as JSONB and read back as "
            "dicts. Convert values after get()/search() instead."
        )
    if pool_size and pool_config is not None:
        raise ConfigurationError("Pass pool_size or pool_config, not both.")
    if pool_size:
        return {"min_size": 1, "max_size": pool_size, "kwargs": {"autocommit": True}}
    if pool_config is None:
        return None
    options: dict[str, Any] = dict(pool_config)
    extra = dict(options.pop("kwargs", None) or {})
    if extra.get("autocommit", True) is not True:
        raise ConfigurationError(
            "pool_config['kwargs']['autocommit'] must stay True: the store opens its own "
            "transactions."
        )
    options["kwargs"] = {**extra, "autocommit": True}
    options.setdefault("min_size", 1)
    if options.get("max_size") is None:
        options.pop("max_size", None)
    return options


def rls_enabled(rls: bool | None = None) -> bool:
    """Whether a store acts as the row-level-security role: ``rls``, else the
    ``LANGMEM_RLS`` environment variable (``0``, ``false``, ``off``, ``no`` turn it off),
    else on (where the database allows it: ``rls_where_possible``)."""
    if rls is not None:
        return rls
    return os.environ.get("LANGMEM_RLS", "").strip().lower() not in _OFF


def rls_where_possible(rls: bool | None = None) -> bool:
    """Whether a store acts as the row-level-security role only where the database
    allows it (``langmem_layer.sql.rls.bind``): when neither ``rls`` nor
    ``LANGMEM_RLS`` says. Asked for explicitly, the role is required, and a database
    without it fails the transaction rather than run unguarded."""
    return rls is None and not os.environ.get("LANGMEM_RLS", "").strip()


_OFF = ("0", "false", "off", "no")


def model_name(embed: Any) -> str:
    """The name an embedding model goes by (its ``model`` attribute or its class)."""
    for attr in ("model", "model_name", "model_id"):
        name = getattr(embed, attr, None)
        if isinstance(name, str) and name:
            return name
    return type(embed).__name__


def field_path(path: str) -> FieldPath:
    """A field to embed, as given and as ``get_text_at_path`` takes it."""
    # "$" (the whole value) must stay a string: tokenized, it matches nothing.
    return path, path if path == "$" else tokenize_path(path)


def check_conninfo(conn_string: Any) -> str:
    """``conn_string`` when it is a PostgreSQL connection string (a ``postgresql://``
    URI or libpq's ``key=value`` form) whose port, if any, is a number.

    Raises:
        ConfigurationError: It is not one (``not-a-url``, ``mysql://...``,
            ``postgres://u@host:notaport/db``), saying what one looks like. The message
            quotes the string with its password masked.
    """
    import psycopg.conninfo

    try:
        if not isinstance(conn_string, str) or not conn_string.strip():
            raise ValueError("empty")
        params = psycopg.conninfo.conninfo_to_dict(conn_string)
    except (psycopg.ProgrammingError, ValueError) as e:
        shown = redact(excerpt(conn_string, 200), conn_string if isinstance(conn_string, str)
                       else None)
        reason = redact(str(e).strip().splitlines()[0], conn_string) if str(e).strip() \
            else "empty"
        raise ConfigurationError(
            f"{shown} is not a PostgreSQL connection string ({reason}); use "
            "postgresql://USER:PASSWORD@HOST:PORT/DATABASE (or libpq's "
            "'host=... dbname=...').") from None
    ports = str(params.get("port") or "").split(",")
    if bad := [p for p in ports if p.strip() and not p.strip().isdigit()]:
        raise ConfigurationError(
            f"Invalid port {excerpt(bad[0], 20)} in the connection string "
            f"{redact(excerpt(conn_string, 200), conn_string)}: a port is a number, such "
            "as 5432 (postgresql://USER:PASSWORD@HOST:5432/DATABASE).")
    return conn_string


def connect_error(exc: BaseException, conn_string: str) -> DatabaseUnavailableError:
    """The error for a connection to ``conn_string`` that failed with ``exc``: its
    message with every password masked (libpq may quote part of the string)."""
    return DatabaseUnavailableError(
        f"Cannot connect to PostgreSQL: {redact(str(exc), conn_string)}")
