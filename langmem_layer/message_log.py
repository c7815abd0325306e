"""The per-user message log across threads (the long-term tier).

``extract_after_turn`` logs each finished turn's human and assistant messages (tool
traffic and system prompts are not logged) in the same transaction that queues the
turn for extraction. ``load_memory`` reads the user's newest messages from their
OTHER threads (same profile, last 24 h, at most 20) in its round trip, and
``assemble_context`` adds them to the memory block after the memories, with whatever
budget the memories left (the fourth priority), leaving out what the active thread's
short-term window (``short_term``, from the graph state) already shows; the block
is rendered by ``langmem_layer.read.recall.context_block``. The session sweeper
deletes messages older than the retention (90 days).

Why our own table and not ``langchain_postgres.PostgresChatMessageHistory``: its table
has no user column (a session id that must be a UUID, one history per session), so
"this user's other threads" is not a query it can answer, and none of its statements
could bind the user; it stamps rows with the database's ``now()`` (tests could not
move time); it knows no retention; and it writes on its own connection, outside the
transaction that queues the turn.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langmem_layer.flow import Env, Flow, StoreCall, require_user
from langmem_layer.sanitize import clean
from langmem_layer.store import ops as mops
from langmem_layer.tokens import TokenCounter

__all__ = [
    "clear", "log_op", "recent_history", "recent_lines", "recent_op", "short_term",
]

_ROLES: dict[type[BaseMessage], str] = {HumanMessage: "user", AIMessage: "assistant"}
_WHITESPACE = re.compile(r"\s+")


def _role(message: BaseMessage) -> str | None:
    for kind, role in _ROLES.items():
        if isinstance(message, kind):
            return role
    return None


def log_op(env: Env, user_id: str, messages: Sequence[BaseMessage], *, profile: str | None,
           thread_id: str | None, now: datetime) -> mops.LogMessagesOp | None:
    """The op logging a turn's human and assistant text messages (None: nothing to log).

    NUL characters are removed (PostgreSQL cannot store them; see
    ``langmem_layer.sanitize``).
    """
    rows = []
    for n, m in enumerate(messages):
        role, text = _role(m), clean(m.text).strip()
        if role is None or not text:
            continue  # tool calls, tool results, system prompts: not conversation
        mid = clean(m.id or "") or "sha:" + hashlib.sha256(
            f"{now.isoformat()}|{n}|{role}|{text}".encode()).hexdigest()[:32]
        rows.append({"message_id": mid, "role": role, "text": text})
    if not rows:
        return None
    return mops.LogMessagesOp(require_user(user_id), thread_id or "",
                              profile or env.settings.default_profile, rows, now)


def recent_op(env: Env, user_id: str, *, profile: str | None, thread_id: str | None,
              now: datetime, hours: float | None = None,
              limit: int | None = None) -> mops.RecentMessagesOp:
    """The op reading the user's recent messages outside ``thread_id`` (settings' defaults)."""
    st = env.settings
    since = now - timedelta(hours=st.recent_history_hours if hours is None else hours)
    return mops.RecentMessagesOp(
        require_user(user_id), profile or st.default_profile, since,
        st.recent_history_limit if limit is None else limit, thread_id or "")


def recent_history(env: Env, user_id: str, *, profile: str | None, thread_id: str | None,
                   now: datetime, hours: float | None = None,
                   limit: int | None = None) -> Flow[list[mops.LoggedMessage]]:
    """The user's logged messages of the last ``hours`` outside one thread, oldest first."""
    (found,) = yield StoreCall([recent_op(env, user_id, profile=profile, thread_id=thread_id,
                                          now=now, hours=hours, limit=limit)])
    return found


def clear(user_id: str, *, thread_id: str | None = None) -> Flow[int]:
    """Delete the user's logged messages (one thread's, or all); returns the count."""
    (deleted,) = yield StoreCall([mops.ClearMessagesOp(require_user(user_id), thread_id)])
    return deleted


def short_term(messages: Sequence[BaseMessage], n: int) -> list[BaseMessage]:
    """The last ``n`` messages of the thread (the short-term tier), from state.

    No database round trip: the checkpointer already loaded them. A window that would
    start with tool results whose call fell outside it starts after them instead. The
    memory block leaves out recent history this window already shows.
    """
    if n <= 0:
        return []
    window = list(messages[-n:])
    while window and isinstance(window[0], ToolMessage):
        window.pop(0)
    return window


def recent_lines(recent: Sequence[mops.LoggedMessage], counter: TokenCounter, *,
                 max_line_tokens: int, exclude_texts: Collection[str] = ()) -> list[str]:
    """Render logged messages as block lines ``user: ...`` / ``assistant: ...``, oldest first.

    Each is cut to ``max_line_tokens``; a message whose text is already in the active
    thread's short-term window (``exclude_texts``) is skipped.
    """
    seen = {_WHITESPACE.sub(" ", t).strip() for t in exclude_texts}
    lines = []
    for m in recent:
        text = _WHITESPACE.sub(" ", m.text).strip()
        if not text or text in seen:
            continue
        lines.append(f"{m.role}: {counter.truncate(text, max_line_tokens)}")
    return lines

