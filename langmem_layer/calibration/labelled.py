"""Labelled queries: memories written through the public API, questions with a score.

Two formats are read: LoCoMo (a JSON list of samples with ``conversation`` and ``qa``;
see ``../shared/data/README.md``) and the evaluation fixtures' retrieval expectations
(``langmem_layer.evals.fixtures``: ``expect.retrieve`` probes). Either is split by
conversation (LoCoMo sample / fixture) into a calibration part and a held-out part, so a
profile is never tuned on the questions it is reported on.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from langmem_layer.errors import ConfigurationError
from langmem_layer.types import Kind, Layer, Recalled

__all__ = ["CATEGORIES", "LabelledQuery", "LabelledSet", "LocomoConversation", "LocomoQuestion",
           "LocomoTurn", "Measure", "is_locomo", "load_labelled", "measure", "read_locomo",
           "split_units"]

#: LoCoMo's answerable question categories.
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SPLITS = ("all", "calib", "heldout")
_EVIDENCE = re.compile(r"^D\d+:\d+$")
_SCOPE = "work"


@dataclass(frozen=True)
class LabelledQuery:
    """A question and how to score what recall returned for it.

    Attributes:
        user: The (prefixed) user asked.
        text: The question.
        now: When it is asked.
        score: ``(top-k recalled, k) -> [0, 1]`` (evidence recall, or hit).
        profile: The profile searched (None: the default).
        category: LoCoMo's category (None for fixtures).
        sessions: The threads (LoCoMo's sessions) holding the evidence, for the
            session-level recall_any@5.
    """

    user: str
    text: str
    now: datetime
    score: Callable[[Sequence[str], int], float]
    profile: str | None = None
    category: int | None = None
    sessions: frozenset[str] = frozenset()


@dataclass
class LabelledSet:
    """Memories written and the queries asked of them (``users`` are deleted after)."""

    name: str
    queries: list[LabelledQuery]
    users: list[str]
    labels: dict[str, str] = field(default_factory=dict)
    turns: int = 0
    texts: dict[str, list[str]] = field(default_factory=dict)  # each user's memory texts

    def cleanup(self, layer: Any) -> None:
        """Delete every user the set wrote."""
        for user in self.users:
            layer.delete_user(user)


@dataclass
class Measure:
    """Per-query scores at one k and the seconds each recall took."""

    k: int
    scores: list[float] = field(default_factory=list)
    categories: list[int | None] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores) if self.scores else float("nan")

    def by_category(self) -> dict[int, float]:
        out: dict[int, list[float]] = {}
        for s, c in zip(self.scores, self.categories, strict=True):
            if c is not None:
                out.setdefault(c, []).append(s)
        return {c: sum(v) / len(v) for c, v in sorted(out.items())}

    def percentile_ms(self, q: float) -> float:
        if not self.seconds:
            return float("nan")
        s = sorted(self.seconds)
        return 1000 * s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def progress(total: int, desc: str, enabled: bool = True) -> Any:
    """A progress bar on standard error (tqdm), or a no-op."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="it", file=sys.stderr, disable=not enabled,
                leave=False, mininterval=1)


def measure(layer: Any, queries: Sequence[LabelledQuery], k: int, *, desc: str = "recall",
            show: bool = True) -> Measure:
    """Ask every query with ``layer.recall(limit=max(k, 20))``; score its top k."""
    out = Measure(k)
    with progress(len(queries), desc, show) as bar:
        for q in queries:
            t0 = time.perf_counter()
            # The retrieval the block is filled from (what the settings tune).
            found: list[Recalled] = layer.recall(q.user, q.text, profile=q.profile,
                                                 limit=max(k, 20), now=q.now, matching=False)
            out.seconds.append(time.perf_counter() - t0)
            keys = [r.key for r in found if not r.record.pinned]
            out.scores.append(q.score(keys, k))
            out.categories.append(q.category)
            bar.update()
    return out


