"""Learned agent trust: flows that count an agent's checkable writes and read the
trust learned from them.

An agent's trust is confirmed / total of its checkable writes for the user (0.5 with no
history), overall and per kind. A write the user later corrects (``correct``, or an
update in a turn) counts against its agent; one the user confirms (``feedback``) or
that another source reinforces counts for it. Retrieval multiplies by the learned
trust, and the ``trust`` conflict policy compares it; both read it in the round trip
they already make (``TrustOp``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from langmem_layer.errors import MemoryNotFoundError
from langmem_layer.flow import Flow, StoreCall, require_user
from langmem_layer.store import ops as mops
from langmem_layer.store.ops.trust import LearnedTrust, TrustCountOp, TrustOp
from langmem_layer.types import MemoryRecord

__all__ = ["feedback", "learned_trust", "trust_count"]


def trust_count(user_id: str, record: MemoryRecord, *, confirmed: bool, now: datetime
                ) -> list[Any]:
    """The op counting ``record`` for (or against) its agent: none for a write no agent
    made, or one a reflection job synthesized."""
    agent = record.source.agent_id
    if not agent or agent.startswith("job:"):
        return []
    return [TrustCountOp(user_id, agent, record.kind.value, int(confirmed), now)]


def feedback(user_id: str, *, memory_id: str | None, agent_id: str | None, correct: bool,
             kind: str | None, now: datetime) -> Flow[LearnedTrust]:
    """Count explicit feedback on a memory (its agent and kind) or on an agent; returns
    the user's learned trust after it."""
    user_id = require_user(user_id)
    if memory_id is not None:
        (item,) = yield StoreCall([mops.FindMemoryOp(user_id, memory_id)])
        if item is None:
            raise MemoryNotFoundError(f"No memory {memory_id!r} for user {user_id!r}: pass "
                                      "the id of one of this user's memories.")
        record = MemoryRecord.model_validate(item.value)
        ops = trust_count(user_id, record, confirmed=correct, now=now)
    else:
        ops = [TrustCountOp(user_id, str(agent_id), kind or "", int(correct), now)]
    *_, learned = yield StoreCall([*ops, TrustOp(user_id)])
    return learned  # type: ignore[no-any-return]


def learned_trust(user_id: str) -> Flow[LearnedTrust]:
    """The user's learned trust per agent."""
    (found,) = yield StoreCall([TrustOp(require_user(user_id))])
    return found  # type: ignore[no-any-return]
