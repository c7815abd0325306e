"""The scripted demo `make demo` runs: two threads of one user, then a second user.

Runs offline on the embedded PostgreSQL in `.langmem/` with the local embedding model
and the rule-based extractor. With OPENAI_API_KEY (or OPENAI_BASE_URL) set it uses a
real chat model for the agent and for extraction, and OpenAI embeddings.
"""

from __future__ import annotations

import argparse
import textwrap
import time

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver

from langmem_layer import MemoryLayer, PostgresMemoryStore, build_agent_graph
from langmem_layer.environment import data_dir, database_url, settings_from_env
from langmem_layer.store.embedding.default_embedder import openai_configured

SCRIPT: list[tuple[str, str, list[str]]] = [
    ("alice", "thread-1", [
        "Hi! My name is Alice. I work at Acme Robotics and I live in Lisbon.",
        "I prefer morning meetings, and I'm allergic to peanuts.",
        "Please never mention my divorce.",
        "Remind me to call the dentist tomorrow.",
    ]),
    ("alice", "thread-2", [
        "What's my name, and where do I work?",
        "I am ordering snacks for the team. Am I allergic to anything?",
        "Actually, I work at Globex now, not Acme Robotics.",
        "Where do I work these days?",
    ]),
    ("bob", "thread-3", [
        "What's my name, and where do I work?",
    ]),
]


STUDIO_AND_PANEL = """
Open the same memory (in {data_dir}/) from the repository root:
  Panel:  make serve      (installs the server extra), then http://127.0.0.1:8000/panel
  Studio: make dev        (installs langgraph-cli in .venv-dev), then the Studio URL it
          prints, sending a key from: .venv/bin/langmem-layer keys create --user alice
  Shell:  .venv/bin/langmem-layer list alice"""


def new_lines(block: str, seen: set[str]) -> str:
    """The block's lines not in ``seen``, each under its section heading."""
    out: list[str] = []
    heading = ""
    for line in block.splitlines():
        if line.startswith("#"):
            heading = line
        elif line.startswith("- ") and line not in seen:
            if heading and heading not in out:
                out.append(heading)
            out.append(line)
    return "\n".join(out)


def show(title: str, body: str) -> None:
    print(f"  {title}:")
    print(textwrap.indent(body.strip() or "(empty)", "    "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default=str(data_dir()))
    parser.add_argument("--keep", action="store_true", help="keep memories of earlier runs")
    args = parser.parse_args()
    mode = "OpenAI" if openai_configured() else "offline (local MiniLM + rule extractor)"
    print(f"langmem_layer demo — {mode}; database: embedded PostgreSQL in {args.data_dir}/")
    uri = database_url(data_dir=args.data_dir)
    with PostgresMemoryStore.from_conn_string(uri) as store, \
            PostgresSaver.from_conn_string(uri) as checkpointer:
        store.setup()
        checkpointer.setup()
        layer = MemoryLayer(store, settings=settings_from_env())
        if not args.keep:  # start from an empty memory, so every run shows the same story
            print("resetting the demo users alice and bob: their memories are cleared, "
                  "their API keys kept (--keep keeps their memories too)")
            for user in ("alice", "bob"):
                layer.delete_user(user, keep_keys=True)
        run_id = time.strftime("%Y%m%d%H%M%S")
        graph = build_agent_graph(layer).compile(store=store, checkpointer=checkpointer)
        shown: dict[str, set[str]] = {thread: set() for _, thread, _ in SCRIPT}
        for user, thread, turns in SCRIPT:
            print(f"\n=== user={user} thread={thread} " + "=" * 40)
            for text in turns:
                config = {"configurable": {"user_id": user, "thread_id": f"{thread}-{run_id}"}}
                t0 = time.perf_counter()
                out = graph.invoke({"messages": [HumanMessage(text)]}, config)
                reply_ms = (time.perf_counter() - t0) * 1000
                layer.drain()  # extraction ran after the reply; wait only to print it
                print(f"\n> {user}: {text}")
                block = out.get("memory_context") or ""
                # The block is what the agent received; once a thread has shown a line,
                # later turns print only the new ones (under their section) to stay short.
                new = new_lines(block, shown[thread])
                show("memory block" + (" (lines not shown before)" if shown[thread] else ""),
                     new or ("(as before)" if block else ""))
                shown[thread].update(block.splitlines())
                show(f"agent ({reply_ms:.0f} ms)", out["messages"][-1].text)
                result = layer.ingest_log[-1] if layer.ingest_log else None
                if result is not None and result.user_id == user:
                    kept = [f"{d.operation.op.value} {d.operation.content or ''}".strip()
                            for d in result.decisions if d.accepted]
                    if kept:
                        show("remembered after the turn", "\n".join(kept))
        layer.close()
        print("\nCheck: thread-2 recalled thread-1's facts; bob recalled none of alice's.")
        print(STUDIO_AND_PANEL.format(data_dir=args.data_dir))


if __name__ == "__main__":
    main()