def split_units(units: Sequence[str], split: str, calib: Sequence[str] | None = None
                ) -> list[str]:
    """The conversations (LoCoMo samples, fixtures) of a split, in file order.

    The calibration part is ``calib`` when given, else the first two fifths of the units
    (at least one): LoCoMo's five conversations give two to calibrate on and three to
    report on — the larger part is the one the figures come from.
    """
    if split not in SPLITS:
        raise ConfigurationError(f"split {split!r}: use one of {', '.join(SPLITS)}")
    if calib:
        unknown = sorted(set(calib) - set(units))
        if unknown:
            raise ConfigurationError(f"--calib names {unknown}, not in the file; "
                                     f"its conversations are {list(units)}")
        first = set(calib)
    else:
        first = set(units[:max(1, (2 * len(units)) // 5)])
    if split == "all":
        return list(units)
    return [u for u in units if (u in first) == (split == "calib")]


def is_locomo(path: Path) -> bool:
    """Whether ``path`` is a LoCoMo JSON file (a list of samples with ``qa``)."""
    if path.suffix.lower() != ".json":
        return False
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) \
        and "qa" in data[0] and "conversation" in data[0]


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    """One turn of a LoCoMo conversation.

    Attributes:
        dia_id: Its id (``D<session>:<n>``), what questions cite as evidence.
        session: Its session, from 1.
        index: Its place in the session, from 0.
        speaker: Who says it.
        text: ``speaker: text``, with ``[shares <caption>]`` for a shared image.
        when: Its session's date and time (UTC).
    """

    dia_id: str
    session: int
    index: int
    speaker: str
    text: str
    when: datetime


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """An answerable question (categories 1-4) with the turns that answer it."""

    sample_id: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    """One LoCoMo sample: its turns, its answerable questions, and when they are asked.

    Attributes:
        sample_id: The sample's id (``conv-26``).
        turns: Every turn read, session by session.
        questions: The questions of categories 1-4 with evidence among ``turns``.
        asked_at: One day after the last session read (None: no session).
        dropped: Evidence ids of those categories that are malformed or name no turn
            read (a question left with none is not in ``questions``).
    """

    sample_id: str
    turns: tuple[LocomoTurn, ...]
    questions: tuple[LocomoQuestion, ...]
    asked_at: datetime | None
    dropped: int


def _session_time(raw: str) -> datetime:
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def _turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}".strip()
    caption = (turn.get("blip_caption") or "").strip()
    return f"{text} [shares {caption}]" if caption else text


def read_locomo(path: Path, units: Sequence[str] | None = None, *,
                sessions: int | None = None) -> list[LocomoConversation]:
    """The conversations of a LoCoMo file: ``units`` (sample ids) in that order, else all
    in file order; ``sessions`` keeps only the first N sessions of each (and the questions
    whose evidence lies in them)."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    by_id = {s["sample_id"]: s for s in samples}
    out: list[LocomoConversation] = []
    for unit in (units if units is not None else list(by_id)):
        sample = by_id[unit]
        conv = sample["conversation"]
        turns: list[LocomoTurn] = []
        n, last = 1, None
        while f"session_{n}" in conv and (sessions is None or n <= sessions):
            when = _session_time(conv[f"session_{n}_date_time"])
            last = when if last is None or when > last else last
            turns += [LocomoTurn(t["dia_id"], n, i, t["speaker"], _turn_text(t), when)
                      for i, t in enumerate(conv[f"session_{n}"])]
            n += 1
        ids = {t.dia_id for t in turns}
        questions: list[LocomoQuestion] = []
        dropped = 0
        for qa in sample["qa"] if last is not None else ():
            if qa.get("category") not in CATEGORIES:
                continue
            evidence = qa.get("evidence") or []
            ev = frozenset(e.strip() for e in evidence
                           if isinstance(e, str) and _EVIDENCE.match(e.strip())
                           and e.strip() in ids)
            dropped += len(evidence) - sum(
                1 for e in evidence if isinstance(e, str) and e.strip() in ev)
            if ev:
                questions.append(LocomoQuestion(unit, qa["question"], qa["category"], ev))
        out.append(LocomoConversation(
            unit, tuple(turns), tuple(questions),
            None if last is None else last + timedelta(days=1), dropped))
    return out


def locomo_units(path: Path) -> list[str]:
    """The sample ids of a LoCoMo file, in file order."""
    return [s["sample_id"] for s in json.loads(path.read_text(encoding="utf-8"))]


def load_locomo(layer: Any, path: Path, units: Sequence[str], *, prefix: str,
                sessions: int | None = None, show: bool = True, write: bool = True,
                subjects: bool = True) -> LabelledSet:
    """Write the turns of ``units`` as memories; the questions of categories 1-4.

    Every turn is one episodic memory of its conversation's user (``prefix + sample_id``)
    written with ``layer.remember(..., thread_id=<session>, now=<session time>)``; its
    references are those the write path extracts, its subject the turn's speaker
    (``subjects=False``: none, as a deployment whose messages carry no names gets). A
    question is asked one day after its conversation's last session; evidence ids that
    are malformed or name no turn are dropped, and a question left with none is skipped
    (``read_locomo``).
    ``sessions`` keeps only the first N sessions of each conversation (and the questions
    whose evidence lies in them).
    ``write=False`` writes nothing and only reads the questions, for turns an earlier
    call wrote under the same prefix (the scores then cannot map keys to turns: for
    timing, not for scoring).
    """
    from langmem_layer.refs import extract_refs

    convs = read_locomo(path, units, sessions=sessions)
    users = [prefix + c.sample_id for c in convs]
    turns = [(prefix + c.sample_id, t) for c in convs for t in c.turns]
    labels: dict[str, str] = {}
    with progress(len(turns) if write else 0, "write turns", show) as bar:
        for user, t in turns:
            if write:
                item = layer.remember(user, t.text, profile=_SCOPE, kind=Kind.EPISODIC_EVENT,
                                      layer=Layer.EPISODIC, confidence=0.8, salience=0.5,
                                      refs=extract_refs(t.text),
                                      subject=t.speaker if subjects else None,
                                      thread_id=f"session-{t.session}", now=t.when)
                labels[item.key] = t.dia_id
                bar.update()
    # Recall returns memory keys; the evidence is dia ids.
    queries = [LabelledQuery(prefix + q.sample_id, q.text, c.asked_at,
                             _keyed(_evidence_score(q.evidence), labels), category=q.category,
                             sessions=frozenset(_session(e) for e in q.evidence))
               for c in convs if c.asked_at is not None for q in c.questions]
    texts: dict[str, list[str]] = {}
    for user, t in turns:
        texts.setdefault(user, []).append(t.text)
    return LabelledSet(path.name, queries, users, labels, turns=len(turns), texts=texts)


def _session(dia_id: str) -> str:
    """The thread a turn was written to: ``D3:5`` -> ``session-3``."""
    return f"session-{dia_id.split(':', 1)[0].removeprefix('D')}"


def _evidence_score(evidence: frozenset[str]) -> Callable[[Sequence[str], int], float]:
    def score(labels: Sequence[str], k: int) -> float:
        return len(evidence & set(labels[:k])) / len(evidence)
    return score


def _keyed(score: Callable[[Sequence[str], int], float], labels: dict[str, str]
           ) -> Callable[[Sequence[str], int], float]:
    def by_key(keys: Sequence[str], k: int) -> float:
        return score([labels.get(key, key) for key in keys], k)
    return by_key


def fixture_units(paths: Sequence[Path]) -> list[str]:
    """The names of the fixtures in ``paths`` that have retrieval expectations."""
    from langmem_layer.evals.fixtures import load_fixtures

    return [f.name for f in load_fixtures(list(paths)) if f.expect.retrieve]


def load_fixture_queries(layer: Any, paths: Sequence[Path], units: Sequence[str], *,
                         prefix: str, show: bool = True) -> LabelledSet:
    """Play the fixtures named ``units`` (turns through the layer's extractor, seeds,
    jobs); their ``retrieve`` probes are the queries, scored 1 when a top-k memory
    matches the probe's memory."""
    from langmem_layer.evals.fixtures import load_fixtures
    from langmem_layer.evals.play import _play, _Run

    wanted = set(units)
    fixtures = [f for f in load_fixtures(list(paths)) if f.name in wanted]
    queries: list[LabelledQuery] = []
    users: list[str] = []
    with progress(len(fixtures), "play fixtures", show) as bar:
        for fx in fixtures:
            run = _Run(layer, fx, f"{prefix}{fx.name}-")
            _play(run)
            users += [run.uid(a) for a in fx.users]
            for probe in fx.expect.retrieve:
                matching = {m.key for m in run.memories(probe.user)
                            if run.matches(probe.memory, m)}
                queries.append(LabelledQuery(run.uid(probe.user), probe.query, probe.at,
                                             _hit_score(frozenset(matching)),
                                             profile=probe.profile))
            bar.update()
    return LabelledSet(", ".join(str(p) for p in paths), queries, users)


def _hit_score(keys: frozenset[str]) -> Callable[[Sequence[str], int], float]:
    def score(found: Sequence[str], k: int) -> float:
        return 1.0 if keys & set(found[:k]) else 0.0
    return score


def load_labelled(layer: Any, paths: Sequence[Path], split: str,
                  calib: Sequence[str] | None = None, *, show: bool = True) -> LabelledSet:
    """The labelled set of a split of ``paths`` (one LoCoMo file, or fixture files)."""
    prefix = f"calib-{uuid.uuid4().hex[:8]}-"
    if len(paths) == 1 and is_locomo(paths[0]):
        units = split_units(locomo_units(paths[0]), split, calib)
        return load_locomo(layer, paths[0], units, prefix=prefix, show=show)
    units = split_units(fixture_units(paths), split, calib)
    return load_fixture_queries(layer, paths, units, prefix=prefix, show=show)
