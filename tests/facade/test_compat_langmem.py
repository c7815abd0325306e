"""LangMem's stored memories become typed memories: its item shapes, imported once."""

from __future__ import annotations

import uuid

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import InvalidNamespaceError, Kind, MemoryLayer
from langmem_layer.compat_langmem import langmem_text
from tests.fakes import Clock


def langmem_manage_memory(store, user_id: str, content: str) -> str:
    """What LangMem's ``create_manage_memory_tool`` does on "create" (its default
    namespace ``("memories", "{user_id}")``, a UUID key, ``{"content": ...}``)."""
    key = str(uuid.uuid4())
    store.put(("memories", user_id), key, {"content": content})
    return key


def test_langmem_items_become_typed_memories_once(store, clock: Clock) -> None:
    langmem_manage_memory(store, "alice", "User prefers dark mode in every editor.")
    langmem_manage_memory(store, "alice", "User works at Acme Robotics.")
    # Its memory manager's shape: the schema's name and fields.
    store.put(("memories", "alice"), "m1",
              {"kind": "Memory", "content": {"content": "User is learning Portuguese."}})
    store.put(("memories", "alice"), "t1", {"kind": "Triple", "content": {
        "subject": "user", "predicate": "likes", "object": "jazz"}})
    store.put(("memories", "alice"), "x", {"tags": ["no text here"]})
    langmem_manage_memory(store, "bob", "Bob prefers light mode.")

    memory = MemoryLayer(store, extraction="inline", clock=clock)
    memory.remember("alice", "User works at Acme Robotics.", kind=Kind.PROFILE_FACT)  # typed
    result = memory.agents.import_langmem("alice")
    assert result.found == 5 and len(result.written) == 3 and len(result.reinforced) == 1
    assert result.skipped == ["memories/alice/x: no text"]

    typed = {r.record.content: r for r in memory.list("alice")}
    assert set(typed) == {"User prefers dark mode in every editor.",
                          "User works at Acme Robotics.", "User is learning Portuguese.",
                          "user likes jazz"}
    assert all(r.record.kind == Kind.PROFILE_FACT for r in typed.values())
    assert typed["User is learning Portuguese."].record.source.agent_id == "langmem"
    block = memory.context_block("alice", "What editor theme do I like, dark mode?")
    assert "User prefers dark mode in every editor." in block.text

    again = memory.agents.import_langmem("alice")  # idempotent
    assert (again.written, again.reinforced, again.replayed) == ([], [], 4)
    assert len(memory.list("alice")) == 4
    assert memory.list("bob") == []  # only the user asked for
    assert store.get(("memories", "alice"), "m1") is not None  # LangMem's items stay

    # An item LangMem changed since is imported as its new text.
    store.put(("memories", "alice"), "m1",
              {"kind": "Memory", "content": {"content": "User speaks Portuguese fluently."}})
    changed = memory.agents.import_langmem("alice")
    assert len(changed.written) == 1 and changed.replayed == 3


async def test_async_import_and_a_namespace_of_another_user(astore, clock: Clock) -> None:
    await astore.aput(("memories", "alice", "langmem"), "k", {"content": "Owns a cat, Miso."})
    memory = MemoryLayer(astore, extraction="inline", clock=clock)
    result = await memory.agents.aimport_langmem(
        "alice", namespace=("memories", "alice", "langmem"), profile="personal")
    assert len(result.written) == 1
    (cat,) = await memory.alist("alice", profile="personal")
    assert cat.record.content == "Owns a cat, Miso." and cat.scope == "personal"
    # Extraction sees it as any memory: the gate reinforces instead of duplicating.
    done = await memory.aingest("alice", [HumanMessage("I own a cat named Miso.")],
                                profile="personal")
    assert cat.key not in done.written
    with pytest.raises(InvalidNamespaceError, match="not user 'alice'"):
        await memory.agents.aimport_langmem("alice", namespace=("memories", "bob"))


def test_langmem_text_shapes() -> None:
    assert langmem_text({"content": " Likes tea. "}) == "Likes tea."
    assert langmem_text({"content": {"content": "Likes tea."}}) == "Likes tea."
    assert langmem_text({"content": {"b": 2, "a": 1, "c": True, "d": ""}}) == "a: 1; b: 2"
    assert langmem_text({"content": {"subject": "Ann", "predicate": "manages",
                                     "object": "Bo", "context": "since May"}}
                        ) == "Ann manages Bo (since May)"
    assert langmem_text({"content": None}) is None and langmem_text({}) is None


def test_import_langmem_command(pg_uri: str, store, capsys, monkeypatch) -> None:
    from langmem_layer.cli import main

    store.put(("memories", "carol"), "k1", {"content": "Carol prefers window seats."})
    store.put(("memories", "carol"), "k2", {"content": {}})
    # The command embeds with the default model: use the suite's fake one.
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    assert main(["--database-url", pg_uri, "import-langmem", "carol"]) == 0
    out = capsys.readouterr().out
    assert "LangMem items: 2; imported 1, already known 0, imported before 0, skipped 1" in out
    assert "skipped memories/carol/k2: no text" in out
    assert main(["--database-url", pg_uri, "import-langmem", "carol"]) == 0
    assert "imported 0, already known 0, imported before 1" in capsys.readouterr().out
