"""``memory.trust``: explicit feedback on an agent's writes, the trust learned so far,
and the outcomes of following a procedural habit.

A part of the layer (``langmem_layer.facade.part``): every method is a one-line call
into the layer's ``Runner`` over a flow built once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Unpack

from langmem_layer import checks, control, trust_flows
from langmem_layer.errors import InvalidInputError
from langmem_layer.facade.params import FeedbackArgs, OutcomeArgs
from langmem_layer.facade.part import Part
from langmem_layer.flow import Flow
from langmem_layer.store.ops.trust import LearnedTrust

__all__ = ["Trust"]


class Trust(Part):
    """How far each agent's writes are trusted: ``memory.trust``."""

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
        return self.layer.runner.run(self._feedback(user_id, correct, **kw))

    async def afeedback(self, user_id: str, correct: bool, **kw: Unpack[FeedbackArgs]
                        ) -> LearnedTrust:
        """Async twin of ``feedback``."""
        return await self.layer.runner.arun(self._feedback(user_id, correct, **kw))

    def agent_trust(self, user_id: str) -> LearnedTrust:
        """The trust learned per agent (and per kind) from the user's corrections,
        confirmations and feedback."""
        return self.layer.runner.run(trust_flows.learned_trust(user_id))

    async def aagent_trust(self, user_id: str) -> LearnedTrust:
        """Async twin of ``agent_trust``."""
        return await self.layer.runner.arun(trust_flows.learned_trust(user_id))

    def record_outcome(self, user_id: str, memory_id: str, **kw: Unpack[OutcomeArgs]
                       ) -> tuple[int, int]:
        """Count one outcome of following a procedural habit; the lifecycle job retires a
        habit that keeps failing.

        Args:
            user_id: The user.
            memory_id: A procedural memory.
            **kw: See ``OutcomeArgs`` (``success`` required).

        Returns:
            The habit's (successes, failures) after counting this one.

        Raises:
            MemoryNotFoundError: No such memory for the user.
            NotProceduralError: The memory is not procedural.
        """
        return self.layer.runner.run(self._record_outcome(user_id, memory_id, **kw))

    async def arecord_outcome(self, user_id: str, memory_id: str, **kw: Unpack[OutcomeArgs]
                              ) -> tuple[int, int]:
        """Async twin of ``record_outcome``."""
        return await self.layer.runner.arun(self._record_outcome(user_id, memory_id, **kw))

    def _record_outcome(self, user_id: str, memory_id: str, *, success: bool,
                        now: datetime | None = None) -> Flow[tuple[int, int]]:
        checks.check_time(now, "now")
        return control.record_outcome(user_id, memory_id, success=success,
                                      now=now or self.now())

    def _feedback(self, user_id: str, correct: bool, *, memory_id: str | None = None,
                  agent_id: str | None = None, kind: str | None = None,
                  now: datetime | None = None) -> Flow[LearnedTrust]:
        if not isinstance(correct, bool):
            raise InvalidInputError(f"correct must be True or False, got {correct!r}.")
        if (memory_id is None) == (agent_id is None):
            raise InvalidInputError("Pass exactly one of memory_id= (feedback on a memory's "
                                    "agent) or agent_id= (feedback on an agent).")
        checks.check_time(now, "now")
        return trust_flows.feedback(user_id, memory_id=memory_id, agent_id=agent_id,
                                    correct=correct, kind=kind, now=now or self.now())
