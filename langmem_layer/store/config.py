"""How a store embeds items: the index configuration, the model's name, field paths.

The lowest module of the store: :mod:`langmem_layer.embeddings` builds its default
configuration from it, and the core reads it, so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from langchain_core.embeddings import Embeddings
from langgraph.store.base import tokenize_path

__all__ = ["FieldPath", "MemoryIndexConfig", "field_path", "model_name"]

#: A field to embed: its name as given, and its path as ``get_text_at_path`` takes it.
FieldPath = tuple[str, list[str] | str]


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
    """

    embed: Embeddings | Callable[..., Any] | str
    dims: int
    fields: list[str]
    model_id: str
    max_input_tokens: int | None


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
