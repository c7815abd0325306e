"""Store operations of learned agent trust; handled by
``langmem_layer.store.handlers.trust``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

__all__ = ["LearnedTrust", "TrustCountOp", "TrustOp"]


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
