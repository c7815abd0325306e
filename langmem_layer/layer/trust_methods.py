"""The learned-trust half of ``MemoryLayer``: explicit feedback
on an agent's writes, and the trust learned so far.

A mixin, like ``langmem_layer.layer.control_methods``: every method is a one-line call into the
layer's ``Runner`` over a flow built once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Unpack

from langmem_layer import checks, trust
from langmem_layer.errors import InvalidInputError
from langmem_layer.flow import Flow
from langmem_layer.layer.base import LayerBase
from langmem_layer.layer.params import FeedbackArgs
from langmem_layer.store.ops.trust import LearnedTrust

__all__ = ["TrustMethods"]


class TrustMethods(LayerBase):
    """Feedback and learned-trust methods of ``MemoryLayer``."""

    def feedback(self, user_id: str, correct: bool, **kw: Unpack[FeedbackArgs]
                 ) -> LearnedTrust:
        """Tell the layer whether an agent's write was right; returns the learned trust.

        ``correct=True`` counts the write for its agent (the user confirmed it), ``False``
        against it. Retrieval multiplies by the learned trust and the ``trust`` conflict
        policy compares it (confirmed / total, 0.5 with no history).

        Args:
            user_id: The user.
            correct: Whether the write was right.
            **kw: See ``FeedbackArgs`` (``memory_id`` or
                ``agent_id``).
        """
        return self._runner.run(self._feedback(user_id, correct, **kw))

    async def afeedback(self, user_id: str, correct: bool, **kw: Unpack[FeedbackArgs]
                        ) -> LearnedTrust:
        """Async twin of ``feedback``."""
        return await self._runner.arun(self._feedback(user_id, correct, **kw))

    def agent_trust(self, user_id: str) -> LearnedTrust:
        """The trust learned per agent (and per kind) from the user's corrections,
        confirmations and feedback."""
        return self._runner.run(trust.learned_trust(user_id))

    async def aagent_trust(self, user_id: str) -> LearnedTrust:
        """Async twin of ``agent_trust``."""
        return await self._runner.arun(trust.learned_trust(user_id))

    def _feedback(self, user_id: str, correct: bool, *, memory_id: str | None = None,
                  agent_id: str | None = None, kind: str | None = None,
                  now: datetime | None = None) -> Flow[LearnedTrust]:
        if not isinstance(correct, bool):
            raise InvalidInputError(f"correct must be True or False, got {correct!r}.")
        if (memory_id is None) == (agent_id is None):
            raise InvalidInputError("Pass exactly one of memory_id= (feedback on a memory's "
                                    "agent) or agent_id= (feedback on an agent).")
        checks.check_time(now, "now")
        return trust.feedback(user_id, memory_id=memory_id, agent_id=agent_id, correct=correct,
                              kind=kind, now=now or self.now())
