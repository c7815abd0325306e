"""What the reflection jobs share: the synthesizer of a run, one user's evidence read in
set-based statements, the privacy filter, writing a synthesized record, the decision log.

Privacy through synthesis: a job reads only the user's own active memories (every
statement binds the user), never an ``avoid`` memory, and drops every statement a
boundary covers (it names one of the boundary's references, or its vector is within
``AVOID_SIMILARITY`` of the boundary's) before anything is synthesized; an answer that
still names a boundary's reference is withheld. A synthesized record later covered by a
new boundary, or whose evidence is forgotten or contradicted, is rewritten from what
remains or retired.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph.store.base import PutOp

from langmem_layer.jobs.registry import JobContext
from langmem_layer.sql import reflection as rsql
from langmem_layer.store import ops as mops
from langmem_layer.synth.synthesizer import Evidence, Synthesizer
from langmem_layer.synth.topics import cosine_matrix
from langmem_layer.types import HistoryEntry, MemoryRecord, Status

__all__ = ["AVOID_SIMILARITY", "Boundaries", "Loaded", "Writes", "evidence_of", "load",
           "lost_evidence", "synthesizer_for"]

#: Cosine at or above which a statement counts as covered by a boundary.
AVOID_SIMILARITY = 0.6
#: Statements that report a conclusion the user reached (an "explicit conclusion").
CONCLUSION = re.compile(
    r"\b(decided|concluded|settled on|settled that|agreed|chose|made up (?:his|her|their) "
    r"mind|landed on|will go with|went with|committed to)\b", re.IGNORECASE)


def synthesizer_for(ctx: JobContext) -> Synthesizer:
    """The context's synthesizer, else ``langmem_layer.environment.default_synthesizer``."""
    found = getattr(ctx, "synthesizer", None)
    if found is None:
        from langmem_layer.environment import default_synthesizer

        found = default_synthesizer()
        ctx.synthesizer = found
    return found  # type: ignore[no-any-return]


def model_id(ctx: JobContext) -> str | None:
    """The store's embedding model (None: a store without vectors)."""
    return ctx.store.model_id if getattr(ctx.store, "embeddings", None) is not None else None


def evidence_of(key: str, value: dict[str, Any], vector: Any = None) -> Evidence:
    """A stored memory as ``Evidence``."""
    rec = MemoryRecord.model_validate(value)
    return Evidence(key, rec.content, rec.occurred_at, rec.kind.value, tuple(rec.refs),
                    rec.source.thread_id, vector,
                    bool(CONCLUSION.search(rec.content)) or rec.metadata.get("conclusion") is True)


@dataclass(slots=True)
class Boundaries:
    """The user's ``avoid`` memories: their references and vectors."""

    refs: set[str] = field(default_factory=set)
    vectors: list[Any] = field(default_factory=list)

    def covers(self, items: Sequence[Evidence]) -> list[bool]:
        """Whether each item is covered by a boundary."""
        out = [bool(self.refs.intersection(e.refs)) for e in items]
        with_vec = [i for i, e in enumerate(items) if e.vector is not None]
        if self.vectors and with_vec:
            sims = cosine_matrix([items[i].vector for i in with_vec], self.vectors)
            for row, i in enumerate(with_vec):
                out[i] = out[i] or bool((sims[row] >= AVOID_SIMILARITY).any())
        return out

    def named_in(self, text: str) -> bool:
        """Whether ``text`` names one of the boundaries' references."""
        low = text.lower()
        return any(re.search(r"\b" + re.escape(ref) + r"\b", low) for ref in self.refs)


@dataclass(slots=True)
class Loaded:
    """One user's memories as a job reads them."""

    rows: list[dict[str, Any]]
    evidence: list[Evidence]
    prefixes: list[str]


def parse_vector(raw: bytes | None) -> Any:
    """A vector in pgvector's binary form (a 2-byte size, 2 unused bytes, big-endian
    float4s) as a float32 array; None stays None."""
    if raw is None:
        return None
    import numpy as np

    return np.frombuffer(raw, dtype=">f4", offset=4).astype(np.float32)


def load(ctx: JobContext, user_id: str, **filters: Any) -> Loaded:
    """``user_id``'s active memories matching ``filters`` (see ``sql.reflection.memories``),
    each row's vector a float32 array."""
    rows = ctx.execute(rsql.memories(user_id, model_id(ctx), **filters))
    for r in rows:
        r["vector"] = parse_vector(r["vector"])
    return Loaded(rows, [evidence_of(r["key"], r["value"], r["vector"]) for r in rows],
                  [r["prefix"] for r in rows])


