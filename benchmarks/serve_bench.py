"""A served turn, ours beside what a user would write with LangGraph's store alone.

Ours: ``memory_lifespan`` as the HTTP app serves it (the offline chat model, the rule
extractor, no embedding model, its extraction worker, its frozen start-up heap: see
``frozen_heap``), one ``graph.ainvoke`` per turn. The lifespan unfreezes on exit, so
the LangGraph side runs with the collector as the process has it.
Beside it, on the same PostgreSQL in the same run: LangGraph's ``AsyncPostgresStore``
(a pool of ``--pool-size``) and a three-node graph: ``asearch`` of the user's namespace
(limit 10) into the prompt, the same offline model, ``aput`` of the human text.

For 1, 8 and 50 concurrent users (``--users``), each side runs ``--duration`` seconds:
every user sends the next line of a ten-line script as soon as its previous turn is
answered. Printed per row: turns/s, p50/p95 latency, and the statements sent per turn,
counted at psycopg's ``execute`` by who sent them (the library, LangGraph's store, a
checkpointer); ours counts until the lifespan has drained the extraction queue, so its
extraction is included. The ratio column is ours / LangGraph's turns per second.
Extraction runs behind the turns: the row also says how many turns it had not caught up
with when the clock stopped, how long the exit's drain took, and the rate counting that
time too, so a worker that falls behind cannot pass for a fast turn.

``--embeddings hash`` gives both sides the same deterministic embedding model (the
benchmarks' hashed bag of words, 384 dimensions, each text embedded once and cached), as
a deployment with vectors runs: ours recalls by vector too, LangGraph's node searches
with the human text as its query. The default, ``none``, is the issue's set-up.

Bounded and local: loopback PostgreSQL (the embedded one in a temporary directory, or
``--database-url``), at most ``--max-turns`` turns per row and side.

    .venv/bin/python benchmarks/serve_bench.py [--users 1,8,50] [--duration 20]
        [--embeddings none|hash]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
from common import add_noise_option, header, percentile
from served_app import database, drive, served_graph

from langmem_layer.store.driver import CONTROL

_WHO = (("/langmem_layer/", "library"), ("/langgraph/store/", "langgraph store"),
        ("/langgraph/checkpoint/", "checkpointer"))
_SKIP = ("/psycopg/", "/psycopg_pool/", "/serve_bench.py")


class Statements:
    """Counts statements sent through psycopg, by the package whose code sent them."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def record(self, query: object) -> None:
        # Transaction control the library's stores send in their pipelines is not
        # counted: LangGraph's store sends it through psycopg's transaction(), unseen.
        if query in CONTROL:
            return
        frame = sys._getframe(2)
        while frame is not None and any(s in frame.f_code.co_filename for s in _SKIP):
            frame = frame.f_back  # type: ignore[assignment]
        name = frame.f_code.co_filename if frame is not None else ""
        who = next((w for part, w in _WHO if part in name), "other")
        with self.lock:
            self.counts[who] += 1

    def install(self) -> None:
        """Wrap ``execute`` and ``executemany`` of psycopg's cursors, sync and async."""
        for name in ("execute", "executemany"):
            self._wrap(psycopg.Cursor, name, is_async=False)
            self._wrap(psycopg.AsyncCursor, name, is_async=True)

    def _wrap(self, cls: type, name: str, *, is_async: bool) -> None:
        original = getattr(cls, name)

        def call(cur: Any, query: Any, *a: Any, **k: Any) -> Any:
            self.record(query)
            return original(cur, query, *a, **k)

        async def acall(cur: Any, query: Any, *a: Any, **k: Any) -> Any:
            self.record(query)
            return await original(cur, query, *a, **k)

        setattr(cls, name, acall if is_async else call)

    def take(self) -> Counter[str]:
        with self.lock:
            out, self.counts = self.counts, Counter()
        return out


STATEMENTS = Statements()


def _embeddings(args: argparse.Namespace) -> Any:
    """The embedding model of ``--embeddings``, or ``None``."""
    if args.embeddings == "none":
        return None
    from workload import CachedEmbeddings, HashEmbedder

    embedder = HashEmbedder()
    return CachedEmbeddings({}, embedder, embedder.name)


async def _ours(uri: str, users: int, args: argparse.Namespace, run: str) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    from langmem_layer.store.ops import PendingOp

    embed = _embeddings(args)
    index = None if embed is None else {"embed": embed, "dims": embed.compute.dims,
                                        "model_id": embed.model}
    STATEMENTS.take()
    async with served_graph(uri, index=index, pool_size=args.pool_size) as service:
        STATEMENTS.take()  # the setup's
        graph = service.graph

        async def turn(u: int, text: str) -> None:
            await graph.ainvoke({"messages": [HumanMessage(text)]}, {
                "configurable": {"user_id": f"{run}-ours-{users}-{u}", "thread_id": f"t{u}"}})

        latencies, elapsed, errors = await drive(users, args.duration, args.max_turns, turn)
        # What extraction had not caught up with when the clock stopped: the exit drains
        # it, and the sustained rate counts that time too.
        pending = await service.store.abatch(
            [PendingOp(f"{run}-ours-{users}-{u}") for u in range(users)])
        backlog = sum(len(p) for p in pending)
        exit_at = time.perf_counter()
    drained = time.perf_counter() - exit_at
    # The lifespan drained the extraction queue on exit: the turns' extraction is counted.
    return {"latencies": latencies, "elapsed": elapsed, "errors": errors,
            "statements": STATEMENTS.take(), "backlog": backlog, "drained": drained}


