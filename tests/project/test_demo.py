"""The demo graph end to end, the demo script as `make demo` runs it, and the README example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver

from graphs.agent import build_agent_graph
from langmem_layer import MemoryLayer
from langmem_layer.store.sync import PostgresMemoryStore
from tests.conftest import DATA_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_demo_graph_remembers_across_threads_with_checkpointer(
    store: PostgresMemoryStore, pg_uri: str, monkeypatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with PostgresSaver.from_conn_string(pg_uri) as saver:
        saver.setup()
        layer = MemoryLayer(store)
        graph = build_agent_graph(layer).compile(store=store, checkpointer=saver)

        run = uuid.uuid4().hex  # checkpoints persist across test sessions

        def say(user: str, thread: str, text: str) -> dict:
            out = graph.invoke({"messages": [HumanMessage(text)]},
                               {"configurable": {"user_id": user, "thread_id": thread + run}})
            layer.drain()
            return out

        say("alice", "demo-1", "Hi! My name is Alice. I work at Acme Robotics.")
        out = say("alice", "demo-2", "What's my name, and where do I work?")
        reply = out["messages"][-1].text
        assert "Name is Alice." in reply and "Works at Acme Robotics." in reply
        # The thread's own history survives in the checkpointer.
        state = graph.get_state({"configurable": {"thread_id": "demo-1" + run}})
        assert len(state.values["messages"]) == 2
        bob = say("bob", "demo-3", "What's my name, and where do I work?")
        assert bob["memory_context"] == "" and "nothing relevant" in bob["messages"][-1].text
        layer.close()


def test_demo_script_runs_offline(tmp_path: Path) -> None:
    """What `make demo` runs, in a subprocess with the real local model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "examples/demo.py", "--data-dir", str(DATA_DIR)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    thread2 = out.split("user=alice thread=thread-2")[1].split("user=bob")[0]
    assert "Name is Alice." in thread2 and "Works at Acme Robotics." in thread2
    assert "Works at Globex" in thread2.split("Where do I work these days?")[1]
    # A fact kept in DO NOT CONTRADICT is stated when the question asks about it.
    allergy = thread2.split("> alice: I am ordering snacks")[1].split("> alice:")[0]
    assert "Is allergic to peanuts" in allergy.split("agent (")[1]
    # The other thread's messages are offered once, not on every turn of thread-2.
    assert thread2.count("RECENT CONVERSATIONS (other threads)") == 1
    assert thread2.count("- user: I prefer morning meetings") == 1
    bob = out.split("user=bob thread=thread-3")[1]
    assert "Alice" not in bob and "nothing relevant yet" in bob
    # It ends by saying how to open the same memory in Studio and in the panel.
    # The hints are commands that work where the demo ran
    # (tests/project/test_commands_as_written.py).
    assert "make dev" in out and "make serve" in out and "http://127.0.0.1:8000/panel" in out
    assert len(out.splitlines()) < 120  # short enough to read


def test_readme_example_runs(store: PostgresMemoryStore, pg_uri: str, monkeypatch) -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", readme, re.S).group(1)  # type: ignore[union-attr]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    # The suite's database and fake embedder stand in for the example's own .langmem dir
    # (tests/project/test_docs_examples.py runs it with the local model).
    assert "open_store()" in code
    monkeypatch.setenv("LANGMEM_DATABASE_URL", pg_uri)
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    exec(compile(code, "README.md", "exec"), {})
    found = store.search(("memories", "alice", "work"))
    assert [i.value["content"] for i in found] == ["Prefers morning meetings."]
