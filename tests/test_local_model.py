"""The real local embedding model (all-MiniLM-L6-v2 from the installed package), offline."""

from __future__ import annotations

import math

import pytest

from langmem_layer import MemoryLayer
from langmem_layer.store.embedding.models import LOCAL_DIMS, LocalEmbeddings, default_index
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


def test_bfloat16_vectors_agree_with_float32() -> None:
    # The two precisions must give vectors that can share one index: a memory written
    # at one precision is found by a query embedded at the other.
    texts = ["She is allergic to peanuts.", "Works as a nurse at the city hospital.",
             "Prefers window seats on long flights.", "What did we talk about last week?"]
    full = LocalEmbeddings(precision="float32").embed_documents(texts)
    half = LocalEmbeddings(precision="bfloat16").embed_documents(texts)
    for a, b in zip(full, half, strict=True):
        assert len(b) == LOCAL_DIMS
        assert abs(_cos(b, b) - 1.0) < 1e-5  # unit length after the float32 normalisation
        assert _cos(a, b) > 0.999
    assert full != half  # the bfloat16 model did run


def test_precision_auto_follows_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import langmem_layer.store.embedding.models as models

    monkeypatch.setattr(models, "native_bfloat16", lambda: True)
    assert models.resolve_precision("auto") == "bfloat16"
    assert models.resolve_precision("auto", device="cuda") == "float32"
    assert models.resolve_precision("float32") == "float32"
    monkeypatch.setattr(models, "native_bfloat16", lambda: False)
    assert models.resolve_precision("auto") == "float32"
    assert models.resolve_precision("bfloat16") == "bfloat16"
    monkeypatch.setenv(models.PRECISION_ENV, "float32")
    assert LocalEmbeddings().precision == "float32"
    assert LocalEmbeddings(precision="bfloat16").precision == "bfloat16"


def test_an_unknown_precision_says_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    from langmem_layer.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="auto, float32, bfloat16"):
        LocalEmbeddings(precision="fp8")  # type: ignore[arg-type]
    monkeypatch.setenv("LANGMEM_EMBEDDING_PRECISION", "half")
    with pytest.raises(ConfigurationError, match="LANGMEM_EMBEDDING_PRECISION"):
        LocalEmbeddings()


def test_building_the_embedder_does_not_import_torch() -> None:
    # The precision is resolved when the model loads: asking torch about the CPU imports
    # it, and constructing a store (default_index) must stay cheap.
    import subprocess
    import sys

    code = ("import sys; from langmem_layer.store.embedding.models import LocalEmbeddings, "
            "default_index; LocalEmbeddings(); default_index(); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}, check=False)
    assert done.returncode == 0, done.stderr[-500:]
