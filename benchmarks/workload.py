"""The benchmarks' shared workload: synthetic memory sentences from templates and a
vocabulary (fixed seed), a fast deterministic embedder, the real local model, and the
cache every store under test shares so that embedding cost neither dominates nor
differs between them."""

from __future__ import annotations

import itertools
import random
import re
import string
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.store.base import PutOp
from tqdm import tqdm

from langmem_layer import Kind, Layer, MemoryRecord

__all__ = ["BIG", "DIMS", "NOW", "TEMPLATES", "VOCAB", "CachedEmbeddings", "HashEmbedder",
           "MiniLMEmbedder", "TextGen", "embed_all", "load", "owner", "record"]

DIMS = 384


# --------------------------------------------------------------------------------------
# Synthetic memories: sentences from templates and a vocabulary, with a fixed seed.
# --------------------------------------------------------------------------------------

def _words(text: str) -> list[str]:
    return text.split()


VOCAB: dict[str, list[str]] = {
    "name": _words(
        "Alice Bob Carla Dmitri Elena Farid Grace Hiro Ines Jonas Keiko Luis Maya Nikhil "
        "Olga Pedro Quinn Rosa Sven Tara Umar Vera Wei Ximena Yusuf Zoe Amara Bruno Chen "
        "Daria Emil Fatima Goran Hana Ivan Julia Kofi Lena Marco Nadia"
    ),
    "topic": [
        "budget review", "quarterly planning", "hiring pipeline", "product roadmap",
        "security audit", "customer churn", "data migration", "cloud costs", "onboarding",
        "release schedule", "marketing launch", "vendor contracts", "sales forecast",
        "api redesign", "performance tuning", "incident postmortem", "team offsite",
        "compliance training", "pricing strategy", "mobile app", "search ranking",
        "database upgrade", "design system", "analytics dashboard", "support backlog",
        "partner integration", "tax filing", "office move", "brand refresh", "user research",
        "accessibility fixes", "billing errors", "latency spikes", "code review",
        "test coverage", "model evaluation", "on-call rotation", "travel policy",
        "benefits enrollment", "annual report",
    ],
    "time": [
        "morning", "early morning", "late morning", "afternoon", "late afternoon",
        "evening", "lunchtime", "short",
    ],
    "day": _words("Monday Tuesday Wednesday Thursday Friday Saturday Sunday"),
    "month": _words(
        "January February March April May June July August September October November "
        "December"
    ),
    "city": _words(
        "Lisbon Berlin Tokyo Nairobi Toronto Madrid Oslo Seoul Lima Dublin Prague Austin "
        "Denver Mumbai Cairo Sydney Vienna Zurich Milan Warsaw Helsinki Boston Chicago "
        "Bogota Jakarta Manila Lagos Athens Porto Krakow"
    ),
    "tool": [
        "Python", "PostgreSQL", "Excel", "Figma", "Jira", "Slack", "Notion", "Rust",
        "Kubernetes", "Tableau", "Go", "TypeScript", "Terraform", "Airflow", "dbt", "Spark",
        "Docker", "Grafana", "Linear", "Miro", "Zoom", "VS Code", "Vim", "Emacs", "Snowflake",
    ],
    "food": [
        "sushi", "peanuts", "spicy curry", "olives", "mushrooms", "cilantro", "dark chocolate",
        "oat milk", "espresso", "green tea", "shellfish", "gluten", "blue cheese", "tofu",
        "ramen", "tacos", "falafel", "pho", "croissants", "kimchi", "lentil soup",
        "grilled salmon", "strawberries", "pineapple pizza", "black licorice",
    ],
    "doc": [
        "slides", "spreadsheet", "summary", "proposal", "contract draft", "meeting notes",
        "budget sheet", "design doc", "roadmap deck", "invoice", "status update", "checklist",
        "agenda", "survey results", "benchmark numbers",
    ],
    "project": _words(
        "Apollo Borealis Cedar Delta Ember Falcon Granite Harbor Iris Juniper Kestrel Lumen "
        "Meridian Nimbus Orion Pioneer Quartz Redwood Summit Tundra"
    ),
    "team": [
        "platform", "data", "design", "finance", "legal", "growth", "infra", "mobile",
        "security", "research", "sales", "support", "marketing", "ops", "QA",
    ],
    "hobby": [
        "bouldering", "trail running", "chess", "sourdough baking", "birdwatching",
        "sailing", "pottery", "cycling", "jazz piano", "gardening", "photography", "yoga",
        "board games", "kayaking", "woodworking", "salsa dancing", "swimming", "knitting",
        "astronomy", "fly fishing",
    ],
}

