"""Vectors of the float32 torch all-MiniLM-L6-v2, recorded for the ONNX model's test.

    python -m tests.minilm_reference   # needs the local-torch extra (make test-torch)

writes ``tests/data/minilm-float32-reference.json.gz``: texts of the kinds memories
hold (LoCoMo turns of the test slice, facts, a text past the model's 256 word pieces,
non-Latin scripts, an empty string) and each one's unit vector from the torch model in
float32, the model the vectors already stored were embedded with.
``tests/store/test_local_model.py`` checks the default (ONNX, int8) model against them.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

DATA = Path(__file__).parent / "data"
REFERENCE = DATA / "minilm-float32-reference.json.gz"

EXTRA = [
    "",
    "She is allergic to peanuts.",
    "I prefer morning meetings.",
    "My sister Ana moved to Lisbon in March 2023 and works as a nurse.",
    "Never mention my divorce in front of the kids.",
    "Remind me to call the dentist next Tuesday at 9am.",
    "J'habite à Lyon depuis trois ans et je travaille chez Michelin.",
    "私は毎朝コーヒーを飲みます。",
    "Мой любимый писатель — Чехов.",
    "🙂 emoji-only turns still get a vector 🎉",
    " ".join(["The quarterly budget review covers every department's spending."] * 40),
]


def texts() -> list[str]:
    """The recorded texts: the test slice's turns, then ``EXTRA``."""
    slice_ = json.loads((DATA / "locomo-slice.json").read_text())
    turns = [t["text"] for sample in slice_ for key, session in sample["conversation"].items()
             if key.startswith("session_") and isinstance(session, list) for t in session]
    return turns + EXTRA


def main() -> None:
    from langmem_layer.store.embedding.default_embedder import LocalEmbeddings

    recorded = texts()
    vectors = LocalEmbeddings(precision="float32").embed_documents(recorded)
    rows = [{"text": t, "vector": [round(x, 6) for x in v]}
            for t, v in zip(recorded, vectors, strict=True)]
    REFERENCE.write_bytes(gzip.compress(json.dumps(rows).encode(), mtime=0))
    print(f"wrote {len(rows)} vectors to {REFERENCE}")


if __name__ == "__main__":
    main()