def boundaries(ctx: JobContext, user_id: str) -> Boundaries:
    """The user's active ``avoid`` memories."""
    found = load(ctx, user_id, policies=["avoid"])
    return Boundaries({r for e in found.evidence for r in e.refs},
                      [e.vector for e in found.evidence if e.vector is not None])


def namespace(prefix: str) -> tuple[str, ...]:
    """A stored prefix as its namespace (user ids hold no '.')."""
    return tuple(prefix.split(".", 2))


def history_entry(now: datetime, old: str, new: str, reason: str) -> HistoryEntry:
    """A ``content`` change in a record's history."""
    return HistoryEntry(at=now, event="content", old=old, new=new, reason=reason)


class Writes:
    """A user's writes of one job run, applied in one store batch at the end: one
    embedding call for every record written, one round of statements, and every
    ``derived_from`` link in one statement (a first run links hundreds)."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.ops: list[Any] = []
        self.links: list[tuple[str, str, str]] = []
        self.now: datetime | None = None

    def record(self, prefix: str, record: MemoryRecord, *, key: str | None,
               evidence: Iterable[str], now: datetime) -> str:
        """Write ``record`` (new when ``key`` is None), linked ``derived_from`` each piece
        of evidence; the store embeds it in the same batch. Returns its key."""
        key = key or str(uuid.uuid4())
        record = MemoryRecord.model_validate(record.model_dump())
        self.ops.append(PutOp(namespace(prefix), key, record.to_value()))
        self._link(key, evidence, now)
        return key

    def reinforce(self, key: str, evidence: Iterable[str], now: datetime) -> None:
        """Reinforce a record and link it to more evidence."""
        self.ops.append(mops.ReinforceOp(self.user_id, (key,), now))
        self._link(key, evidence, now)

    def _link(self, key: str, evidence: Iterable[str], now: datetime) -> None:
        self.links += [(key, "derived_from", dst) for dst in evidence]
        self.now = now

    def retire(self, keys: Sequence[str], now: datetime, reason: str) -> None:
        """Archive synthesized records (kept for audit), the reason in their history."""
        if keys:
            self.ops.append(mops.SetStatusOp(self.user_id, tuple(keys), Status.ARCHIVED, now,
                                             reason))

    def log(self, job: str, decisions: list[dict[str, Any]], now: datetime) -> None:
        """Append the run's decisions (raw model output, errors, tokens) to the user's
        decision log (``memory.admin.decisions``)."""
        if decisions:
            self.ops.append(mops.LogIngestOp(self.user_id, decisions, now, None, f"job:{job}"))

    def flush(self, ctx: JobContext) -> None:
        """Apply the writes (in the user's transaction when the runner runs the job), or
        leave them in ``ctx.deferred`` when the runner batches users' embeddings."""
        if self.links:
            self.ops.append(mops.LinkManyOp(self.user_id, tuple(self.links), self.now))
            self.links = []
        if self.ops:
            ops, self.ops = self.ops, []
            if getattr(ctx, "deferred", None) is not None:
                ctx.deferred.extend(ops)  # type: ignore[union-attr]
            else:
                ctx.store.batch(ops)


def lost_evidence(ctx: JobContext, user_id: str, records: Sequence[dict[str, Any]],
                  bounds: Boundaries) -> dict[str, tuple[list[Evidence], list[str]]]:
    """For each synthesized record: its evidence still valid, and the keys lost (deleted,
    contradicted, forgotten, or now a boundary), in one statement for all records."""
    pairs = [(r["key"], k) for r in records for k in r["value"]["metadata"].get("evidence", [])]
    out: dict[str, tuple[list[Evidence], list[str]]] = {r["key"]: ([], []) for r in records}
    if not pairs:
        return out
    for row in ctx.execute(rsql.evidence_state(user_id, pairs)):
        valid, lost = out[row["record"]]
        gone = (not row["exists"] or row["status"] == Status.CONTRADICTED.value
                or row["forgotten"] or row["policy"] == "avoid")
        if gone:
            lost.append(row["key"])
            continue
        ev = evidence_of(row["key"], row["value"])
        if bounds.covers([ev])[0]:
            lost.append(row["key"])
        else:
            valid.append(ev)
    return out
