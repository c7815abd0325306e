"""Working memory: the thread the agent sees, trimmed to a token budget.

A LangGraph checkpointer holds the thread (see ``langmem_layer.working.sessions``). Before
the agent sees it, ``load_memory`` trims it: whole turns leave from the oldest end until
the rest fits ``MemorySettings.history_max_tokens`` (tiktoken-counted), but the last
``history_min_turns`` turns always stay. A turn starts at a human message; a human
message that sits between a tool call and its result never starts one, so a tool call
and its result always leave (or stay) together.

Every turn that leaves is queued for episodic extraction BEFORE the node returns its
``RemoveMessage``\\ s, in the same transaction as the turn's recall. Each turn is queued
under its own key (thread id + the turn's last message id, the key ``extract_after_turn``
uses too), so it is queued exactly once however often trimming runs: after a crash
between the enqueue and the checkpoint, the next run trims again (possibly more turns,
since a new one arrived) and the turns queued before are no-ops.

Everything here is free of I/O: ``plan_trim`` is a pure function and the flows
yield store requests that ``MemoryLayer`` executes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from langmem_layer.flow import Env, Flow, StoreCall, require_user
from langmem_layer.message_log import log_op, recent_op
from langmem_layer.read import recall as read
from langmem_layer.store import ops as mops
from langmem_layer.tokens import TokenCounter
from langmem_layer.types import Recalled
from langmem_layer.write import apply as write

__all__ = [
    "TrimPlan",
    "WorkingLoad",
    "gather",
    "load_thread",
    "ops_flow",
    "plan_trim",
    "record_turn",
    "split_turns",
    "turn_dedupe_key",
    "turn_starts",
]


@dataclass(frozen=True)
class TrimPlan:
    """What trimming keeps and what leaves.

    Attributes:
        kept: The window the agent sees: leading system messages, then whole turns.
        dropped: The turns that leave, oldest first; each goes to extraction first.
        removals: The state update removing them (``RemoveMessage`` by id; a
            remove-all followed by ``kept`` when a dropped message has no id).
        tokens: Tokens of ``kept`` as ``TokenCounter.count_messages`` counts them.
        over_budget: ``kept`` exceeds the budget because the minimum turns do.
    """

    kept: list[BaseMessage]
    dropped: list[list[BaseMessage]] = field(default_factory=list)
    removals: list[RemoveMessage] = field(default_factory=list)
    tokens: int = 0
    over_budget: bool = False

    @property
    def dropped_messages(self) -> list[BaseMessage]:
        """The dropped turns' messages, oldest first."""
        return [m for turn in self.dropped for m in turn]


def _paired(messages: Sequence[BaseMessage]) -> list[bool]:
    """For each index: whether it lies after a tool call and at or before its result."""
    inside = [False] * len(messages)
    call_at: dict[str, int] = {}
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage):
            for call in m.tool_calls:
                if call.get("id"):
                    call_at[str(call["id"])] = i
        elif isinstance(m, ToolMessage) and (j := call_at.get(m.tool_call_id)) is not None:
            for k in range(j + 1, i + 1):
                inside[k] = True
    return inside


def turn_starts(messages: Sequence[BaseMessage]) -> list[int]:
    """Indices where turns start: 0, then each human message not inside a tool exchange.

    An unanswered tool call blocks nothing: only a call with its result later in the
    list makes the human messages between them part of the call's turn.
    """
    inside = _paired(messages)
    return [i for i, m in enumerate(messages)
            if i == 0 or (isinstance(m, HumanMessage) and not inside[i])]


