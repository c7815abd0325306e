"""Write-path throughput: the rule extractor alone, and ingest end to end.

Prints messages/s of RuleExtractor (no I/O), then memories written/s of
`MemoryLayer.ingest` (recall of existing memories → extraction → gate → one-transaction
apply, on the embedded PostgreSQL) with embedding excluded (a hashed bag-of-words
embedder that costs microseconds) and included (the local all-MiniLM-L6-v2 model).
Medians of repeated runs; the machine is noisy.

    .venv/bin/python benchmarks/extraction_bench.py [--messages 2000] [--users 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
from common import Log, add_noise_option, header, scratch_dir
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage
from tqdm import tqdm
from workload import HashEmbedder

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.store.embedding.default_embedder import LocalEmbeddings

NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)

TEMPLATES = [
    "I prefer {thing} in the morning.",
    "I always {habit} before work.",
    "My name is {name}.",
    "I'm allergic to {food}.",
    "I don't like {thing}.",
    "I work at {company}.",
    "I live in {city}.",
    "Remind me to {task} tomorrow.",
    "I speak {language}.",
    "I'm usually free {when}.",
    "Actually, I work at {company} now.",
    "Please never mention {topic}.",
    "I have an interview on Friday.",
    "Forget about {topic}.",
    "Hi, how are you today?",
    "Can you summarise the report for me?",
    "That sounds good, thanks!",
]
FILL = {
    "thing": ["green tea", "jazz", "long meetings", "cold brew", "spreadsheets", "podcasts"],
    "habit": ["take the stairs", "read the news", "go for a run", "check my calendar"],
    "name": ["Dana", "Priya", "Tomás", "Mei", "Oluwaseun"],
    "food": ["peanuts", "shellfish", "gluten", "lactose"],
    "company": ["Acme Robotics", "Globex", "Initech", "Umbrella Labs"],
    "city": ["Lisbon", "Nairobi", "Osaka", "Toronto", "Berlin"],
    "task": ["call mom", "renew my passport", "book the dentist", "pay rent"],
    "language": ["Portuguese", "Swahili", "Japanese", "French"],
    "when": ["on Tuesday afternoons", "after 6pm", "on weekends"],
    "topic": ["my divorce", "the layoffs", "my old job", "the accident"],
}


def messages(n: int, seed: int = 7) -> list[str]:
    """A deterministic mix of memorable statements and small talk."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        template = rng.choice(TEMPLATES)
        out.append(template.format(**{k: rng.choice(v) for k, v in FILL.items()}))
    return out


class HashEmbeddings(Embeddings):
    """The store benchmark's hashed bag-of-words embedder as a LangChain Embeddings."""

    def __init__(self) -> None:
        self._embed = HashEmbedder()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self._embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def rule_throughput(texts: Sequence[str], runs: int) -> tuple[float, int]:
    """Median messages/s of RuleExtractor.extract, one message per call; ops proposed."""
    extractor = RuleExtractor()
    msgs = [HumanMessage(t, id=f"m{i}") for i, t in enumerate(texts)]
    rates, proposed = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        proposed = sum(len(extractor.extract([m], now=NOW)) for m in msgs)
        rates.append(len(msgs) / (time.perf_counter() - t0))
    return statistics.median(rates), proposed


def ingest_throughput(uri: str, texts: Sequence[str], users: int, embed: Embeddings,
                      dims: int, model_id: str, label: str, log: Log) -> tuple[float, float, int]:
    """Memories written/s and turns/s of MemoryLayer.ingest over fresh users."""
    index = {"embed": embed, "dims": dims, "model_id": model_id}
    with PostgresMemoryStore.from_conn_string(uri, index=index) as store:
        store.setup()
        with store.conn.cursor() as cur:
            cur.execute("TRUNCATE langmem_items, langmem_embeddings, langmem_context_vectors, "
                        "langmem_links, langmem_applied_ops, langmem_ingest_log, langmem_terms")
        layer = MemoryLayer(store, extraction="inline")
        written = 0
        t0 = time.perf_counter()
        for i, text in enumerate(tqdm(texts, desc=label, file=sys.stderr, leave=False)):
            result = layer.ingest(f"user{i % users:03d}", [HumanMessage(text, id=f"{label}{i}")],
                                  thread_id=f"t{i % users}", now=NOW + timedelta(seconds=i))
            written += len(result.written)
        elapsed = time.perf_counter() - t0
    log(f"{label}: {len(texts)} turns, {written} memories written in {elapsed:.1f}s")
    return written / elapsed, len(texts) / elapsed, written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2000, help="turns for the rule and "
                        "embedding-excluded runs (default 2000)")
    parser.add_argument("--model-messages", type=int, default=300,
                        help="turns for the run with the local model (default 300)")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5, help="repeats of the rule timing")
    parser.add_argument("--data-dir", default=None, help="embedded PostgreSQL data dir "
                        "(default: a fresh temporary directory)")
    add_noise_option(parser)
    args = parser.parse_args(argv)
    header("extraction_bench", allow_noisy=args.allow_noisy)
    log = Log()
    texts = messages(args.messages)
    rule_rate, proposed = rule_throughput(texts, args.runs)
    with scratch_dir(args.data_dir, "langmem-extraction-bench-") as data_dir:
        uri = embedded_uri(data_dir)
        fast = ingest_throughput(uri, texts, args.users, HashEmbeddings(), 384, "hash-384",
                                 "ingest-hash", log)
        local = LocalEmbeddings()
        local.embed_documents(["warm up"])  # model load is not ingest time
        model_texts = texts[: args.model_messages]
        slow = ingest_throughput(uri, model_texts, args.users, local, 384,
                                 "all-MiniLM-L6-v2", "ingest-minilm", log)
    print(f"extraction_bench  machine: 2 cores  users={args.users}  "
          f"numpy {np.__version__}")
    print(f"  {'stage':<44} {'rate':>12}  notes")
    print(f"  {'RuleExtractor.extract (no I/O)':<44} {rule_rate:>9.0f} m/s  "
          f"median of {args.runs} runs over {len(texts)} messages; {proposed} ops proposed")
    print(f"  {'ingest, embedding excluded (hash-384)':<44} {fast[0]:>9.1f} w/s  "
          f"{fast[1]:.1f} turns/s; {fast[2]} memories from {len(texts)} turns")
    print(f"  {'ingest, embedding included (MiniLM, CPU)':<44} {slow[0]:>9.1f} w/s  "
          f"{slow[1]:.1f} turns/s; {slow[2]} memories from {len(model_texts)} turns")
    print("  m/s = messages per second; w/s = memories written per second. Ingest = recall of "
          "existing memories, extraction, gate (with a similarity probe per proposal) and "
          "the one-transaction apply, inline.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
