"""Run evaluation fixtures through the whole pipeline and measure what happened.

Three phases per fixture, each on the fixture's own user ids in the
store it is given, which are deleted afterwards:

1. **Extraction & retrieval.** Seed memories, turns (ingested inline: extractor, gate,
   apply) and maintenance jobs run in time order. Then: extraction precision (memories
   created that some ``extract`` spec describes) and recall (specs some memory
   satisfies), hit@3 of the ``retrieve`` probes, and the checks (``rejected``, ``state``)
   and surfacing violations (``absent`` probes that surface, ``unspeakable`` memories in
   a speakable section of the block).
2. **Cross-user isolation.** Every ``retrieve`` query asked as a user with no memories
   must return nothing; every ``isolation`` probe must not show its memory. Any miss is
   a leak.
3. **Duplicates on re-run.** The turns are ingested again (new message ids, same
   times) over the memories of phase 1: every extra active memory is a duplicate.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langmem_layer.evals.fixtures import Fixture, JobStep, MemorySpec, Probe, SeedMemory, Turn
from langmem_layer.extract.extractor import Extractor
from langmem_layer.read.block import SPEAKABLE_SECTIONS
from langmem_layer.types import Recalled
from langmem_layer.write.apply import IngestResult

__all__ = ["EvalReport", "FixtureResult", "run_fixture", "run_fixtures"]

_TOP = 3


@dataclass
class FixtureResult:
    """The measures of one fixture.

    Attributes:
        name: The fixture's name.
        covers: What it is about.
        created: Memories the conversation created (phase 1).
        correct: Of those, how many an ``extract`` spec describes.
        expected: ``extract`` specs.
        found: Specs some memory satisfies (kind, content and status).
        queries: ``retrieve`` probes; ``hits``: those with the memory in the top 3.
        checks: ``rejected`` and ``state`` expectations; ``passed``: those met.
        duplicates: Extra active memories after the re-run (None: not re-run).
        leaks: Memories shown to a user (or profile) that must never see them.
        surfacing: Memories shown where they must not be (``absent``, ``unspeakable``).
        failures: One line per unmet expectation.
    """

    name: str
    covers: str
    created: int = 0
    correct: int = 0
    expected: int = 0
    found: int = 0
    queries: int = 0
    hits: int = 0
    checks: int = 0
    passed: int = 0
    duplicates: int | None = None
    leaks: int = 0
    surfacing: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        """Extraction precision; None when nothing was created."""
        return self.correct / self.created if self.created else None

    @property
    def recall(self) -> float | None:
        """Extraction recall; None when nothing was expected."""
        return self.found / self.expected if self.expected else None

    @property
    def hit3(self) -> float | None:
        """Retrieval hit@3; None without retrieval probes."""
        return self.hits / self.queries if self.queries else None

    @property
    def ok(self) -> bool:
        """Whether every expectation of the fixture was met."""
        return not self.failures

    def fail(self, message: str) -> None:
        self.failures.append(message)


@dataclass
class EvalReport:
    """Every fixture's result and the totals (micro-averaged over fixtures).

    Attributes:
        results: One per fixture, in run order.
        extractor: Which extractor ran (``rules`` or the model's name).
    """

    results: list[FixtureResult]
    extractor: str

    def _sum(self, name: str) -> int:
        return sum(getattr(r, name) or 0 for r in self.results)

    @property
    def precision(self) -> float | None:
        """Correct memories over memories created, over all fixtures."""
        created = self._sum("created")
        return self._sum("correct") / created if created else None

    @property
    def recall(self) -> float | None:
        """Expected memories found over memories expected."""
        expected = self._sum("expected")
        return self._sum("found") / expected if expected else None

    @property
    def hit3(self) -> float | None:
        """Retrieval probes with a hit in the top 3, over all probes."""
        queries = self._sum("queries")
        return self._sum("hits") / queries if queries else None

    @property
    def checks(self) -> float | None:
        """Share of the rejection and state checks met."""
        checks = self._sum("checks")
        return self._sum("passed") / checks if checks else None

    @property
    def duplicates(self) -> int:
        return self._sum("duplicates")

    @property
    def leaks(self) -> int:
        return self._sum("leaks")

    @property
    def surfacing(self) -> int:
        return self._sum("surfacing")

    @property
    def passed(self) -> int:
        """Fixtures with every expectation met."""
        return sum(r.ok for r in self.results)


class _Run:
    """One fixture's run: user ids, the layer and what phase 1 recorded."""

    def __init__(self, layer: Any, fixture: Fixture, prefix: str) -> None:
        self.layer = layer
        self.fixture = fixture
        self.prefix = prefix
        self.ingests: list[IngestResult] = []
        self.seeded: dict[str, str] = {}  # seed id -> memory key
        self.profiles = sorted({p for p in [*(t.profile for t in fixture.turns),
                                            *(s.profile for s in fixture.seed),
                                            *(p.profile for p in _probes(fixture))] if p},
                               key=str)

    def uid(self, alias: str) -> str:
        return f"{self.prefix}{alias}"

    def memories(self, alias: str, statuses: Sequence[str] | None = None) -> list[Recalled]:
        """The user's memories in every profile the fixture uses (any status by default)."""
        out: dict[str, Recalled] = {}
        for profile in [None, *self.profiles]:
            for item in self.layer.list(self.uid(alias), profile=profile, statuses=statuses,
                                        limit=1000):
                out.setdefault(item.key, item)
        return list(out.values())

    def matches(self, spec: MemorySpec, item: Recalled) -> bool:
        if spec.seed is not None:
            return self.seeded.get(spec.seed) == item.key
        text = " ".join([item.record.content, item.record.object or ""]).lower()
        return ((spec.kind is None or item.record.kind == spec.kind)
                and all(c.lower() in text for c in spec.contains)
                and not any(x.lower() in text for x in spec.excludes))


def _probes(fixture: Fixture) -> Iterator[Probe]:
    e = fixture.expect
    yield from (*e.retrieve, *e.absent, *e.unspeakable, *e.isolation)


def _messages(turn: Turn, salt: str) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [HumanMessage(turn.text, id=f"{salt}-h")]
    if turn.reply:
        msgs.append(AIMessage(turn.reply, id=f"{salt}-a"))
    return msgs


def _events(fixture: Fixture) -> list[tuple[datetime, int, SeedMemory | Turn | JobStep]]:
    events: list[tuple[datetime, int, SeedMemory | Turn | JobStep]] = []
    events += [(s.at, 0, s) for s in fixture.seed]
    events += [(t.at, 1, t) for t in fixture.turns]
    events += [(j.at, 2, j) for j in fixture.jobs]
    return sorted(events, key=lambda e: (e[0], e[1]))


def _play(run: _Run) -> None:
    from langmem_layer.jobs import JOBS, JobContext

    layer = run.layer
    for n, (_, _, event) in enumerate(_events(run.fixture)):
        if isinstance(event, SeedMemory):
            item = layer.remember(
                run.uid(event.user), event.content, kind=event.kind, policy=event.policy,
                profile=event.profile, due_at=event.due, salience=event.salience,
                pinned=event.pinned, now=event.at)
            run.seeded[event.id] = item.key
        elif isinstance(event, Turn):
            run.ingests.append(layer.ingest(
                run.uid(event.user), _messages(event, f"{run.prefix}{n}"),
                thread_id=event.thread, profile=event.profile, agent_id=event.agent,
                now=event.at))
        else:
            job = JOBS[event.job]
            ctx = JobContext(layer.store, settings=layer.settings, layer=layer)
            if job.per_user:
                job.function(ctx, run.uid(event.user), now=event.at)
            else:
                job.run(ctx, now=event.at)


def _recall(run: _Run, probe: Probe, limit: int = _TOP) -> list[Recalled]:
    # The retrieval the agent's block is filled from, which hit@3 measures.
    return list(run.layer.recall(run.uid(probe.user), probe.query, profile=probe.profile,
                                 limit=limit, now=probe.at, matching=False))


def _extraction(run: _Run, result: FixtureResult) -> None:
    fx = run.fixture
    seeded = set(run.seeded.values())
    every = {alias: run.memories(alias) for alias in fx.users}
    created = [m for items in every.values() for m in items if m.key not in seeded]
    result.created = len(created)
    for item in created:
        if any(run.matches(s, item) for s in fx.expect.extract):
            result.correct += 1
        else:
            result.fail(f"unexpected memory ({item.record.kind.value}): {item.record.content}")
    result.expected = len(fx.expect.extract)
    for spec in fx.expect.extract:
        status = spec.status or "active"
        if any(run.matches(spec, m) and m.record.status == status
               for m in every.get(spec.user or fx.users[0], [])):
            result.found += 1
        else:
            result.fail(f"not extracted: {spec.describe()} ({status})")


def _checks(run: _Run, result: FixtureResult) -> None:
    fx = run.fixture
    for spec in fx.expect.rejected:
        result.checks += 1
        rejected = [d.proposed for i in run.ingests for d in i.decisions if not d.accepted]
        if any(all(c.lower() in (op.content or op.target_hint or "").lower()
                   for c in spec.contains) for op in rejected):
            result.passed += 1
        else:
            result.fail(f"gate did not reject: {spec.describe()}")
    for spec in fx.expect.state:
        result.checks += 1
        items = [m for m in run.memories(spec.user or fx.users[0]) if run.matches(spec, m)]
        ok = any((spec.status is None or m.record.status == spec.status)
                 and (spec.loop is None or m.record.loop_status == spec.loop) for m in items)
        if ok:
            result.passed += 1
        else:
            seen = ", ".join(f"{m.record.status.value}/{m.record.loop_status or '-'}"
                             for m in items) or "no such memory"
            result.fail(f"state of {spec.describe()}: want {spec.status or '-'}"
                        f"/{spec.loop or '-'}, got {seen}")


def _retrieval(run: _Run, result: FixtureResult) -> None:
    fx = run.fixture
    for probe in fx.expect.retrieve:
        result.queries += 1
        top = _recall(run, probe)
        if any(run.matches(probe.memory, m) for m in top):
            result.hits += 1
        else:
            got = "; ".join(m.record.content for m in top) or "nothing"
            result.fail(f"miss@3 {probe.query!r} -> want {probe.memory.describe()}, got {got}")
    for probe in fx.expect.absent:
        if any(run.matches(probe.memory, m) for m in _recall(run, probe)):
            result.surfacing += 1
            result.fail(f"surfaced {probe.memory.describe()} for {probe.query!r}")
    for probe in fx.expect.unspeakable:
        uid = run.uid(probe.user)
        spoken: list[str] = []
        if probe.recently_spoken:  # the turn before showed it: it must not be spoken again
            first = run.layer.context_block(uid, probe.query, profile=probe.profile,
                                            now=probe.at)
            spoken = [k for k, s in first.placements.items() if s in SPEAKABLE_SECTIONS]
        block = run.layer.context_block(uid, probe.query, profile=probe.profile, now=probe.at,
                                        recently_spoken=spoken)
        mine = {m.key: m for m in run.memories(probe.user)}
        for key, section in block.placements.items():
            item = mine.get(key)
            if section in SPEAKABLE_SECTIONS and item and run.matches(probe.memory, item):
                result.surfacing += 1
                result.fail(f"{probe.memory.describe()} in speakable {section!r} "
                            f"for {probe.query!r}")


def _isolation(run: _Run, result: FixtureResult) -> None:
    fx = run.fixture
    stranger = f"stranger-{uuid.uuid4().hex[:6]}"
    for probe in fx.expect.retrieve:
        uid = run.uid(stranger)
        found = run.layer.recall(uid, probe.query, profile=probe.profile, limit=10,
                                 now=probe.at, matching=False)
        block = run.layer.context_block(uid, probe.query, profile=probe.profile, now=probe.at)
        if found or block.placements:
            result.leaks += 1
            result.fail(f"leak: a user without memories was shown something for "
                        f"{probe.query!r}")
    for probe in fx.expect.isolation:
        found = _recall(run, probe, limit=10)
        block = run.layer.context_block(run.uid(probe.user), probe.query, profile=probe.profile,
                                        now=probe.at)
        shown = any(run.matches(probe.memory, m) for m in found) or (
            bool(probe.memory.contains)
            and all(c.lower() in block.text.lower() for c in probe.memory.contains))
        if shown:
            result.leaks += 1
            result.fail(f"leak: {probe.memory.describe()} shown to {probe.user}"
                        f"{'/' + probe.profile if probe.profile else ''} for {probe.query!r}")


def _rerun(run: _Run, result: FixtureResult) -> None:
    fx = run.fixture
    before = {a: {m.key for m in run.memories(a, ("active",))} for a in fx.users}
    for n, turn in enumerate(fx.turns):
        run.layer.ingest(run.uid(turn.user), _messages(turn, f"{run.prefix}rerun{n}"),
                         thread_id=turn.thread, profile=turn.profile, agent_id=turn.agent,
                         now=turn.at)
    result.duplicates = 0
    for alias in fx.users:
        after = run.memories(alias, ("active",))
        extra = len(after) - len(before[alias])
        if extra > 0:
            result.duplicates += extra
            new = "; ".join(m.record.content for m in after if m.key not in before[alias])
            result.fail(f"re-run added {extra} active memories: {new}")


def run_fixture(layer: Any, fixture: Fixture, *, prefix: str | None = None,
                keep: bool = False) -> FixtureResult:
    """Run one fixture's three phases on ``layer`` (which must extract inline).

    Args:
        layer: A ``MemoryLayer`` with ``extraction="inline"``.
        fixture: The fixture.
        prefix: User ids are ``prefix + alias``; default: a fresh ``eval-<hex>-<name>-``.
        keep: Leave the users' data in the store (default: deleted afterwards).
    """
    prefix = prefix or f"eval-{uuid.uuid4().hex[:8]}-{fixture.name}-"
    run = _Run(layer, fixture, prefix)
    result = FixtureResult(fixture.name, fixture.covers)
    try:
        _play(run)
        _extraction(run, result)
        _checks(run, result)
        _retrieval(run, result)
        _isolation(run, result)
        if fixture.rerun:
            _rerun(run, result)
    finally:
        if not keep:
            for alias in [*fixture.users, *(p.user for p in _probes(fixture))]:
                layer.delete_user(run.uid(alias))
    return result


def run_fixtures(store: Any, fixtures: Sequence[Fixture], *,
                 extractor: Extractor | None = None, settings: Any = None,
                 label: str | None = None, progress: bool = False) -> EvalReport:
    """Run every fixture on ``store``, each with a layer of its own (its agents' trust).

    Args:
        store: An open ``PostgresMemoryStore`` with an embedding index.
        fixtures: What to run (``load_fixtures``).
        extractor: Default: the offline ``RuleExtractor``.
        settings: The layer's ``MemorySettings`` (default: defaults).
        label: How the report names the extractor (default: its class name, or ``rules``).
        progress: Show a progress bar on standard error (when it is a terminal).
    """
    from tqdm import tqdm

    from langmem_layer.extract.rules import RuleExtractor
    from langmem_layer.facade import MemoryLayer

    extractor = extractor or RuleExtractor()
    run_id = uuid.uuid4().hex[:8]
    results = []
    for fixture in tqdm(fixtures, desc="fixtures", unit="fixture", leave=False,
                        disable=None if progress else True):
        # Inline extraction never starts the worker, so there is nothing to close.
        layer = MemoryLayer(store, extractor=extractor, settings=settings, extraction="inline",
                            trust=fixture.trust)
        results.append(run_fixture(layer, fixture, prefix=f"eval-{run_id}-{fixture.name}-"))
    name = label or ("rules" if isinstance(extractor, RuleExtractor)
                     else type(extractor).__name__)
    return EvalReport(results, name)