def split_turns(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """The messages cut into turns (see ``turn_starts``)."""
    bounds = [*turn_starts(messages), len(messages)]
    return [list(messages[a:b]) for a, b in pairwise(bounds)]


#: Token counts of messages seen before, by identity and content: the checkpointer hands
#: back the same messages every turn, and counting ~12,000 tokens again costs ~1.5 ms.
_COSTS: dict[tuple[Any, ...], int] = {}
_COSTS_MAX = 100_000


def _cost(counter: TokenCounter, message: BaseMessage) -> int:
    if not message.id:
        return counter.count_messages([message])
    calls = message.tool_calls if isinstance(message, AIMessage) else None
    key = (counter.encoding_name, counter.exact, message.id, message.type, message.name,
           hash(repr(message.content)), hash(repr(calls)) if calls else None)
    cost = _COSTS.get(key)
    if cost is None:
        if len(_COSTS) >= _COSTS_MAX:  # bounded; rebuilt from the live threads
            _COSTS.clear()
        cost = _COSTS[key] = counter.count_messages([message])
    return cost


def plan_trim(messages: Sequence[BaseMessage], counter: TokenCounter, *, max_tokens: int,
              min_turns: int = 3) -> TrimPlan:
    """Which turns leave so that the thread fits ``max_tokens``. Pure.

    Leading system messages always stay and count against the budget. The budget cut
    is LangChain's ``trim_messages`` (strategy ``last``, starting on a human message)
    over per-message token counts; it is then moved forward to a turn start, and back
    to keep at least ``min_turns`` turns.

    Args:
        messages: The thread, oldest first.
        counter: Counts each message as ``count_messages`` does (sums are exact).
        max_tokens: The budget.
        min_turns: Turns kept even when they exceed the budget.

    Returns:
        The ``TrimPlan``; nothing is dropped when everything fits.
    """
    head_n = 0
    while head_n < len(messages) and isinstance(messages[head_n], SystemMessage):
        head_n += 1
    costs = [_cost(counter, m) for m in messages]
    head, body = list(messages[:head_n]), list(messages[head_n:])
    head_cost, body_costs = sum(costs[:head_n]), costs[head_n:]
    starts = turn_starts(body)
    total = head_cost + sum(body_costs)
    if total <= max_tokens or len(starts) <= min_turns:
        return TrimPlan(list(messages), tokens=total, over_budget=total > max_tokens)
    cost_of = {id(m): c for m, c in zip(body, body_costs, strict=True)}
    fitting = trim_messages(
        body, max_tokens=max(0, max_tokens - head_cost), strategy="last", start_on="human",
        token_counter=lambda ms: sum(cost_of[id(m)] for m in ms), allow_partial=False,
    )
    budget_cut = len(body) - len(fitting)
    cut = min(next((s for s in starts if s >= budget_cut), len(body)), starts[-min_turns])
    if cut == 0:
        return TrimPlan(list(messages), tokens=total, over_budget=True)
    bounds = [s for s in starts if s < cut] + [cut]
    dropped = [body[a:b] for a, b in pairwise(bounds)]
    kept = head + body[cut:]
    gone = body[:cut]
    if all(m.id for m in gone):
        removals = [RemoveMessage(id=str(m.id)) for m in gone]
    else:  # RemoveMessage needs an id: replace the whole list instead
        # Imported here: langgraph.graph's package brings the whole graph runtime.
        from langgraph.graph.message import REMOVE_ALL_MESSAGES

        removals = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]  # type: ignore[list-item]
    tokens = head_cost + sum(body_costs[cut:])
    return TrimPlan(kept, dropped, removals, tokens, tokens > max_tokens)


def turn_dedupe_key(thread_id: str | None, turn: Sequence[BaseMessage]) -> str | None:
    """The extraction-queue key of a turn handed over by trimming or session close.

    ``None`` when every message has an id: ``langmem_layer.write.apply.enqueue_turn``'s
    default key (thread + last message id) applies, the one ``extract_after_turn``
    used when the turn ended, so a turn queued then is not queued again. Otherwise
    a key from the turn's content, stable across runs.
    """
    if all(m.id for m in turn):
        return None
    payload = json.dumps([[m.type, m.text] for m in turn], ensure_ascii=False)
    return f"{thread_id or '-'}:text:{hashlib.sha256(payload.encode()).hexdigest()[:32]}"


# -- running flows together -------------------------------------------------------------


def ops_flow(ops: Sequence[Any]) -> Flow[list[Any]]:
    """A flow that runs ``ops`` in one store call and returns their results."""
    if not ops:
        return []
    results = yield StoreCall(list(ops))
    return results


def gather(*parts: Flow[Any]) -> Flow[list[Any]]:
    """Run flows side by side; each round's store calls go out as ONE batch.

    So extra work rides in the same round trip and transaction as a flow's own
    (trimming's enqueues with the turn's recall). An extractor call goes alone. When
    a merged batch fails, the error is raised inside each flow of it in turn; the
    first that does not handle it ends the whole.

    Returns:
        Each flow's result, in order.
    """
    results: list[Any] = [None] * len(parts)
    pending: dict[int, Any] = {}

    def step(i: int, advance: Callable[[], Any]) -> None:
        try:
            pending[i] = advance()
        except StopIteration as stop:
            pending.pop(i, None)
            results[i] = stop.value

    for i, part in enumerate(parts):
        step(i, part.__next__)
    while pending:
        batch = [i for i, request in pending.items() if isinstance(request, StoreCall)]
        if not batch:
            i = next(iter(pending))
            try:
                reply = yield pending[i]
            except Exception as e:
                step(i, lambda i=i, e=e: parts[i].throw(e))  # type: ignore[misc]
            else:
                step(i, lambda i=i, reply=reply: parts[i].send(reply))  # type: ignore[misc]
            continue
        calls = [pending[i] for i in batch]
        try:
            replies = yield StoreCall([op for call in calls for op in call.ops])
        except Exception as e:
            for i in batch:
                step(i, lambda i=i, e=e: parts[i].throw(e))  # type: ignore[misc]
            continue
        at = 0
        for i, call in zip(batch, calls, strict=True):
            chunk = list(replies[at:at + len(call.ops)])
            at += len(call.ops)
            step(i, lambda i=i, chunk=chunk: parts[i].send(chunk))  # type: ignore[misc]
    return results


