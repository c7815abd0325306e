"""Turns the LLM extractor could not handle: kept for the ``reextract`` job.

When the chat model is down, ``LLMExtractor`` lets the
rule extractor take the turn and marks its result
(``FallbackOperations``). The write path then keeps
the turn with ``fallback_ops``, in the transaction that applies the rules'
operations, so which turns to redo is never lost; the job runs them through the
extractor again once the model is back.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from langchain_core.messages import BaseMessage, messages_to_dict

from langmem_layer.extract.extractor import MemoryOperation, fallback_label
from langmem_layer.store import ops as mops
from langmem_layer.types import utc_iso

__all__ = ["fallback_ops", "turn_key"]


def turn_key(messages: list[dict[str, Any]], turn_at: datetime, thread_id: str | None) -> str:
    """One key per turn: its thread, time and messages."""
    payload = json.dumps([thread_id, utc_iso(turn_at), messages], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def fallback_ops(user_id: str, profile: str, thread_id: str | None, agent_id: str | None,
                 messages: Sequence[BaseMessage], now: datetime,
                 proposed: Sequence[MemoryOperation]) -> list[Any]:
    """The op keeping the turn for re-extraction when ``proposed`` came from a fallback;
    none otherwise. Add it to the batch that applies the turn."""
    extractor = fallback_label(proposed)
    if extractor is None:
        return []
    dumped = messages_to_dict(list(messages))
    return [mops.RecordFallbackOp(user_id, turn_key(dumped, now, thread_id), profile, dumped,
                                  now, extractor, thread_id, agent_id)]
