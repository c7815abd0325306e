"""The torch build of the local model (the ``local-torch`` extra), run by
``make test-torch``; ``make test`` does not install torch."""

from __future__ import annotations

import gzip
import json
import math

from langmem_layer.store.embedding.default_embedder import LOCAL_DIMS, LocalEmbeddings
from tests.minilm_reference import REFERENCE


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_float32_gives_the_recorded_vectors() -> None:
    # The reference the int8 model is checked against is still what float32 gives.
    rows = json.loads(gzip.decompress(REFERENCE.read_bytes()))
    vectors = LocalEmbeddings(precision="float32").embed_documents([r["text"] for r in rows])
    assert min(_cos(r["vector"], v) for r, v in zip(rows, vectors, strict=True)) > 0.99999


def test_bfloat16_vectors_agree_with_float32() -> None:
    # The precisions must give vectors that can share one index: a memory written at
    # one precision is found by a query embedded at another.
    texts = ["She is allergic to peanuts.", "Works as a nurse at the city hospital.",
             "Prefers window seats on long flights.", "What did we talk about last week?"]
    full = LocalEmbeddings(precision="float32").embed_documents(texts)
    half = LocalEmbeddings(precision="bfloat16").embed_documents(texts)
    for a, b in zip(full, half, strict=True):
        assert len(b) == LOCAL_DIMS
        assert abs(_cos(b, b) - 1.0) < 1e-5  # unit length after the float32 normalisation
        assert _cos(a, b) > 0.999
    assert full != half  # the bfloat16 model did run
    query = LocalEmbeddings(precision="float32").embed_query(texts[0])
    assert _cos(query, full[0]) > 0.99999
