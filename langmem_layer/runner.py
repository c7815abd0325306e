"""The flow runner's vocabulary: requests a flow yields, and what flows share.

Each flow is a generator that yields requests — :class:`StoreCall` (a batch of store
ops) or :class:`ExtractCall` (run the extractor) — and returns its result. The
:class:`~langmem_layer.MemoryLayer` drives a flow with ``store.batch`` and
``extractor.extract`` in sync code, or with ``abatch`` / ``aextract`` in async code.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage

from langmem_layer.errors import MissingUserError
from langmem_layer.settings import MemorySettings
from langmem_layer.tokens import TokenCounter
from langmem_layer.types import (
    IDENTITY_SCOPE,
    Recalled,
)
from langmem_layer.write.gate import WriteGate

__all__ = ["Env", "ExtractCall", "Flow", "StoreCall", "require_user", "scopes_for"]


class StoreCall(NamedTuple):
    """Request: run these ops in one store batch (one transaction)."""

    ops: list[Any]


class ExtractCall(NamedTuple):
    """Request: run the extractor."""

    messages: Sequence[BaseMessage]
    existing: Sequence[Recalled]
    now: datetime


Flow = Generator[StoreCall | ExtractCall, Any, Any]

@dataclass
class Env:
    """What flows need besides I/O: settings, the gate, the token counter, agent trust."""

    settings: MemorySettings
    gate: WriteGate
    counter: TokenCounter
    trust: Mapping[str, float] = field(default_factory=dict)

    def trust_of(self, agent_id: str | None) -> float:
        """An agent's trust: correct / total predictions, 0.5 with no history (R7.2)."""
        return self.trust.get(agent_id or "", 0.5)


def require_user(user_id: str | None) -> str:
    """Validate a user id; the error says how to pass one."""
    if not user_id or not isinstance(user_id, str):
        raise MissingUserError(
            "No user_id: pass it per run as "
            "graph.invoke(inputs, config={'configurable': {'user_id': 'alice'}}) "
            "or as the first argument of the MemoryLayer method."
        )
    if "." in user_id:
        raise MissingUserError(f"user_id {user_id!r} must not contain '.'.")
    return user_id


def scopes_for(env: Env, profile: str | None) -> tuple[str, str]:
    """A run sees its profile and the user's global identity memories."""
    return (profile or env.settings.default_profile, IDENTITY_SCOPE)


