"""The procedural profile's record: its key, its text, and explicit preferences
applied at once by the write path. The weekly job that infers the rest is
``langmem_layer.jobs.procedural_profile``."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from langgraph.store.base import PutOp

from langmem_layer.flow import Flow, StoreCall
from langmem_layer.store import ops as mops
from langmem_layer.types import (
    HistoryEntry,
    Kind,
    Layer,
    MemoryRecord,
    Policy,
    Source,
    memory_namespace,
    utc_iso,
)

__all__ = ["PROFILE", "apply_explicit", "explicit_preference", "profile_key", "profile_record",
           "render"]

#: ``metadata.synthesis`` of a procedural profile.
PROFILE = "procedural_profile"
_KEYS = uuid.UUID("0f3c9a1e-2b7d-4c6a-8e5f-7a9b1c2d3e4f")

_SHORT = re.compile(r"\b(keep|make)\s+(your\s+|the\s+)?(answers?|replies|responses)\s+"
                    r"(short|brief|concise)|\b(shorter|briefer|more concise)\s+(answers?|"
                    r"replies|responses)|\bbe\s+(brief|concise)\b|\btoo long\b", re.I)
_LONG = re.compile(r"\b(more detail(ed)?|longer|more thorough)\s*(answers?|replies|"
                   r"responses|please)?\b|\bgo into (more )?detail\b|\btoo short\b", re.I)


def profile_key(user_id: str, profile: str) -> str:
    """The key of the user's procedural profile in ``profile``."""
    return str(uuid.uuid5(_KEYS, f"{user_id}:{profile}"))


def explicit_preference(text: str) -> dict[str, str] | None:
    """The profile change an explicit request states, e.g. ``{"answer_length": "short"}``
    for "keep answers short"; None when it states none."""
    if _SHORT.search(text):
        return {"answer_length": "short"}
    if _LONG.search(text):
        return {"answer_length": "detailed"}
    return None


def render(meta: dict[str, Any]) -> str:
    """The profile's text, from its fields; explicit preferences first."""
    parts: list[str] = []
    explicit = meta.get("explicit") or {}
    length = explicit.get("answer_length") or meta.get("answer_length")
    if length:
        how = {"short": "keep answers short", "detailed": "give detailed answers",
               "medium": "answers of a few paragraphs suit"}.get(length, length)
        parts.append(f"answers: {how}" + (" (asked explicitly)"
                                          if explicit.get("answer_length") else ""))
    if meta.get("topics"):
        parts.append("most-discussed topics: " + ", ".join(meta["topics"]))
    if meta.get("session_minutes") is not None:
        parts.append(f"sessions typically ~{meta['session_minutes']} min")
    if meta.get("time_of_day"):
        parts.append(f"mostly in the {meta['time_of_day']} (UTC)")
    if meta.get("follow_up_rate") is not None:
        parts.append(f"follows up in {round(100 * meta['follow_up_rate'])}% of sessions")
    return "How this user works with you: " + ("; ".join(parts) or "no pattern yet") + "."


def profile_record(previous: MemoryRecord | None, meta: dict[str, Any], now: datetime,
            reason: str) -> MemoryRecord:
    content = render(meta)
    if previous is None:
        return MemoryRecord(content=content, kind=Kind.PROTOCOL, layer=Layer.PROCEDURAL,
                            policy=Policy.ADAPT, pinned=True, confidence=0.8, salience=0.5,
                            occurred_at=now, last_accessed_at=now,
                            source=Source(agent_id="job:procedural-profile"),
                            metadata={"synthesis": PROFILE, **meta})
    history = list(previous.history)
    if content != previous.content:
        history.append(HistoryEntry(at=now, event="content", old=previous.content, new=content,
                                    reason=reason))
    return previous.model_copy(update={"content": content, "content_hash": "",
                                       "history": history, "occurred_at": now,
                                       "metadata": {**previous.metadata, **meta}})


def apply_explicit(user_id: str, profile: str, change: dict[str, str], now: datetime
                   ) -> Flow[MemoryRecord]:
    """Apply an explicit preference to the profile at once (one read, one write)."""
    key = profile_key(user_id, profile)
    (item,) = yield StoreCall([mops.FindMemoryOp(user_id, key)])
    previous = MemoryRecord.model_validate(item.value) if item is not None else None
    meta = dict(previous.metadata) if previous is not None else {}
    explicit = {**(meta.get("explicit") or {}), **change, "at": utc_iso(now)}
    record = profile_record(previous, {**meta, "explicit": explicit}, now,
                     "the user stated a preference")
    record = MemoryRecord.model_validate(record.model_dump())
    yield StoreCall([mops.AsOfOp(
        user_id, (PutOp(memory_namespace(user_id, profile), key, record.to_value()),), now)])
    return record


