"""Deprecated path of the embedding models and their resolution rule, kept for one
release: import them from ``langmem_layer.store.embedding.default_embedder``."""

import warnings

from langmem_layer.store.embedding.default_embedder import (
    LOCAL_DIMS,
    LOCAL_MODEL,
    OPENAI_DIMS,
    OPENAI_MODEL,
    PRECISION_ENV,
    LocalEmbeddings,
    Precision,
    default_index,
    native_bfloat16,
    openai_configured,
    resolve_precision,
)

__all__ = [
    "LOCAL_DIMS",
    "LOCAL_MODEL",
    "OPENAI_DIMS",
    "OPENAI_MODEL",
    "PRECISION_ENV",
    "LocalEmbeddings",
    "Precision",
    "default_index",
    "native_bfloat16",
    "openai_configured",
    "resolve_precision",
]

warnings.warn("langmem_layer.store.embedding.models is deprecated: import from "
              "langmem_layer.store.embedding.default_embedder", DeprecationWarning,
              stacklevel=2)