TEMPLATES = [
    "{name} prefers {time} meetings about {topic}",
    "{name} asked for the {doc} on {topic} by {day}",
    "{name} is planning a trip to {city} in {month}",
    "{name} uses {tool} and {tool2} for {topic}",
    "The {project} deadline moved to {day} after the {topic} discussion",
    "{name} dislikes {food} but loves {food2}",
    "{name} promised to send the {doc} about {topic} to {name2}",
    "{name} works on {project} with the {team} team and reports to {name2}",
    "The {city} office is closed on {day} because of the {topic} workshop",
    "Follow up with {name} about {topic} before the {month} {doc} review",
    "{name} wants {topic} updates every {day} {time} in {tool}",
    "{name} enjoys {hobby} on weekends and {hobby2} during holidays",
    "Remind {name} that the {project} {doc} needs sign-off from {team}",
    "{name} moved from the {team} team to {project} in {month}",
    "{name} said the {topic} numbers look wrong in {tool}",
    "{name} is allergic to {food} so avoid it at the {team} lunch",
]

_FIELDS = [
    [f for _, f, _, _ in string.Formatter().parse(t) if f] for t in TEMPLATES
]


class TextGen:
    """Deterministic generator of short, realistic memory sentences."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def sentence(self) -> str:
        i = self.rng.randrange(len(TEMPLATES))
        slots = {f: self.rng.choice(VOCAB[f.rstrip("0123456789")]) for f in _FIELDS[i]}
        return TEMPLATES[i].format(**slots)

    def unique(self, n: int, exclude: set[str] | frozenset[str] = frozenset()) -> list[str]:
        """``n`` distinct sentences, none of them in ``exclude``."""
        out: list[str] = []
        seen: set[str] = set()
        while len(out) < n:
            s = self.sentence()
            if s not in seen and s not in exclude:
                seen.add(s)
                out.append(s)
        return out


# --------------------------------------------------------------------------------------
# Embeddings: a fast deterministic embedder, the real local model, and the shared cache.
# --------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(_words(
    "a an the i me my you your is are was were am be to of in on at for and or it that this "
    "what do does did about with by so but from every after before"
))


class HashEmbedder:
    """Random projection of a hashed bag of words (+ bigrams), L2-normalised.

    Each feature gets a fixed Gaussian vector seeded by its CRC32, so the result is
    deterministic across runs and machines; texts sharing words get high cosine.
    """

    name = f"hash-{DIMS}"

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims
        self._features: dict[str, np.ndarray] = {}

    def _feature(self, feat: str) -> np.ndarray:
        v = self._features.get(feat)
        if v is None:
            rng = np.random.default_rng(zlib.crc32(feat.encode()))
            v = rng.standard_normal(self.dims).astype(np.float32)
            self._features[feat] = v
        return v

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            words = [w for w in _WORD.findall(text.lower()) if w not in _STOP] or ["<empty>"]
            row = out[i]
            for w in words:
                row += self._feature(w)
            for a, b in itertools.pairwise(words):
                row += 0.5 * self._feature(f"{a} {b}")
            row /= np.linalg.norm(row) or 1.0
        return out


class MiniLMEmbedder:
    """The local all-MiniLM-L6-v2 model
    (langmem_layer.store.embedding.default_embedder.LocalEmbeddings)."""

    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        from langmem_layer.store.embedding.default_embedder import LocalEmbeddings

        self.model = LocalEmbeddings(batch_size=64)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.model.embed_documents(list(texts)), dtype=np.float32)


class CachedEmbeddings(Embeddings):
    """LangChain ``Embeddings`` backed by a dict text -> vector; computes on a miss.

    Shared by every store, so both pay exactly the same (tiny) embedding cost.
    """

    def __init__(
        self, cache: dict[str, np.ndarray], compute: Callable[[Sequence[str]], np.ndarray],
        model: str,
    ) -> None:
        self.cache = cache
        self.compute = compute
        self.model = model
        self.hits = 0
        self.misses = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            self.cache.update(zip(missing, self.compute(missing), strict=True))
            self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        return [self.cache[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def embed_all(compute: Callable[[Sequence[str]], np.ndarray], texts: list[str],
              desc: str, batch: int) -> np.ndarray:
    out = np.empty((len(texts), DIMS), dtype=np.float32)
    with tqdm(total=len(texts), desc=desc, unit="text", file=sys.stderr, disable=None,
              leave=False) as bar:
        for i in range(0, len(texts), batch):
            out[i : i + batch] = compute(texts[i : i + batch])
            bar.update(len(texts[i : i + batch]))
    return out


# -- the read path's data: one large user among small ones ---------------------------

BIG = "big-user"
NOW = datetime(2026, 11, 18, tzinfo=UTC)


def record(text: str) -> dict:
    return MemoryRecord(content=text, kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                        occurred_at=NOW, last_accessed_at=NOW).to_value()


def owner(i: int, big: int, small_size: int) -> str:
    return BIG if i < big else f"user{(i - big) // small_size:05d}"


def load(store: object, texts: list[str], big: int, small_size: int, chunk: int,
         label: str) -> float:
    """Put every memory; returns items/s inside store.batch."""
    spent = 0.0
    for lo in tqdm(range(0, len(texts), chunk), desc=f"load {label}", file=sys.stderr,
                   leave=False):
        ops = [PutOp(("memories", owner(i, big, small_size), "work"), f"m{i}", record(texts[i]))
               for i in range(lo, min(len(texts), lo + chunk))]
        t0 = time.perf_counter()
        store.batch(ops)  # type: ignore[attr-defined]
        spent += time.perf_counter() - t0
    return len(texts) / spent
