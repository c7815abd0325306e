"""Handlers of the learned-trust ops (``langmem_layer.store.ops.trust``).

Mixed into ``StoreCore``; generators that yield requests
and never do I/O themselves.
"""

from __future__ import annotations

from typing import Any

from langmem_layer.sql import trust as tsql
from langmem_layer.store.handlers.registry import Registry, handles
from langmem_layer.store.ops import trust as tops
from langmem_layer.store.plan import Handler, Query

__all__ = ["TrustHandlers", "learned_trust"]


def learned_trust(rows: list[dict[str, Any]]) -> tops.LearnedTrust:
    """A user's learned trust from their trust counts (rows of ``agent_id``, ``kind``,
    ``confirmed``, ``total``; kind ``""`` counts over all kinds)."""
    by_agent: dict[str, float] = {}
    by_kind: dict[tuple[str, str], float] = {}
    counts: dict[str, tuple[int, int]] = {}
    for r in rows:
        share = int(r["confirmed"]) / int(r["total"])
        if r["kind"] == "":
            by_agent[r["agent_id"]] = share
            counts[r["agent_id"]] = (int(r["confirmed"]), int(r["total"]))
        else:
            by_kind[(r["agent_id"], r["kind"])] = share
    return tops.LearnedTrust(by_agent, by_kind, counts)


class TrustHandlers(Registry):
    """Count an agent's checkable writes; read a user's learned trust."""

    @handles(tops.TrustCountOp)
    def _trust_count(self, op: tops.TrustCountOp) -> Handler:
        yield Query(*tsql.count(op.user_id, op.agent_id, op.kind, op.confirmed, op.total,
                                op.now))

    @handles(tops.TrustOp)
    def _trust(self, op: tops.TrustOp) -> Handler:
        return learned_trust((yield Query(*tsql.counts(op.user_id))))