# -- the flows behind the nodes ---------------------------------------------------------


@dataclass
class WorkingLoad:
    """What ``load_memory`` got in one round trip.

    Attributes:
        recalled: Ranked memories for the turn.
        trim: The trim plan; its ``removals`` go into the node's state update.
        enqueued: Queue entry ids of the dropped turns (None: queued before).
        recent: The user's messages from other threads, oldest first.
    """

    recalled: list[Recalled]
    trim: TrimPlan
    enqueued: list[int | None] = field(default_factory=list)
    recent: list[mops.LoggedMessage] = field(default_factory=list)


def handoff(env: Env, user_id: str, turns: Sequence[Sequence[BaseMessage]], *,
            profile: str | None, thread_id: str | None, agent_id: str | None,
            turn_at: datetime) -> list[Flow[int | None]]:
    """One enqueue flow per turn leaving working memory (see ``turn_dedupe_key``)."""
    return [write.enqueue_turn(env, user_id, turn, profile=profile, thread_id=thread_id,
                               agent_id=agent_id, now=turn_at,
                               dedupe_key=turn_dedupe_key(thread_id, turn))
            for turn in turns if turn]


def load_thread(env: Env, user_id: str, messages: Sequence[BaseMessage], query: str | None,
                *, profile: str | None, thread_id: str | None, agent_id: str | None,
                now: datetime, limit: int, reinforce: bool = True) -> Flow[WorkingLoad]:
    """Trim the thread, hand dropped turns to extraction, recall, read recent history.

    The enqueues, the thread's activity stamp, the recall and the recent-history read
    share one round trip; the caller removes the dropped messages only after it.
    ``reinforce=False`` leaves the recalled memories' reinforcement to the caller
    (the nodes write it with the turn, see ``record_turn``).
    """
    user_id = require_user(user_id)
    st = env.settings
    plan = plan_trim(messages, env.counter, max_tokens=st.history_max_tokens,
                     min_turns=st.history_min_turns)
    extra: list[Any] = []
    recent = (recent_op(env, user_id, profile=profile, thread_id=thread_id, now=now)
              if st.recent_history_limit else None)
    if thread_id:
        stamp = mops.TouchThreadOp(user_id, thread_id, profile or st.default_profile,
                                   agent_id, now)
        extra.append(mops.TurnStartOp(user_id, stamp, recent) if recent is not None
                     else stamp)
    elif recent is not None:
        extra.append(recent)
    recalled, extra_results, *enqueued = yield from gather(
        read.recall(env, user_id, query, profile=profile, limit=limit, now=now,
                     reinforce=reinforce),
        ops_flow(extra),
        *handoff(env, user_id, plan.dropped, profile=profile, thread_id=thread_id,
                 agent_id=agent_id, turn_at=now),
    )
    history = extra_results[-1] if recent is not None else []
    return WorkingLoad(read.block_memories(env, recalled), plan, enqueued, list(history))


def record_turn(env: Env, user_id: str, messages: Sequence[BaseMessage], *,
                profile: str | None, thread_id: str | None, agent_id: str | None,
                now: datetime, reinforce: Sequence[str] = (),
                lease_seconds: float | None = None) -> Flow[mops.TurnRecorded]:
    """Queue a finished turn for extraction, add it to the user's message log and
    reinforce the memories recalled for it (``reinforce``, their keys).

    One statement. With ``lease_seconds`` the entry is leased as it is queued (see
    ``RecordTurnOp``).
    """
    enqueue = write.enqueue_op(env, user_id, messages, profile=profile, thread_id=thread_id,
                               agent_id=agent_id, now=now)
    log = log_op(env, user_id, messages, profile=profile, thread_id=thread_id, now=now)
    touch = mops.TouchOp(enqueue.user_id, tuple(reinforce), now) if reinforce else None
    (recorded,) = yield StoreCall([mops.RecordTurnOp(enqueue.user_id, enqueue, log, touch,
                                                     lease_seconds)])
    return recorded  # type: ignore[no-any-return]
