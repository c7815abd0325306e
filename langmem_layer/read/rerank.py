"""The reranking stage: a small learned ranker over the signals recall already computes.

Ranking fuses the strategies' lists (``langmem_layer.read.rank``); the reranker then
reorders the first ``rerank_depth`` ranked memories by a linear model (logistic
regression; its probability, over the best one's, replaces the fused relevance in the
composite, whose other terms weigh as before) over what was found of each: its fused
relevance and place, its cosine, each strategy's rank, whether the link walk brought it,
whether its subject is one the question names, and four temporal signals.
Nothing is read from the database and no model runs: a few multiplications per
candidate.

The temporal signals fix what the fusion cannot see. A question asking *when*
("When did Evan go skiing?", "How long did ...") is answered by the turn that dates
the event, and a turn dates an event against its own date: "yesterday", "last week",
"two years ago". A question naming a period ("in October 2023") is answered by the turn
whose *named* period falls in it ("Yesterday I met artists in Boston", said on the 4th,
is about the 3rd), not by whatever else was said near then.

The weights ship with the package (``reranker.json``); ``benchmarks/locomo_rerank.py``
reproduces them: trained on LoCoMo's dev conversations, chosen by leave one
conversation out (docs: retrieval). ``rerank_model`` names another weights file;
``rerank_depth`` 0 turns the stage off.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from langmem_layer.errors import ConfigurationError
from langmem_layer.sql.dating import dates_something
from langmem_layer.types import to_utc

__all__ = [
    "FEATURES",
    "RerankItem",
    "RerankQuery",
    "Reranker",
    "asks_when",
    "features",
    "load_reranker",
    "names_time",
    "probability",
]

#: The model's inputs, in order (a weights file names them; a different list is refused).
FEATURES = ("relevance", "position", "similarity", "vector", "keyword", "ref", "time",
            "link", "subject", "other_subject", "asks_when", "names_time",
            "when_names_time", "in_window")

# A question asking for a date or a duration.
_WHEN = re.compile(r"^\W*(?:when\b|how\s+long\b|how\s+many\s+(?:days|weeks|months|years)\b|"
                   r"(?:in\s+)?(?:which|what)\s+(?:year|month|day|date|week)\b)", re.I)
_SHIPPED = "reranker.json"


def asks_when(text: str | None) -> bool:
    """Whether ``text`` asks for a date or a duration ("When did ...", "How long ...")."""
    return bool(text and _WHEN.search(text))


def names_time(text: str) -> bool:
    """Whether ``text`` dates something ("yesterday", "last week", "in May 2023"): the
    phrases the time strategy ranks by (``langmem_layer.sql.dating``)."""
    return dates_something(text)


@dataclass(frozen=True, slots=True)
class RerankQuery:
    """What the reranker reads of the question.

    Attributes:
        asks_when: It asks for a date or a duration.
        window: The period it names, not widened (``None``: none).
        names: The references it names (normalised): the subjects it may ask about.
    """

    asks_when: bool
    window: tuple[datetime, datetime] | None
    names: frozenset[str]


@dataclass(frozen=True, slots=True)
class RerankItem:
    """What the reranker reads of one ranked memory (all computed by ranking)."""

    key: str
    ranks: Mapping[str, int]
    similarity: float | None
    relevance: float
    subject: str | None
    content: str
    occurred_at: datetime


@lru_cache(maxsize=4096)
def _named_period(text: str, when: datetime) -> tuple[datetime, datetime] | None:
    from langmem_layer.read.query import time_window

    found = time_window(text, when, slack_days=0.0)
    return None if found is None else (found.start, found.end)


def _in_window(item: RerankItem, window: tuple[datetime, datetime], dated: bool) -> bool:
    """The period the memory names (against its own date; ``dated``: its text dates
    something), else its date, overlaps ``window``."""
    occurred = to_utc(item.occurred_at)
    period = _named_period(item.content, occurred) if dated else None
    lo, hi = period if period else (occurred, occurred + timedelta(seconds=1))
    return lo < window[1] and hi > window[0]


def features(items: Sequence[RerankItem], query: RerankQuery) -> list[list[float]]:
    """Each item's inputs, in ``FEATURES`` order; ``items`` best first."""
    named = not query.names.isdisjoint(i.subject for i in items if i.subject)
    when = 1.0 if query.asks_when or query.window is not None else 0.0
    rows = []
    for n, item in enumerate(items):
        r = item.ranks
        dated = names_time(item.content)
        mine = named and item.subject in query.names
        rows.append([
            item.relevance, 1.0 / (1 + n), item.similarity or 0.0,
            *(1.0 / (1 + r[s]) if s in r else 0.0 for s in ("vector", "keyword", "ref",
                                                            "time")),
            1.0 if "link" in r else 0.0,
            1.0 if mine else 0.0,
            1.0 if named and item.subject and not mine else 0.0,
            when, float(dated), when * dated,
            1.0 if query.window is not None and _in_window(item, query.window, dated) else 0.0,
        ])
    return rows


@dataclass(frozen=True, slots=True)
class Reranker:
    """A linear model over ``FEATURES``: ``bias + Σ weight × (x − mean) / scale``."""

    weights: tuple[float, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    bias: float

    @classmethod
    def from_json(cls, data: Any, origin: str = "weights") -> Reranker:
        """Read a weights object (``{"features", "weights", "mean", "scale", "bias"}``).

        Raises:
            ConfigurationError: It is not one, or names other features than ``FEATURES``.
        """
        try:
            if list(data["features"]) != list(FEATURES):
                raise ConfigurationError(
                    f"reranker {origin} is for features {list(data['features'])}, this "
                    f"version computes {list(FEATURES)}; retrain it "
                    "(benchmarks/locomo_rerank.py)")
            vectors = [tuple(float(x) for x in data[n]) for n in ("weights", "mean", "scale")]
            bias = float(data["bias"])
        except ConfigurationError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"reranker {origin} is not a weights object "
                                     f"(features, weights, mean, scale, bias): {exc}") from exc
        if any(len(v) != len(FEATURES) for v in vectors) or not all(
                math.isfinite(x) for v in vectors for x in v) or not math.isfinite(bias) \
                or any(s <= 0 for s in vectors[2]):
            raise ConfigurationError(f"reranker {origin}: weights, mean and scale need "
                                     f"{len(FEATURES)} finite numbers each (scale > 0)")
        return cls(vectors[0], vectors[1], vectors[2], bias)

    def score(self, rows: Sequence[Sequence[float]]) -> list[float]:
        """Each row's score (a log-odds that it answers the question)."""
        return [self.bias + sum(w * (x - m) / s for w, x, m, s
                                in zip(self.weights, row, self.mean, self.scale, strict=True))
                for row in rows]


@lru_cache(maxsize=8)
def load_reranker(path: str | None = None) -> Reranker:
    """The reranker of weights file ``path`` (``None``: the one the package ships).

    Raises:
        ConfigurationError: The file is missing, unreadable or not a weights object.
    """
    origin = path or f"langmem_layer/read/{_SHIPPED}"
    try:
        text = (Path(path).read_text(encoding="utf-8") if path else
                resources.files("langmem_layer.read").joinpath(_SHIPPED).read_text("utf-8"))
        data = json.loads(text)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the reranker's weights {origin}: {exc} "
                                 "(set rerank_depth=0 to rank without it)") from exc
    return Reranker.from_json(data, origin)


def probability(score: float) -> float:
    """The probability a reranker score (log-odds) stands for, without overflow."""
    if score >= 0:
        return 1.0 / (1.0 + math.exp(-score))
    e = math.exp(score)
    return e / (1.0 + e)
