"""The write path, written once for sync and async.

A turn is queued durably (``enqueue_turn``); a worker leases queue entries
(``langmem_layer.write.extraction_queue``) and runs ``ingest`` on each: the extractor sees the new
messages with the user's existing relevant memories, the gate decides, and the
accepted operations are applied together with the entry's completion and the
decision log in ONE transaction. Every operation carries an id derived from its
source message and content, and is applied at most once, so a replayed batch changes
nothing.

Concurrent workers cannot lose or duplicate a write: every apply transaction first takes
a per-user lock, a new memory is written only if its scope has no active memory with the
same content (else that one is reinforced), and counters are updated in SQL.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, messages_to_dict

from langmem_layer.errors import OperationAppliedError
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.extract.fallback import fallback_ops
from langmem_layer.extract.gate import GateDecision
from langmem_layer.flow import Env, ExtractCall, Flow, StoreCall, require_user
from langmem_layer.read.rank import rank_candidates
from langmem_layer.read.recall import recall_op
from langmem_layer.sanitize import clean_deep, clean_messages
from langmem_layer.store import ops as mops
from langmem_layer.store.ops.trust import TrustOp
from langmem_layer.trust_flows import trust_count
from langmem_layer.types import (
    LinkType,
    MemoryRecord,
    Recalled,
    Source,
    Status,
    to_utc,
)
from langmem_layer.write.new_memory import (
    Written,
    context_before_ops,
    links_thread,
    memory_ops,
    put_context_vectors,
)
from langmem_layer.write.profile_record import apply_explicit, explicit_preference

logger = logging.getLogger("langmem_layer.write")

__all__ = [
    "IngestResult",
    "enqueue_op",
    "enqueue_turn",
    "ingest",
    "operation_id",
]

#: Predicates that hold one value at a time: a new value replaces the old one.
SINGLE_VALUED = frozenset({"name", "works_at", "lives_in"})
_KEY_NAMESPACE = uuid.UUID("6f1c2a52-5b0e-4b7a-9a55-3f1f4c1d2e10")
#: Confidence a reinforcement adds (docs/writing.md: "confidence + 0.05").
REINFORCE_STEP = 0.05


@dataclass
class IngestResult:
    """What one ingest did: every gate decision and the memory ids it wrote or changed.

    Attributes:
        decisions: One per proposed operation, in order (accepted or not, and why).
        written: Ids of memories created.
        changed: Ids of existing memories reinforced, superseded, archived or closed.
        replayed: Operation ids skipped because they were applied before.
    """

    user_id: str
    decisions: list[GateDecision]
    written: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> list[GateDecision]:
        """Decisions that were applied."""
        return [d for d in self.decisions if d.accepted]


def operation_id(user_id: str, source: str, op: MemoryOperation) -> str:
    """A stable id for an operation: same source message and content, same id."""
    payload = json.dumps(
        [user_id, source, op.op, op.content, op.target_id, op.target_hint, op.kind],
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _turn_key(messages: Sequence[BaseMessage], turn_at: datetime) -> str:
    ids = [m.id for m in messages if m.id]
    if ids:
        return "msg:" + ids[-1]
    text = "\n".join(m.text for m in messages)
    return "text:" + hashlib.sha256(f"{turn_at.isoformat()}|{text}".encode()).hexdigest()[:32]


def enqueue_turn(env: Env, user_id: str, messages: Sequence[BaseMessage], *,
                 profile: str | None, thread_id: str | None, agent_id: str | None,
                 now: datetime, dedupe_key: str | None = None) -> Flow[int | None]:
    """Queue a turn's messages for extraction; returns the entry id (None if queued before).

    NUL characters are removed from the messages (``langmem_layer.sanitize``):
    PostgreSQL cannot store them, and the turn must not be lost for one.
    """
    op = enqueue_op(env, user_id, messages, profile=profile, thread_id=thread_id,
                    agent_id=agent_id, now=now, dedupe_key=dedupe_key)
    (entry,) = yield StoreCall([op])
    return entry


def enqueue_op(env: Env, user_id: str, messages: Sequence[BaseMessage], *,
               profile: str | None, thread_id: str | None, agent_id: str | None,
               now: datetime, dedupe_key: str | None = None) -> mops.EnqueueOp:
    """The op queueing a turn (see ``enqueue_turn``), its messages cleaned of NULs."""
    user_id = require_user(user_id)
    messages = clean_messages(messages)
    key = dedupe_key or f"{thread_id or '-'}:{_turn_key(messages, now)}"
    return mops.EnqueueOp(user_id, key, profile or env.settings.default_profile,
                          messages_to_dict(list(messages)), now, thread_id, agent_id, now)


def _readable(messages: Sequence[BaseMessage], limit: int) -> list[BaseMessage]:
    """The messages as the extractor reads them: each text cut to its first ``limit``
    characters (the turn itself is kept whole in the queue and the log)."""
    out: list[BaseMessage] = []
    for m in messages:
        text = m.text
        if len(text) > limit:
            logger.info("extraction reads the first %d of %d characters of a message",
                        limit, len(text))
            m = m.model_copy(update={"content": text[:limit]})
        out.append(m)
    return out


def _human_text(messages: Sequence[BaseMessage]) -> str:
    return " ".join(m.text for m in messages if isinstance(m, HumanMessage))


def _resolve_target(op: MemoryOperation, known: dict[str, Recalled]) -> str | None:
    if op.target_id:
        return op.target_id
    hint = (op.target_hint or "").lower()
    if not hint:
        return None
    for r in known.values():
        text = r.record.content.lower()
        if hint in text or any(hint in ref or ref in hint for ref in r.record.refs):
            return r.key
    return None


def _rival(op: MemoryOperation, known: dict[str, Recalled]) -> str | None:
    """An active memory holding another value of the same single-valued fact."""
    if op.predicate not in SINGLE_VALUED:
        return None
    for r in known.values():
        rec = r.record
        if (rec.predicate == op.predicate and rec.status == Status.ACTIVE
                and (rec.object or "").lower() != (op.object or "").lower()):
            return r.key
    return None


def _decision_dict(d: GateDecision) -> dict[str, Any]:
    op = d.operation
    return {"op": op.op.value, "content": op.content, "target_id": op.target_id,
            "target_hint": op.target_hint, "accepted": d.accepted, "reason": d.reason,
            "proposed": d.proposed.op.value, "confidence": op.confidence}


def ingest(env: Env, user_id: str, messages: Sequence[BaseMessage], *, profile: str | None,
           thread_id: str | None, agent_id: str | None, now: datetime,
           entry_id: int | None = None, operations: Sequence[MemoryOperation] | None = None,
           targets: Sequence[Recalled] = ()) -> Flow[IngestResult]:
    """Extract, gate and apply one turn in one transaction.

    The memories it writes into ``thread_id``'s chain then get their context vectors
    (``put_context_vectors``), after the transaction as ``remember``'s do.

    ``now`` is the turn's time: relative dates resolve against it and it stamps what
    is written. With ``entry_id`` the queue entry is completed in the same transaction.
    With ``operations`` the extractor is not called: those are what is proposed (an
    agent's memory tools, an import), gated and applied as an extractor's would be;
    ``targets`` are memories they name by id, so an update supersedes its target.
    """
    user_id = require_user(user_id)
    profile = profile or env.settings.default_profile
    messages = clean_messages(messages)
    result = IngestResult(user_id, [])
    finish: list[Any] = [mops.CompleteEntryOp(user_id, entry_id, now)] if entry_id else []
    readable = _readable(messages, env.settings.max_extract_chars)
    text = _human_text(readable)
    if not text.strip():
        if finish:
            yield StoreCall(finish)
        return result
    # The existing memories the extractor and the gate weigh the turn against: recall's
    # own retrieval, without the link walk. The extractor and the gate look for what the
    # turn repeats, updates or contradicts; the walk adds memories around those, and its
    # scores would cost a round trip of their own before the extractor call.
    def existing_op(query: str) -> mops.RecallOp:
        return recall_op(env, user_id, query, profile=profile, now=now, walk_links=False)

    # The trust conflict policy weighs learned trust, read in the same round trip.
    wants_trust = env.settings.conflict_policy == "trust"
    cands, *learned = yield StoreCall([existing_op(text),
                                       *([TrustOp(user_id)] if wants_trust else [])])
    existing = rank_candidates(cands, now=now, settings=env.settings, limit=20)
    extracted: list[MemoryOperation] = (
        list(operations) if operations is not None
        else (yield ExtractCall(readable, existing, now)))
    proposed = _spoken_by([_clean_operation(p) for p in extracted], messages)
    probes = [i for i, p in enumerate(proposed)
              if p.op in (OpType.ADD, OpType.UPDATE) and p.content]
    neighbors: dict[int, list[Recalled]] = {}
    if probes:
        # Stale memories too: an add of one is its reinforcement and reactivation.
        found = yield StoreCall([existing_op(str(proposed[i].content))._replace(
            statuses=(Status.ACTIVE, Status.STALE)) for i in probes])
        for i, cands_i in zip(probes, found, strict=True):
            neighbors[i] = sorted(
                (Recalled(c.key, c.namespace, MemoryRecord.model_validate(c.value),
                          similarity=c.similarity) for c in cands_i),
                key=lambda r: -(r.similarity or 0.0))
    decisions = env.gate.review(proposed, neighbors=neighbors)
    known = {r.key: r for r in [*existing, *targets]}
    for rs in neighbors.values():
        known.update({r.key: r for r in rs})
    by_id = {m.id: m for m in messages if m.id}
    turn_key = _turn_key(messages, now)
    planned: list[_Planned] = []
    for n, decision in enumerate(decisions):
        if not decision.accepted:
            continue
        op = decision.operation
        message = by_id.get(op.source_message_id or "")
        source = Source(agent_id=agent_id, thread_id=thread_id, message_id=op.source_message_id,
                        text=op.source_text or (message.text if message else None))
        # The id comes from what was proposed, so a replay maps to the same id even
        # when the gate rewrites the operation (say, an add into a reinforce).
        op_id = operation_id(user_id, op.source_message_id or turn_key, decision.proposed)
        plan = _plan_operation(env, user_id, profile, op, op_id, source, known, now,
                               thread_id=thread_id, learned=learned[0] if learned else None)
        if isinstance(plan, str):  # a conflict policy declined it
            decisions[n] = GateDecision(op, decision.proposed, False, plan)
        elif plan.ops:
            planned.append(plan)
    result.decisions = decisions
    # The queue entry is completed by the statement keeping the decisions.
    log = mops.LogIngestOp(user_id, [_decision_dict(d) for d in decisions], now, thread_id,
                           agent_id, complete=entry_id, now=now)
    rest = [log, *fallback_ops(user_id, profile, thread_id, agent_id, messages, now, extracted)]
    # The new memories' chains are read last in the batch, after their links.
    made = [m for plan in planned for m in plan.made]
    after = len(rest)
    rest += context_before_ops(env, user_id, made, thread_id=thread_id)
    # One writer per user at a time: the lock is taken first in the transaction (by the
    # first operation's exactly-once record) and its adds re-check, under it, what a
    # concurrent worker committed (AddMemoryOp). The thread's lock too, in the same
    # statement, for the links of its new memories.
    lock = mops.LockUserWritesOp(user_id, thread_id if links_thread(env, thread_id) else None)
    try:
        # A turn is replayed only after a crash: record each operation and apply it in
        # the same round trip, and fall back to checking first if one was applied.
        outcomes, done_rest = yield from _apply_optimistic(user_id, planned, rest, lock, now)
    except OperationAppliedError:
        everything = yield StoreCall([
            *(mops.ApplyOnceOp(user_id, p.op_id, tuple(p.ops), now,
                               lock if i == 0 else None) for i, p in enumerate(planned)),
            *rest])
        outcomes, done_rest = everything[:len(planned)], everything[len(planned):]
    for plan, outcome in zip(planned, outcomes, strict=False):
        if outcome is None:
            result.replayed.append(plan.op_id)
            continue
        for done in outcome:
            if isinstance(done, mops.AddOutcome) and not done.created:
                # An identical memory was committed meanwhile: it was reinforced instead.
                plan.written = []
                plan.changed.append(done.key)
        result.written.extend(plan.written)
        result.changed.extend(plan.changed)
    # Their context vectors, after the transaction (the model is not called in one); a
    # memory that was not written read an empty chain and gets none.
    yield from put_context_vectors(user_id, made, done_rest[after:], now=now)
    # An explicit preference ("keep answers short") updates the procedural
    # profile now, not at the weekly inference.
    change = explicit_preference(text)
    if change:
        yield from apply_explicit(user_id, profile, change, now)
    return result


def _apply_optimistic(user_id: str, planned: Sequence[_Planned], rest: Sequence[Any],
                      lock: mops.LockUserWritesOp, now: datetime
                      ) -> Flow[tuple[list[Any], list[Any]]]:
    """Apply ``planned`` and ``rest`` in one batch, each plan's ops after a record of its
    id (``MarkAppliedOp``); each plan's results, in order, and ``rest``'s.

    Raises:
        OperationAppliedError: A plan was applied before; nothing was written.
    """
    batch: list[Any] = []
    spans: list[tuple[int, int]] = []
    for i, plan in enumerate(planned):
        batch.append(mops.MarkAppliedOp(user_id, plan.op_id, now, lock if i == 0 else None))
        spans.append((len(batch), len(batch) + len(plan.ops)))
        batch.extend(plan.ops)
    results = yield StoreCall([*batch, *rest])
    return [results[a:b] for a, b in spans], results[len(batch):]


def _spoken_by(ops: list[MemoryOperation], messages: Sequence[BaseMessage]
               ) -> list[MemoryOperation]:
    """``ops`` about the speaker with the speaker's name as their subject, where the
    human message they come from has one (``HumanMessage(name=...)``: LangChain's way
    of telling several people apart in one chat), as ``remember(subject=...)`` does.

    An operation names its message by ``source_message_id``; one without falls to the
    turn's one named speaker, when there is exactly one.
    """
    named = {m.id: m.name for m in messages if isinstance(m, HumanMessage) and m.name}
    if not named:
        return ops
    only = next(iter(set(named.values()))) if len(set(named.values())) == 1 else None
    out = []
    for op in ops:
        name = named.get(op.source_message_id) if op.source_message_id else only
        if name and op.subject in (None, "user"):
            op = op.model_copy(update={"subject": name})
        out.append(op)
    return out


def _clean_operation(op: MemoryOperation) -> MemoryOperation:
    """A model's operation without NUL characters in its text (PostgreSQL cannot store
    them; see ``langmem_layer.sanitize``)."""
    fields = {name: getattr(op, name) for name in type(op).model_fields}
    update = {k: clean_deep(v) for k, v in fields.items() if isinstance(v, str | list | dict)}
    update = {k: v for k, v in update.items() if v != fields[k]}
    return op.model_copy(update=update) if update else op


#: Why the write path changed a memory's status, as its history records it.
_SUPERSEDED_BY_CORRECTION = "superseded by a correction"
_SUPERSEDED_BY_NEWER_VALUE = "superseded by a later value"
_RETIRING = {
    OpType.CONTRADICT: (Status.CONTRADICTED, "contradicted by a later turn"),
    OpType.CLOSE_OPEN_LOOP: (Status.ARCHIVED, "closed: the user reported it done"),
    OpType.FORGET: (Status.ARCHIVED, "forgotten at the user's request"),
}


@dataclass
class _Planned:
    op_id: str
    ops: list[Any] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    #: What its memories' context vectors are made of (``put_context_vectors``).
    made: list[Written] = field(default_factory=list)


def _plan_operation(env: Env, user_id: str, profile: str, op: MemoryOperation, op_id: str,
                    source: Source, known: dict[str, Recalled], now: datetime, *,
                    thread_id: str | None, learned: Any = None) -> _Planned | str:
    """Store ops for one accepted operation, or why a conflict policy declined it.

    A memory it writes joins the chain of ``thread_id``'s memories. It is written only if
    its scope holds no active memory with the same content when the transaction gets to
    it (``AddMemoryOp``); else that one is reinforced.
    """
    plan = _Planned(op_id)
    target = _resolve_target(op, known)
    if op.op in (OpType.ADD, OpType.UPDATE) and op.content:
        rival = target if op.op == OpType.UPDATE else _rival(op, known)
        policy = env.settings.conflict_policy
        old = known.get(rival or "")
        old_agent = old.record.source.agent_id if old is not None else None
        contested = old is not None and old_agent not in (None, source.agent_id)
        if contested and policy == "trust":
            kind = old.record.kind.value if old is not None else None
            mine = env.trust_of(source.agent_id, learned, kind)
            theirs = env.trust_of(old_agent, learned, kind)
            if theirs > mine:
                return (f"conflict: agent {old_agent!r} (trust {theirs:.2f}) outranks "
                        f"{source.agent_id!r} ({mine:.2f}); kept the existing memory")
        review = contested and policy == "review"
        key = str(uuid.uuid5(_KEY_NAMESPACE, f"{user_id}:{plan.op_id}"))
        # The apply batch takes the thread's lock with the user's (see ingest).
        record, written = memory_ops(
            env, user_id, profile, key, op.content, now=now, thread_id=thread_id,
            thread_locked=True,
            kind=op.kind, layer=op.layer, policy=op.policy, confidence=op.confidence,
            salience=op.salience, refs=op.refs,
            due_at=to_utc(op.due_at) if op.due_at else None, subject=op.subject,
            predicate=op.predicate, obj=op.object, source=source,
            metadata={**({"needs_review": True} if review else {}),
                      **({"ephemeral": True} if op.ephemeral else {})} or None,
        )
        put, *then = written
        plan.written.append(key)
        plan.made.append((put.namespace, key, record.content))
        if old is not None and review:  # both stay; a human decides
            then.append(mops.LinkOp(user_id, key, LinkType.CONTRADICTS, old.key, now))
        elif old is not None:  # latest write (or the more trusted agent) wins
            then.append(mops.LinkOp(user_id, key, LinkType.SUPERSEDES, old.key, now))
        plan.ops.append(mops.AddMemoryOp(user_id, put, tuple(then), now, REINFORCE_STEP))
        if old is not None and not review:
            why = (_SUPERSEDED_BY_CORRECTION if op.op == OpType.UPDATE
                   else _SUPERSEDED_BY_NEWER_VALUE)
            plan.ops.append(mops.SetStatusOp(user_id, (old.key,), Status.CONTRADICTED, now,
                                             f"{why} (memory {key})"))
            plan.changed.append(old.key)
            if op.op == OpType.UPDATE:  # the user corrected it: it counts against its agent
                plan.ops += trust_count(user_id, old.record, confirmed=False, now=now)
    elif op.op == OpType.REINFORCE and target in known:
        plan.ops.append(mops.ReinforceOp(user_id, (known[target].key,), now, REINFORCE_STEP))
        plan.changed.append(known[target].key)
        if known[target].record.source.agent_id != source.agent_id:
            # Reinforced from another source, it counts for its agent.
            plan.ops += trust_count(user_id, known[target].record, confirmed=True, now=now)
    elif op.op in _RETIRING and target:
        status, why = _RETIRING[op.op]
        plan.ops.append(mops.SetStatusOp(user_id, (target,), status, now, why,
                                         close_loop=op.op == OpType.CLOSE_OPEN_LOOP))
        plan.changed.append(target)
    return plan
