"""Embedding models: the offline default and the resolution rule.

With ``OPENAI_API_KEY`` (or ``OPENAI_BASE_URL``) set, memories are embedded with
OpenAI ``text-embedding-3-small`` (1536 dimensions). Otherwise the local
all-MiniLM-L6-v2 model (384 dimensions) embeds them, fully offline, in one of two
runtimes:

- **ONNX Runtime, int8 weights** (``precision="int8"``, the ``local`` extra, the
  default): no torch, a model that loads in a fraction of a second
  (``langmem_layer.store.embedding.minilm_onnx``);
- **torch, float32 or bfloat16** (the ``local-torch`` extra): the reference the
  int8 model is checked against (``langmem_layer.store.embedding.minilm_torch``).

All three precisions give vectors of one model that share an index (cosine ≥ 0.99
per text), so the model id is ``all-MiniLM-L6-v2`` whichever runs.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Literal, get_args

from langchain_core.embeddings import Embeddings

from langmem_layer.errors import ConfigurationError
from langmem_layer.store.embedding import minilm_onnx
from langmem_layer.store.embedding.minilm_torch import native_bfloat16
from langmem_layer.store.options import MemoryIndexConfig

__all__ = [
    "PRECISION_ENV",
    "LocalEmbeddings",
    "Precision",
    "default_index",
    "native_bfloat16",
    "openai_configured",
    "resolve_precision",
]

logger = logging.getLogger("langmem_layer.store")

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMS = 384
OPENAI_MODEL = "text-embedding-3-small"
OPENAI_DIMS = 1536

#: The precisions of the local model: ``int8`` runs on ONNX Runtime, ``float32`` and
#: ``bfloat16`` on torch; ``auto`` picks int8 when ONNX Runtime and its weights are
#: installed, else the torch precision the CPU computes fastest.
Precision = Literal["auto", "int8", "float32", "bfloat16"]
PRECISION_ENV = "LANGMEM_EMBEDDING_PRECISION"


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 on the CPU, loaded from the installed packages on first use.

    Loading happens on the first call, not at construction: building a graph or a
    store never pays for it. Vectors are L2-normalised float32.

    Args:
        batch_size: Texts per forward pass. The texts are sorted by length and each pass
            is padded to its longest, so small passes waste less on padding: 16 embeds a
            job's few dozen syntheses ~15 % faster than 64.
        device: Torch device for the torch precisions; ``"cpu"`` by default. ONNX
            Runtime always runs on the CPU.
        precision: ``"int8"`` (ONNX Runtime, the ``local`` extra), ``"float32"`` or
            ``"bfloat16"`` (torch, the ``local-torch`` extra), or ``"auto"`` (the
            default, also read from ``LANGMEM_EMBEDDING_PRECISION``): int8 when its
            packages are installed and the device is the CPU, else bfloat16 on a CPU
            with native bfloat16 arithmetic, else float32.
        threads: Intra-op threads of the int8 model's ONNX Runtime session (``None``:
            one per physical core). The torch precisions follow torch's process-wide
            setting (``torch.set_num_threads``).

    Raises:
        ConfigurationError: ``precision`` is not one of the four; on first use, the
            packages of the chosen runtime are not installed.
    """

    model = LOCAL_MODEL
    dims = LOCAL_DIMS

    def __init__(self, *, batch_size: int = 16, device: str = "cpu",
                 precision: Precision | None = None, threads: int | None = None) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self.device = device
        self.precision: Precision = _checked(precision or os.environ.get(PRECISION_ENV, "auto"))
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model now (a server does before it reports ready); the first
        embedding would otherwise load it."""
        self._load()

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (a server is ready only once it is)."""
        return self._model is not None

    def describe(self) -> str:
        """What embeds, for a benchmark's or a log's header, e.g.
        ``all-MiniLM-L6-v2 int8 on onnxruntime 1.32.0 (threads: default)``."""
        from importlib.metadata import PackageNotFoundError, version

        precision = resolve_precision(self.precision, device=self.device)
        runtime = "onnxruntime" if precision == "int8" else "torch"
        try:
            release = version(runtime)
        except PackageNotFoundError:
            release = "not installed"
        threads = self.threads if precision == "int8" else "torch's setting"
        return (f"{LOCAL_MODEL} {precision} on {runtime} {release} "
                f"(threads: {threads or 'default'})")

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # Resolved here, not at construction: asking torch about the CPU
                # imports it, and building a store must not pay for that.
                precision = resolve_precision(self.precision, device=self.device)
                logger.info("loading the embedding model %s (%s)…", LOCAL_MODEL, precision)
                if precision == "int8":
                    self._model = minilm_onnx.shared(self.threads)
                else:
                    from langmem_layer.store.embedding import minilm_torch

                    self._model = minilm_torch.shared(self.device, precision)
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents; returns one 384-dimensional unit vector per text."""
        if not texts:
            return []
        return self._load().embed(list(texts), batch_size=self.batch_size)  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query the same way as a document (the model is symmetric)."""
        return self._load().embed_one(text)  # type: ignore[no-any-return]


def _checked(precision: str) -> Precision:
    if precision not in get_args(Precision):
        raise ConfigurationError(
            f"embedding precision must be one of {', '.join(get_args(Precision))} "
            f"(argument or {PRECISION_ENV}), got {precision!r}")
    return precision  # type: ignore[return-value]


def resolve_precision(precision: Precision, *, device: str = "cpu") -> str:
    """The precision the local model runs in: ``"int8"``, ``"float32"`` or ``"bfloat16"``.

    Args:
        precision: One of ``Precision``.
        device: The torch device; ``auto`` takes int8 (ONNX Runtime, CPU only) when
            installed, else bfloat16 only on a CPU that has it.

    Raises:
        ConfigurationError: An unknown precision.
    """
    if _checked(precision) != "auto":
        return precision
    if device == "cpu" and minilm_onnx.available():
        return "int8"
    return "bfloat16" if device == "cpu" and native_bfloat16() else "float32"


def openai_configured() -> bool:
    """Whether an OpenAI (or OpenAI-compatible) endpoint is configured."""
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def default_index() -> MemoryIndexConfig:
    """The embedding configuration used when none is given."""
    if openai_configured():
        from langchain_openai import OpenAIEmbeddings

        return {
            "embed": OpenAIEmbeddings(model=OPENAI_MODEL),
            "dims": OPENAI_DIMS,
            "model_id": OPENAI_MODEL,
        }
    return {"embed": LocalEmbeddings(), "dims": LOCAL_DIMS, "model_id": LOCAL_MODEL}
