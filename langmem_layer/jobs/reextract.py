"""The ``reextract`` job: turns the rule extractor took because the model was down,
run through the layer's extractor again.

A turn is kept (``langmem_reextract``) in the transaction that applied the fallback's
operations (``langmem_layer.extract.fallback``). Re-running it is an ordinary ingest
once the model answers: its operations are keyed by their source message and
content, so running the job again changes nothing. While the model is still down the
re-run is abandoned before it writes, and the turn stays kept, one attempt more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langchain_core.messages import messages_from_dict

from langmem_layer.extract.extractor import fallback_label
from langmem_layer.flow import Env, ExtractCall, Flow, StoreCall, require_user
from langmem_layer.jobs.registry import JobContext, JobOption, JobResult, register
from langmem_layer.store import ops as mops
from langmem_layer.write import apply as write

__all__ = ["ReextractResult", "reextract"]


@dataclass
class ReextractResult:
    """What one ``reextract`` pass did, by turn (``(user_id, turn_key)``).

    Attributes:
        done: Re-extracted by the extractor: no longer kept.
        again: Fell back again (the model is still down): kept, one attempt more.
        failed: The re-run raised; kept as they were.
        results: The ingests of the turns in ``done``.
    """

    done: list[tuple[str, str]] = field(default_factory=list)
    again: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    results: list[write.IngestResult] = field(default_factory=list)


def _unless_fallback(flow: Flow[write.IngestResult]
                     ) -> Flow[tuple[write.IngestResult | None, str | None]]:
    """Run an ingest flow, but abandon it before it writes anything when its extractor
    fell back again: returns ``(result, None)``, or ``(None, fallback label)``."""
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(reply)
        except StopIteration as stop:
            return stop.value, None
        error = None
        try:
            reply = yield request
        except Exception as e:  # raised into the ingest at its yield, as the runner does
            error, reply = e, None
            continue
        label = fallback_label(reply) if isinstance(request, ExtractCall) else None
        if label is not None:
            flow.close()
            return None, label


def reextract(env: Env, *, user_id: str | None = None, limit: int = 100
              ) -> Flow[ReextractResult]:
    """Run the kept fallback turns (one user's, or all) through the extractor again.

    A turn the extractor still cannot handle (it fell back again) is not applied
    again: the rules' operations were applied the first time, and applying them anew
    would reinforce the memories they wrote. Its record counts one more attempt.

    Args:
        env: The layer's environment (``layer.env``).
        user_id: One user's turns only (default: every user's).
        limit: Turns taken in this pass, oldest first.
    """
    if user_id is not None:
        user_id = require_user(user_id)
    (turns,) = yield StoreCall([mops.FallbackTurnsOp(user_id, limit)])
    outcome = ReextractResult()
    for turn in turns:
        key = (turn.user_id, turn.turn_key)
        try:
            result, label = yield from _unless_fallback(write.ingest(
                env, turn.user_id, messages_from_dict(turn.messages), profile=turn.profile,
                thread_id=turn.thread_id, agent_id=turn.agent_id, now=turn.turn_at))
        except Exception:  # kept as it was; the next pass tries again
            outcome.failed.append(key)
            continue
        if result is None:
            yield StoreCall([mops.RecordFallbackOp(
                turn.user_id, turn.turn_key, turn.profile, turn.messages, turn.turn_at,
                label or turn.extractor, turn.thread_id, turn.agent_id)])
            outcome.again.append(key)
            continue
        # Only when its attempts are still those read above: a concurrent fallback of
        # the same turn keeps it.
        (resolved,) = yield StoreCall(
            [mops.ResolveFallbackOp(turn.user_id, turn.turn_key, turn.attempts)])
        (outcome.done if resolved else outcome.again).append(key)
        if resolved:
            outcome.results.append(result)
    return outcome


@register(
    "reextract",
    "run the turns extracted by the fallback rules (the chat model was down) through "
    "the extractor again",
    needs_embeddings=True,
    options=(
        JobOption("user", str, "one user's turns only (default: every user's)"),
        JobOption("limit", int, "turns taken in this pass (default 100)"),
    ),
)
def reextract_job(ctx: JobContext, *, now: datetime | None = None, user: str | None = None,
                  limit: int = 100) -> JobResult:
    """``reextract`` on the job context's layer; ``now`` is not used (turns keep their
    own time). Turns that fail or fall back again stay kept for the next run."""
    layer = ctx.layer
    result = layer.run(reextract(layer.env, user_id=user, limit=limit))
    return JobResult(
        "reextract",
        {"reextracted": len(result.done), "again": len(result.again),
         "failed": len(result.failed)},
        "re-extracted {reextracted} turns; {again} fell back again, {failed} failed "
        "(kept for the next run)",
        detail=result)
