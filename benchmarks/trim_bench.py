"""Benchmark: per-turn overhead of working-memory trimming on a 200-turn thread.

One thread of 200 turns (human 40-120 words, assistant 80-250 words, every 5th turn a
tool call with a 150-word result), trimmed every turn to the default budget (12,000
tokens, o200k_base, at least 3 turns), as ``load_memory`` does. Per turn it times:

* ``plan``: ``langmem_layer.working.trim.plan_trim`` alone (pure: token counting and
  LangChain's ``trim_messages``), on the thread as the checkpointer would hold it;
* ``handoff``: queuing the dropped turns for extraction in their own transaction on
  the embedded PostgreSQL (an upper bound: in ``load_memory`` they ride in the
  recall's round trip), over the turns that dropped something;
* ``load_thread``: the whole ``load_memory`` work (plan, handoff, thread stamp,
  recall, recent history; full-text recall, no embedding model) for context.

Run:  .venv/bin/python benchmarks/trim_bench.py [--turns 200] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
from common import add_noise_option, header, percentile
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from psycopg.conninfo import make_conninfo

from langmem_layer import MemoryLayer, MemorySettings, PostgresMemoryStore
from langmem_layer.store.embedded import embedded_uri
from langmem_layer.working.trim import gather, handoff, plan_trim

DB = "langmem_trim_bench"
VOCAB = ["memory", "budget", "thread", "turn", "user", "agent", "tool", "result", "token",
         "window", "context", "extraction", "queue", "checkpoint", "session", "meeting",
         "travel", "lisbon", "coffee", "project", "deadline", "report", "review", "schedule",
         "weather", "music", "garden", "kitchen", "recipe", "invoice", "flight"]


def words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(lo, hi)))


def make_turns(n: int, seed: int = 1) -> list[list[BaseMessage]]:
    rng = random.Random(seed)
    turns: list[list[BaseMessage]] = []
    for i in range(n):
        human = HumanMessage(f"turn {i}: " + words(rng, 40, 120), id=f"h{i}")
        if i % 5 == 4:
            call = {"id": f"c{i}", "name": "search", "args": {"q": words(rng, 3, 6)}}
            turns.append([human, AIMessage("", tool_calls=[call], id=f"t{i}"),
                          ToolMessage(words(rng, 150, 150), tool_call_id=f"c{i}", id=f"r{i}"),
                          AIMessage(words(rng, 80, 250), id=f"a{i}")])
        else:
            turns.append([human, AIMessage(words(rng, 80, 250), id=f"a{i}")])
    return turns





def line(name: str, values: list[float]) -> str:
    return (f"{name:<12} n={len(values):>3}  p50 {percentile(values, 50):7.2f} ms  "
            f"p95 {percentile(values, 95):7.2f} ms  mean {statistics.fmean(values):7.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--data-dir", default=".langmem",
                        help="embedded PostgreSQL data dir (a database of its own is made)")
    add_noise_option(parser)
    args = parser.parse_args()
    header("trim_bench", allow_noisy=args.allow_noisy)

    base = embedded_uri(args.data_dir)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DB}")
    uri = make_conninfo(base, dbname=DB)
    settings = MemorySettings()  # 12,000 tokens, at least 3 turns
    turns = make_turns(args.turns)
    plan_ms: list[float] = []
    handoff_ms: list[float] = []
    load_ms: list[float] = []
    window: list[int] = []
    try:
        with PostgresMemoryStore.from_conn_string(uri, index=None) as store:
            store.setup()
            layer = MemoryLayer(store, settings=settings)
            env, user = layer.env, "bench-user"
            state: list[BaseMessage] = []
            for turn in turns:
                state.append(turn[0])  # the new human message, as load_memory sees it
                thread = uuid.uuid4().hex[:8]  # fresh keys: every handoff really inserts

                t0 = time.perf_counter()
                plan = plan_trim(state, env.counter, max_tokens=settings.history_max_tokens,
                                 min_turns=settings.history_min_turns)
                plan_ms.append((time.perf_counter() - t0) * 1000)

                if plan.dropped:
                    t0 = time.perf_counter()
                    layer.run(gather(*handoff(env, user, plan.dropped, profile=None,
                                              thread_id=thread, agent_id=None,
                                              turn_at=layer.now())))
                    handoff_ms.append((time.perf_counter() - t0) * 1000)

                t0 = time.perf_counter()
                loaded = layer.threads.load_thread(user, state, turn[0].text, thread_id="bench")
                load_ms.append((time.perf_counter() - t0) * 1000)

                state = [*loaded.trim.kept, *turn[1:]]  # the removals applied, the reply added
                window.append(plan.tokens)
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")

    print(f"trim_bench: {args.turns}-turn thread, budget {settings.history_max_tokens} "
          f"tokens ({settings.encoding}), min {settings.history_min_turns} turns; "
          f"window at load p50 {percentile(window, 50):.0f} / max {max(window)} tokens")
    print(line("plan", plan_ms))
    print(line("handoff", handoff_ms))
    print(line("load_thread", load_ms))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
