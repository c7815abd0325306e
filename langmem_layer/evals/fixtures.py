"""Evaluation fixtures: scripted conversations and the behaviour expected of them, as data.

A fixture file (YAML or JSON) holds one fixture or a list of them. A fixture is::

    name: correction-updates          # unique over the whole set
    covers: a correction that updates # what it is about, for the report
    users: [u, v]                     # user aliases (default: the users its turns name)
    trust: {coach: 0.9}               # optional per-agent trust
    rerun: true                       # phase 2 (re-run for duplicates); default true
    seed:                             # memories written directly before the turns
      - {id: loop, content: Needs to call their mom., kind: open_loop,
         policy: continue, due: "2026-11-05T18:00", at: "2026-11-01T09:00"}
    turns:                            # in order; ``at`` is ISO 8601 (UTC if no zone)
      - {at: "2026-11-02T10:00", user: u, thread: t1, profile: work, agent: coach,
         text: "I work at Acme."}
    jobs:                             # maintenance jobs run after the turns
      - {job: lifecycle, at: "2027-03-01T03:00", user: u}
    expect:
      extract:    [{kind: profile_fact, contains: [Acme], status: active}]
      retrieve:   [{query: Where do I work?, hit: {contains: [Acme]}}]
      absent:     [{query: coffee shop, miss: {contains: [Vermelho]}}]
      rejected:   [{contains: [Acme]}]
      unspeakable: [{query: how are you?, memory: {contains: [ex]}}]
      state:      [{memory: {seed: loop}, status: active, loop: closed}]
      isolation:  [{user: v, query: Where does Dana work?, never: {contains: [Acme]}}]

A memory spec (``hit``, ``miss``, ``memory``, ``never``, items of ``extract``) matches
a memory whose content holds every string of ``contains`` (case-insensitive), none of
``excludes``, and whose ``kind`` is the given one when given; ``{seed: id}`` names a
seeded memory. Optional keys everywhere: ``user`` (default: the first user),
``profile``, ``at`` (default: just after the last turn or job).

An empty ``expect.extract`` with ``negative: true`` means the conversation must extract
nothing at all (questions, hypotheticals, other people's facts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from langmem_layer.errors import ConfigurationError
from langmem_layer.types import Kind, LoopStatus, Policy, Status

__all__ = [
    "Expectations",
    "Fixture",
    "JobStep",
    "MemorySpec",
    "Probe",
    "SeedMemory",
    "Turn",
    "builtin_fixture_paths",
    "load_fixtures",
]

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class MemorySpec:
    """Which memory an expectation is about (see the module docstring)."""

    contains: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    kind: Kind | None = None
    seed: str | None = None
    status: Status | None = None
    loop: LoopStatus | None = None
    user: str | None = None

    def describe(self) -> str:
        """A short label for reports."""
        if self.seed:
            return f"seed:{self.seed}"
        label = "+".join(self.contains) or "*"
        return f"{self.kind.value}:{label}" if self.kind else label


@dataclass(frozen=True)
class SeedMemory:
    """A memory written with ``remember`` before the conversation."""

    id: str
    user: str
    content: str
    kind: Kind
    policy: Policy
    at: datetime
    profile: str | None = None
    due: datetime | None = None
    salience: float = 0.5
    pinned: bool = False


@dataclass(frozen=True)
class Turn:
    """One user message (optionally followed by the assistant's reply)."""

    user: str
    text: str
    at: datetime
    thread: str | None = None
    profile: str | None = None
    agent: str | None = None
    reply: str | None = None


@dataclass(frozen=True)
class JobStep:
    """A maintenance job run for one user at a simulated time."""

    job: str
    user: str
    at: datetime


@dataclass(frozen=True)
class Probe:
    """A query asked of the memory after the conversation, and what it must (not) show."""

    query: str
    user: str
    at: datetime
    memory: MemorySpec
    profile: str | None = None
    recently_spoken: bool = False


@dataclass(frozen=True)
class Expectations:
    """What the conversation must lead to."""

    extract: tuple[MemorySpec, ...] = ()
    negative: bool = False
    retrieve: tuple[Probe, ...] = ()
    absent: tuple[Probe, ...] = ()
    rejected: tuple[MemorySpec, ...] = ()
    unspeakable: tuple[Probe, ...] = ()
    state: tuple[MemorySpec, ...] = ()
    isolation: tuple[Probe, ...] = ()


@dataclass(frozen=True)
class Fixture:
    """One scripted conversation and its expectations."""

    name: str
    covers: str
    users: tuple[str, ...]
    turns: tuple[Turn, ...]
    expect: Expectations
    seed: tuple[SeedMemory, ...] = ()
    jobs: tuple[JobStep, ...] = ()
    trust: Mapping[str, float] = field(default_factory=dict)
    rerun: bool = True
    source: str = ""

    @property
    def end(self) -> datetime:
        """One minute after the last turn, job or seed: when probes run by default."""
        times = [t.at for t in self.turns] + [j.at for j in self.jobs] + [s.at for s in self.seed]
        return max(times) + timedelta(minutes=1)


def builtin_fixture_paths() -> list[Path]:
    """The fixture files shipped with the package, sorted by name."""
    root = resources.files("langmem_layer.evals") / "fixtures"
    return sorted(Path(str(p)) for p in root.iterdir() if str(p).endswith(_SUFFIXES))


def load_fixtures(paths: Iterable[str | Path] = ()) -> list[Fixture]:
    """Read fixtures from files and directories (default: the shipped set).

    Args:
        paths: Fixture files, or directories whose ``*.yaml``/``*.yml``/``*.json`` files
            are read; empty means ``builtin_fixture_paths``.

    Raises:
        ConfigurationError: A path that does not exist, a file that does not parse,
            a fixture that misses a required key or repeats another's name; the message
            names the file and the fixture.
    """
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in _SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            raise ConfigurationError(f"No fixture file or directory at {path}: pass a "
                                     "YAML/JSON fixture file or a directory of them.")
    fixtures: list[Fixture] = []
    seen: set[str] = set()
    for path in files or builtin_fixture_paths():
        for i, data in enumerate(_read(path)):
            where = f"{path.name}[{i}]"
            try:
                fixture = _fixture(data, str(path))
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                name = data.get("name", where) if isinstance(data, dict) else where
                raise ConfigurationError(f"Fixture {name} in {path}: {type(e).__name__}: {e}; "
                                         "see langmem_layer.evals.fixtures for the format."
                                         ) from e
            if fixture.name in seen:
                raise ConfigurationError(f"Fixture name {fixture.name!r} in {path} is used "
                                         "twice: give each fixture its own name.")
            seen.add(fixture.name)
            fixtures.append(fixture)
    return fixtures


def _read(path: Path) -> list[Any]:
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as e:  # yaml's and json's own error types: report either one
        raise ConfigurationError(f"{path} does not parse: {e}") from e
    return data if isinstance(data, list) else [data]


def _time(value: Any) -> datetime:
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _strs(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (str(value),) if isinstance(value, str) else tuple(str(v) for v in value)


def _spec(data: Mapping[str, Any] | None, default_user: str) -> MemorySpec:
    data = data or {}
    unknown = set(data) - {"contains", "excludes", "kind", "seed", "status", "loop", "user"}
    if unknown:
        raise KeyError(f"unknown memory spec keys {sorted(unknown)}")
    return MemorySpec(
        contains=_strs(data.get("contains")), excludes=_strs(data.get("excludes")),
        kind=Kind(data["kind"]) if data.get("kind") else None, seed=data.get("seed"),
        status=Status(data["status"]) if data.get("status") else None,
        loop=LoopStatus(data["loop"]) if data.get("loop") else None,
        user=data.get("user", default_user))


def _probe(data: Mapping[str, Any], key: str, user: str, end: datetime) -> Probe:
    who = data.get("user", user)
    return Probe(query=str(data["query"]), user=who,
                 at=_time(data["at"]) if data.get("at") else end,
                 memory=_spec(data[key], user), profile=data.get("profile"),
                 recently_spoken=bool(data.get("recently_spoken", False)))


def _fixture(data: Mapping[str, Any], source: str) -> Fixture:
    turns = tuple(Turn(user=str(t.get("user", "u")), text=str(t["text"]), at=_time(t["at"]),
                       thread=t.get("thread"), profile=t.get("profile"), agent=t.get("agent"),
                       reply=t.get("reply")) for t in data.get("turns") or ())
    users = _strs(data.get("users")) or tuple(dict.fromkeys(t.user for t in turns)) or ("u",)
    first = users[0]
    seed = tuple(SeedMemory(
        id=str(s["id"]), user=str(s.get("user", first)), content=str(s["content"]),
        kind=Kind(s.get("kind", "profile_fact")), policy=Policy(s.get("policy", "speak")),
        at=_time(s["at"]), profile=s.get("profile"),
        due=_time(s["due"]) if s.get("due") else None,
        salience=float(s.get("salience", 0.5)), pinned=bool(s.get("pinned", False)))
        for s in data.get("seed") or ())
    jobs = tuple(JobStep(job=str(j["job"]), user=str(j.get("user", first)), at=_time(j["at"]))
                 for j in data.get("jobs") or ())
    if not turns and not seed:
        raise ValueError("a fixture needs turns or seed memories")
    draft = Fixture(name=str(data["name"]), covers=str(data.get("covers", "")), users=users,
                    turns=turns, expect=Expectations(), seed=seed, jobs=jobs)
    end = draft.end
    e = data.get("expect") or {}
    unknown = set(e) - {"extract", "negative", "retrieve", "absent", "rejected", "unspeakable",
                        "state", "isolation"}
    if unknown:
        raise KeyError(f"unknown expect keys {sorted(unknown)}")
    expect = Expectations(
        extract=tuple(_spec(s, first) for s in e.get("extract") or ()),
        negative=bool(e.get("negative", False)),
        retrieve=tuple(_probe(p, "hit", first, end) for p in e.get("retrieve") or ()),
        absent=tuple(_probe(p, "miss", first, end) for p in e.get("absent") or ()),
        rejected=tuple(_spec(s, first) for s in e.get("rejected") or ()),
        unspeakable=tuple(_probe(p, "memory", first, end) for p in e.get("unspeakable") or ()),
        state=tuple(replace(_spec(s.get("memory"), first),
                            status=Status(s["status"]) if s.get("status") else None,
                            loop=LoopStatus(s["loop"]) if s.get("loop") else None)
                    for s in e.get("state") or ()),
        isolation=tuple(_probe(p, "never", first, end) for p in e.get("isolation") or ()),
    )
    return Fixture(name=draft.name, covers=draft.covers, users=users, turns=turns,
                   expect=expect, seed=seed, jobs=jobs, trust=dict(data.get("trust") or {}),
                   rerun=bool(data.get("rerun", True)), source=source)
