"""The serving stack's own cost: a one-node graph in process, through LangServe, and bare.

The HTTP overhead ``http_bench.py`` reports is the memory agent's served CPU per turn
over its CPU in process. Part of it is the stack's, whatever the graph: this measures
that part with a graph that does nothing (one node returning a fixed message), in three
ways, the same requests each:

* in process: ``graph.ainvoke`` in this process;
* LangServe: the graph behind ``langmem_layer.server.http.agent_route.add_agent_routes``
  (the routes the app serves the agent with: LangServe's ``/invoke``, an authentication
  dependency, the run-as-caller config), ``POST /agent/invoke``;
* FastAPI: the same graph behind a bare FastAPI route (JSON in, the messages out).

The two served ones run in a uvicorn subprocess on 127.0.0.1 (``--users`` concurrent
clients, ``--requests`` requests after 200 to warm up); each prints the serving process's
CPU per request (``/proc``; the load client's is not counted), and the difference to the
in-process run is what serving one request costs before the graph does any work. Against
an agent turn of ``c`` ms in process, an overhead ratio under ``(c + floor) / c`` is out of
reach on this stack.

    .venv/bin/python benchmarks/serving_floor.py [--users 10] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from common import add_noise_option, header
from fastapi import FastAPI, Request
from served_app import HOST, free_port, wait_ready

ROOT = Path(__file__).resolve().parent.parent
WARM_UP = 200


def _graph() -> Any:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    def node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("ok")]}

    builder = StateGraph(MessagesState)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    return builder.compile()


@dataclass
class _Caller:
    user_id: str = "bench"
    admin: bool = False


def _app(route: str) -> Any:
    graph, app = _graph(), FastAPI()
    if route == "langserve":
        from langmem_layer.server.http.agent_route import add_agent_routes

        def principal(request: Request) -> _Caller:
            return _Caller()

        add_agent_routes(app, graph, principal_dependency=principal, playground=False)
    else:
        @app.post("/agent/invoke")
        async def invoke(request: Request) -> dict[str, Any]:
            out = await graph.ainvoke((await request.json())["input"])
            return {"output": {"messages": [m.model_dump() for m in out["messages"]]}}
    return app


def __getattr__(name: str) -> Any:
    # ``uvicorn serving_floor:app``: the route named in FLOOR_ROUTE.
    if name == "app":
        return _app(os.environ["FLOOR_ROUTE"])
    raise AttributeError(name)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


BODY = {"input": {"messages": [{"type": "human", "content": "hi"}]}}


async def _drive(base: str, users: int, requests: int, pid: int) -> float:
    """Server CPU seconds per request over ``requests`` requests from ``users`` clients."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        async def user(n: int) -> None:
            for _ in range(n):
                (await client.post("/agent/invoke", json=BODY)).raise_for_status()

        await asyncio.gather(*(user(WARM_UP // users) for _ in range(users)))
        before = _cpu_seconds(pid)
        await asyncio.gather(*(user(requests // users) for _ in range(users)))
        return (_cpu_seconds(pid) - before) / (requests // users * users)


def _served(route: str, users: int, requests: int) -> float:
    port = free_port()
    env = {**os.environ, "FLOOR_ROUTE": route, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "serving_floor:app", "--host", HOST, "--port",
         str(port), "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(f"http://{HOST}:{port}", proc)
        return asyncio.run(_drive(f"http://{HOST}:{port}", users, requests, proc.pid))
    finally:
        proc.terminate()
        proc.wait(30)


async def _in_process(users: int, requests: int) -> float:
    from langchain_core.messages import HumanMessage

    graph = _graph()

    async def user(n: int) -> None:
        for _ in range(n):
            await graph.ainvoke({"messages": [HumanMessage("hi")]})

    await asyncio.gather(*(user(WARM_UP // users) for _ in range(users)))
    before = time.process_time()
    await asyncio.gather(*(user(requests // users) for _ in range(users)))
    return (time.process_time() - before) / (requests // users * users)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--users", type=int, default=10, help="concurrent clients")
    p.add_argument("--requests", type=int, default=2000, help="per way, after the warm-up")
    add_noise_option(p)
    args = p.parse_args(argv)
    header("serving_floor", allow_noisy=args.allow_noisy)
    inside = asyncio.run(_in_process(args.users, args.requests))
    print(f"  one-node graph, {args.users} concurrent, {args.requests} requests each way; "
          "CPU per request of the serving process")
    print(f"    in process (graph.ainvoke)          {1000 * inside:6.2f} ms")
    for route, name in (("langserve", "LangServe (add_agent_routes)"),
                        ("fastapi", "bare FastAPI route")):
        served = _served(route, args.users, args.requests)
        print(f"    {name:<36}{1000 * served:6.2f} ms   the stack's own: "
              f"{1000 * (served - inside):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