async def _langgraph(uri: str, users: int, args: argparse.Namespace, run: str
                     ) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.store.postgres.aio import AsyncPostgresStore

    from langmem_layer.offline_chat import OfflineChatModel

    model = OfflineChatModel()
    embed = _embeddings(args)
    index = None if embed is None else {"embed": embed, "dims": embed.compute.dims,
                                        "fields": ["text"]}
    async with AsyncPostgresStore.from_conn_string(
            uri, pool_config={"min_size": 1, "max_size": args.pool_size},
            index=index) as store:  # type: ignore[arg-type]
        await store.setup()

        async def recall(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
            user = config["configurable"]["user_id"]
            query = state["messages"][-1].text if embed is not None else None
            found = await store.asearch(("memories", user), query=query, limit=10)
            notes = "\n".join(f"- {i.value['text']}" for i in found)
            return {"messages": [SystemMessage(f"What you remember:\n{notes}")]}

        async def agent(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        async def save(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
            user = config["configurable"]["user_id"]
            human = next(m for m in reversed(state["messages"]) if m.type == "human")
            await store.aput(("memories", user), uuid.uuid4().hex, {"text": human.text})
            return {}

        builder = StateGraph(MessagesState)
        builder.add_node("recall", recall)
        builder.add_node("agent", agent)
        builder.add_node("save", save)
        builder.add_edge(START, "recall")
        builder.add_edge("recall", "agent")
        builder.add_edge("agent", "save")
        graph = builder.compile(store=store)
        STATEMENTS.take()

        async def turn(u: int, text: str) -> None:
            await graph.ainvoke({"messages": [HumanMessage(text)]},
                                {"configurable": {"user_id": f"{run}-lg-{users}-{u}"}})

        latencies, elapsed, errors = await drive(users, args.duration, args.max_turns, turn)
    return {"latencies": latencies, "elapsed": elapsed, "errors": errors,
            "statements": STATEMENTS.take()}


def _row(name: str, r: dict[str, Any]) -> tuple[str, float]:
    ms = [1000 * x for x in r["latencies"]]
    n = len(ms)
    rate = n / r["elapsed"] if r["elapsed"] else float("nan")
    per = {k: v / max(1, n) for k, v in sorted(r["statements"].items())}
    stmts = ", ".join(f"{k} {v:.1f}" for k, v in per.items()) or "none"
    p50 = percentile(ms, 50) if ms else float("nan")
    p95 = percentile(ms, 95) if ms else float("nan")
    return (f"    {name:<28} {n:>6} turns {rate:7.1f}/s  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms"
            f"  errors {r['errors']}  statements/turn: {stmts}"), rate


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--users", default="1,8,50", help="comma-separated concurrent users")
    p.add_argument("--duration", type=float, default=20.0, help="seconds per row and side")
    p.add_argument("--max-turns", type=int, default=100_000, help="per row and side")
    p.add_argument("--pool-size", type=int, default=8)
    p.add_argument("--database-url", default=None)
    p.add_argument("--embeddings", choices=("none", "hash"), default="none",
                   help="both sides' embedding model (hash: deterministic, cached)")
    add_noise_option(p)
    args = p.parse_args(argv)
    header("serve_bench", allow_noisy=args.allow_noisy)
    STATEMENTS.install()
    run = uuid.uuid4().hex[:6]
    failed = False
    with database(args.database_url, "langmem-serve-bench-") as uri:
        for users in (int(u) for u in args.users.split(",")):
            lg = asyncio.run(_langgraph(uri, users, args, run))
            ours = asyncio.run(_ours(uri, users, args, run))
            print(f"  {users} user{'s' if users > 1 else ''}, {args.duration:.0f} s each"
                  + ("" if args.embeddings == "none" else f", embeddings {args.embeddings}"))
            line_lg, rate_lg = _row("LangGraph store + node", lg)
            line_ours, rate_ours = _row("langmem_layer (served)", ours)
            print(line_lg)
            print(line_ours)
            ratio = rate_ours / rate_lg if rate_lg else float("nan")
            print(f"    ours / LangGraph turns/s: {ratio:.2f}x", flush=True)
            sustained = len(ours["latencies"]) / (ours["elapsed"] + ours["drained"])
            of_lg = sustained / rate_lg if rate_lg else float("nan")
            print(f"    extraction: {ours['backlog']} turns still queued when the clock stopped, "
                  f"drained in {ours['drained']:.1f} s at exit; counting that time, "
                  f"{sustained:.1f} turns/s = {of_lg:.2f}x", flush=True)
            failed = failed or bool(lg["errors"] or ours["errors"])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
