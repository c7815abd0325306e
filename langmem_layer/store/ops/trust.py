"""Learned agent trust, in one place: its ops, the SQL of counting, and their handlers.

An agent's checkable writes are counted per user, agent and kind (``TrustCountOp``);
a user's learned trust is read from the counts (``TrustOp``). Every statement binds
the user with an equality predicate.

Two pieces stay in ``langmem_layer.sql.trust_counts``, because the ``sql`` room above the
store uses them and may not import from here: the table's migration
(``TRUST_TABLE``, in ``sql/ddl_features.py``) and the read of a user's counts
(``counts``), which ``sql/summaries.py`` joins into a turn's reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langmem_layer.sql import Sql
from langmem_layer.sql.trust_counts import counts
from langmem_layer.store.ops.dispatch import Context, operation
from langmem_layer.store.plan import Handler, Query

__all__ = ["LearnedTrust", "TrustCountOp", "TrustOp", "count", "learned_trust"]


# -- SQL ----------------------------------------------------------------------------------


def count(user_id: str, agent_id: str, kind: str, confirmed: int, total: int,
          now: datetime) -> Sql:
    """Add ``confirmed`` / ``total`` to the agent's counts, overall (kind ``''``) and for
    ``kind``, in one statement; concurrent counts add up (no read-modify-write). The row
    updated on a conflict is the user's own (``user_id`` leads the key); a condition
    naming a parameter there is not sent by Citus with its value (the insert's rows are
    computed on the coordinator), so there is none."""
    return (
        """INSERT INTO langmem_agent_trust AS t
               (user_id, agent_id, kind, confirmed, total, updated_at)
        SELECT %(user_id)s, %(agent_id)s, k, %(confirmed)s, %(total)s, %(now)s
        FROM unnest(%(kinds)s::text[]) AS k
        ON CONFLICT (user_id, agent_id, kind) DO UPDATE
        SET confirmed = t.confirmed + excluded.confirmed, total = t.total + excluded.total,
            updated_at = excluded.updated_at""",
        {"user_id": user_id, "agent_id": agent_id, "confirmed": confirmed, "total": total,
         "now": now, "kinds": sorted({"", kind})},
    )


# -- handlers -----------------------------------------------------------------------------


def learned_trust(rows: list[dict[str, Any]]) -> LearnedTrust:
    """A user's learned trust from their trust counts (rows of ``agent_id``, ``kind``,
    ``confirmed``, ``total``; kind ``""`` counts over all kinds)."""
    by_agent: dict[str, float] = {}
    by_kind: dict[tuple[str, str], float] = {}
    totals: dict[str, tuple[int, int]] = {}
    for r in rows:
        share = int(r["confirmed"]) / int(r["total"])
        if r["kind"] == "":
            by_agent[r["agent_id"]] = share
            totals[r["agent_id"]] = (int(r["confirmed"]), int(r["total"]))
        else:
            by_kind[(r["agent_id"], r["kind"])] = share
    return LearnedTrust(by_agent, by_kind, totals)


def _trust_count(ctx: Context, op: TrustCountOp) -> Handler:
    yield Query(*count(op.user_id, op.agent_id, op.kind, op.confirmed, op.total, op.now))


def _trust(ctx: Context, op: TrustOp) -> Handler:
    return learned_trust((yield Query(*counts(op.user_id))))


# -- ops ----------------------------------------------------------------------------------


@operation(_trust_count)
class TrustCountOp(NamedTuple):
    """Count one checkable write of ``agent_id`` (result: None): ``confirmed`` 1 when the
    user confirmed or another source reinforced it, 0 when it was corrected or
    contradicted."""

    user_id: str
    agent_id: str
    kind: str
    confirmed: int
    now: datetime
    total: int = 1


@operation(_trust, free=True, async_commit=True)
class TrustOp(NamedTuple):
    """A user's learned trust per agent (result: ``LearnedTrust``)."""

    user_id: str


@dataclass(frozen=True, slots=True)
class LearnedTrust:
    """Confirmed / total of each agent's checkable writes, overall and per kind.

    Attributes:
        by_agent: Trust of each agent with a history, over all kinds.
        by_kind: Trust of each (agent, kind) with a history.
        counts: ``(confirmed, total)`` of each agent over all kinds.
    """

    by_agent: Mapping[str, float] = field(default_factory=dict)
    by_kind: Mapping[tuple[str, str], float] = field(default_factory=dict)
    counts: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def of(self, agent_id: str | None, kind: str | None = None, default: float = 0.5
           ) -> float:
        """The agent's trust for ``kind`` (else overall; ``default`` with no history)."""
        agent = agent_id or ""
        if kind is not None and (agent, kind) in self.by_kind:
            return self.by_kind[(agent, kind)]
        return self.by_agent.get(agent, default)
