"""Knowledge retrieval beside memory (langchain-postgres's PGVectorStore on the embedded
database), and the memory as a LangChain retriever in LCEL chains."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

from langmem_layer import (
    ConfigurationError,
    MemoryLayer,
    MemorySettings,
    build_agent_graph,
    knowledge_store,
)
from langmem_layer.facade.retriever import MemoryRetriever
from langmem_layer.offline_chat import OfflineChatModel
from langmem_layer.read.block import DOCUMENTS, RELEVANT
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings, Clock

DOCS = [
    Document("Acme Robotics travel policy: book trains for trips under four hours.",
             metadata={"source": "handbook/travel.md"}),
    Document("Acme Robotics expense policy: meals are refunded up to 40 euros a day.",
             metadata={"source": "handbook/expenses.md"}),
    Document("The Lisbon office opens at 8:30 and closes at 19:00.",
             metadata={"title": "Lisbon office hours"}),
]
QUESTION = "What is the travel policy at Acme Robotics, where I work?"


def _table() -> str:
    return f"kb_{uuid.uuid4().hex[:10]}"  # the suite's database outlives a test


def test_pgvector_store_beside_memory_in_one_block_within_budget(
        store: PostgresMemoryStore, clock: Clock) -> None:
    # The recipe of docs/knowledge.md.
    docs = knowledge_store(store, embeddings=BagOfWordsEmbeddings(), table=_table())
    docs.add_documents(DOCS)
    memory = MemoryLayer(store, knowledge=docs, clock=clock)
    memory.remember("alice", "Works at Acme Robotics.")
    graph = build_agent_graph(memory, model=OfflineChatModel()).compile()
    out = graph.invoke({"messages": [HumanMessage(QUESTION)]},
                       {"configurable": {"user_id": "alice", "thread_id": "kb-1"}})

    block = out["memory_context"]
    assert f"### {RELEVANT}\n- Works at Acme Robotics." in block
    assert f"### {DOCUMENTS}\n- [handbook/travel.md] Acme Robotics travel policy" in block
    assert block.index(RELEVANT) < block.index(DOCUMENTS)  # the memories come first
    assert "travel policy" in out["messages"][-1].text  # the agent may speak from them
    assert out["knowledge"][0]["metadata"]["source"] == "handbook/travel.md"
    # The direct API renders the same block, documents included.
    direct = memory.context_block("alice", QUESTION, thread_id="kb-1")
    assert direct.text == block and direct.documents == 3
    assert direct.tokens <= direct.budget
    memory.close()


def test_documents_are_trimmed_to_their_share_of_the_budget(
        store: PostgresMemoryStore, clock: Clock) -> None:
    docs = knowledge_store(store, embeddings=DeterministicFakeEmbedding(size=64),
                           table=_table())
    docs.add_documents([Document(f"Policy {n}: " + "words of the handbook " * 30,
                                 metadata={"source": f"doc-{n}"}) for n in range(4)])
    # A small block: the memory keeps its place, the documents get what their share allows.
    settings = MemorySettings(context_window_tokens=1500, knowledge_share=0.5)
    memory = MemoryLayer(store, knowledge=docs, settings=settings, clock=clock)
    memory.remember("alice", "Works at Acme Robotics.")
    block = memory.context_block("alice", "Where do I work, and what is the policy?")
    assert "- Works at Acme Robotics." in block.text
    assert 0 < block.documents < 4
    assert block.tokens <= block.budget == 300
    memory.close()


def test_the_table_is_kept_when_the_store_is_built_again(store: PostgresMemoryStore) -> None:
    table, embeddings = _table(), BagOfWordsEmbeddings()
    knowledge_store(store, embeddings=embeddings, table=table).add_documents(DOCS[:1])
    again = knowledge_store(store.conn.info.dsn, embeddings=embeddings, table=table)
    assert [d.page_content for d in again.similarity_search("travel", k=5)] == [
        DOCS[0].page_content]


class _Broken(BaseRetriever):
    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        raise ConnectionError("the knowledge base is down")


def test_a_failing_knowledge_source_does_not_break_the_turn(
        store: PostgresMemoryStore, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    memory = MemoryLayer(store, knowledge=_Broken(), clock=clock)
    memory.remember("alice", "Works at Acme Robotics.")
    graph = build_agent_graph(memory, model=OfflineChatModel()).compile()
    with caplog.at_level(logging.ERROR, logger="langmem_layer.facade.knowledge_methods"):
        out = graph.invoke({"messages": [HumanMessage(QUESTION)]},
                           {"configurable": {"user_id": "alice", "thread_id": "kb-2"}})
    assert "- Works at Acme Robotics." in out["memory_context"]
    assert DOCUMENTS not in out["memory_context"] and out["knowledge"] == []
    assert "knowledge source failed" in caplog.text
    assert "knowledge base is down" in caplog.text
    memory.close()


def test_knowledge_takes_only_retrievers_and_vector_stores(store: PostgresMemoryStore) -> None:
    with pytest.raises(ConfigurationError, match="BaseRetriever or VectorStore"):
        MemoryLayer(store, knowledge=["a document"])


# -- in parallel with the memory read ---------------------------------------------------
# Each side waits for the other to have started: run one after the other, they would
# deadlock (the waits' timeouts only turn such a hang into a failure).

class _MeetsTheSyncRead(BaseRetriever):
    started: Any
    read_started: Any

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self.started.set()
        assert self.read_started.wait(30), "the memory read never ran beside the source"
        return DOCS[:1]


def test_the_sync_path_queries_the_source_on_a_thread_beside_the_memory_read(
        store: PostgresMemoryStore, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _MeetsTheSyncRead(started=threading.Event(), read_started=threading.Event())
    memory = MemoryLayer(store, knowledge=source, clock=clock)
    memory.remember("alice", "Works at Acme Robotics.")
    batch = store.batch

    def meeting_batch(ops: Any) -> Any:
        source.read_started.set()
        assert source.started.wait(30), "the source never ran beside the memory read"
        return batch(ops)

    monkeypatch.setattr(store, "batch", meeting_batch)
    block = memory.context_block("alice", QUESTION)
    assert block.documents == 1 and "- Works at Acme Robotics." in block.text
    memory.close()


class _MeetsTheAsyncRead(BaseRetriever):
    started: Any
    read_started: Any

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        raise AssertionError("an async graph must use the async path")

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any
                                       ) -> list[Document]:
        self.started.set()
        await asyncio.wait_for(self.read_started.wait(), 30)
        return DOCS[:1]


async def test_the_async_path_gathers_the_source_and_the_memory_read(
        astore: AsyncPostgresMemoryStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _MeetsTheAsyncRead(started=asyncio.Event(), read_started=asyncio.Event())
    memory = MemoryLayer(astore, knowledge=source, clock=clock)
    await memory.aremember("alice", "Works at Acme Robotics.")
    abatch = astore.abatch

    async def meeting_abatch(ops: Any) -> Any:
        source.read_started.set()
        await asyncio.wait_for(source.started.wait(), 30)
        return await abatch(ops)

    monkeypatch.setattr(astore, "abatch", meeting_abatch)
    graph = build_agent_graph(memory, model=OfflineChatModel()).compile()
    out = await graph.ainvoke({"messages": [HumanMessage(QUESTION)]},
                              {"configurable": {"user_id": "alice", "thread_id": "kb-3"}})
    assert f"### {DOCUMENTS}\n- [handbook/travel.md]" in out["memory_context"]
    assert "- Works at Acme Robotics." in out["memory_context"]
    await memory.aclose()


# -- the memory as a LangChain retriever -------------------------------------------------

def test_memory_as_a_retriever_in_an_lcel_chain(store: PostgresMemoryStore,
                                                clock: Clock) -> None:
    memory = MemoryLayer(store, clock=clock)
    kept = memory.remember("alice", "Works at Acme Robotics.")
    memory.remember("alice", "Do not bring up their divorce.", policy="avoid")
    memory.remember("bob", "Works at Globex.")
    retriever = memory.agents.as_retriever(user_id="alice", k=5)
    assert isinstance(retriever, MemoryRetriever)

    def format_docs(docs: list[Document]) -> str:
        return "\n".join(f"- {d.page_content}" for d in docs)

    chain = retriever | RunnableLambda(format_docs)
    assert chain.invoke("Where do I work?") == "- Works at Acme Robotics."  # not bob's
    docs = retriever.invoke("Where do I work?")
    meta = docs[0].metadata
    assert docs[0].id == meta["id"] == kept.key
    assert (meta["kind"], meta["layer"]) == (kept.record.kind.value, kept.record.layer.value)
    assert meta["score"] > 0 and meta["occurred_at"].startswith("2026-11-18")
    assert all("divorce" not in d.page_content for d in docs)  # avoid stays out of chains
    memory.close()


async def test_memory_as_a_retriever_async(astore: AsyncPostgresMemoryStore,
                                           clock: Clock) -> None:
    memory = MemoryLayer(astore, clock=clock)
    await memory.aremember("alice", "Works at Acme Robotics.")
    docs = await memory.agents.as_retriever(user_id="alice").ainvoke("Where do I work?")
    assert [d.page_content for d in docs] == ["Works at Acme Robotics."]
    await memory.aclose()


def test_docs_recipe_runs(store: PostgresMemoryStore, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    page = (Path(__file__).resolve().parents[2] / "docs" / "knowledge.md").read_text()
    code = re.search(r"```python\n(.*?)```", page, re.S).group(1)  # type: ignore[union-attr]
    code = code.replace('table="handbook"', f"table={_table()!r}")  # the database is shared
    exec(compile(code, "docs/knowledge.md", "exec"),
         {"store": store, "embeddings": BagOfWordsEmbeddings()})
    printed = capsys.readouterr().out
    assert f"### {DOCUMENTS}\n- [handbook/travel.md] Acme Robotics travel policy" in printed
    assert printed.rstrip().endswith("Works at Acme Robotics.")


def test_documents_come_after_memories_and_before_other_threads_in_the_budget() -> None:
    from langmem_layer.read.block import RECENT_HISTORY, build_context_block
    from langmem_layer.tokens import get_token_counter

    counter = get_token_counter("o200k_base")
    lines = [f"[doc-{n}] " + "handbook words " * 20 for n in range(5)]
    history = [f"user: message {n} " + "chat " * 20 for n in range(5)]
    block = build_context_block([], budget_tokens=200, counter=counter, documents=lines,
                                documents_share=0.5, recent_history=history)
    assert block.tokens <= 200 and 0 < block.documents < 5 and block.history > 0
    assert block.text.index(DOCUMENTS) < block.text.index(RECENT_HISTORY)
    assert "[doc-0]" in block.text  # best first
    assert block.placements == {} and block.dropped == ()  # neither is a memory
    with pytest.raises(ValueError, match="documents_share"):
        build_context_block([], budget_tokens=10, counter=counter, documents_share=2.0)
