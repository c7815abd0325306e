"""Faults of the services around the database: an embedder that fails intermittently,
a store or process closed while the background worker runs, and two workers extracting
identical turns of one user at the same moment. Nothing lost, nothing applied twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda

from langmem_layer import MemoryLayer, MemorySettings, PostgresMemoryStore
from langmem_layer.extract.llm import LLMExtractor
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.jobs import JOBS, JobContext
from tests.fakes import BagOfWordsEmbeddings, Clock

USERS = 6


class FlakyEmbeddings(BagOfWordsEmbeddings):
    """Fails every call while ``down``, and every third call always."""

    def __init__(self) -> None:
        super().__init__(dims=64)
        self.down = True
        self.failures = 0

    def _fail(self) -> None:
        if self.down or self.calls % 3 == 0:
            self.failures += 1
            raise ConnectionError("embedding service unavailable")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        self._fail()
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        self._fail()
        return super().embed_query(text)


def _queue(uri: str) -> list[tuple]:
    with psycopg.connect(uri) as conn:
        return conn.execute("""SELECT done_at IS NOT NULL, parked_at IS NOT NULL, attempts,
            last_error FROM langmem_extraction_queue ORDER BY id""").fetchall()


def test_an_embedder_outage_keeps_turns_queued_without_using_their_attempts(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    flaky = FlakyEmbeddings()
    with PostgresMemoryStore.from_conn_string(
            pg_uri, index={"embed": flaky, "dims": 64, "model_id": "bow-64"}, clock=clock,
            embedding_retry_delay=0) as flaky_store:
        _embedder_outage(flaky_store, pg_uri, clock, flaky)


def _embedder_outage(store: PostgresMemoryStore, pg_uri: str, clock: Clock,
                     flaky: FlakyEmbeddings) -> None:
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="background",
                        settings=MemorySettings(extraction_max_attempts=2,
                                                extract_every_n_turns=1000), clock=clock)
    for i in range(USERS):
        layer.admin.submit(f"user-{i}", [HumanMessage(f"My favourite band is Band{i}.")])
    passes = 5  # more passes than the attempt limit: an outage must not park a turn
    for _ in range(passes):
        layer.drain()
        clock.advance(hours=1)
    rows = _queue(pg_uri)
    assert [r[:3] for r in rows] == [(False, False, 0)] * USERS
    assert all("EmbeddingError" in r[3] and "unavailable" in r[3] for r in rows)

    flaky.down = False  # the service is back, still failing one call in three
    for _ in range(passes):
        layer.drain()
        clock.advance(hours=1)
    rows = _queue(pg_uri)
    with psycopg.connect(pg_uri) as conn:
        memories, distinct = conn.execute("""SELECT count(*),
            count(DISTINCT (user_id, value->>'content')) FROM langmem_items
            WHERE is_memory""").fetchone() or (0, 0)
    print(f"embedder outage: {USERS} turns queued, {sum(r[0] for r in rows)} extracted, "
          f"{sum(r[1] for r in rows)} parked, {flaky.failures} embedding failures survived, "
          f"{memories} memories")
    assert [r[:2] for r in rows] == [(True, False)] * USERS
    assert (memories, distinct) == (USERS, USERS)


SCRIPT = """
import sys
from langchain_core.messages import HumanMessage
from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.extract.rules import RuleExtractor

with PostgresMemoryStore.from_conn_string(sys.argv[1]) as store:
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="background")
    for i in range(40):
        layer.admin.submit("closer", [HumanMessage(f"My favourite band is Band{i}.")],
                     thread_id=f"t{i}")
print("exited")
"""


def _leases(uri: str) -> list[tuple]:
    with psycopg.connect(uri) as conn:
        return conn.execute("""SELECT locked_until IS NOT NULL FROM langmem_extraction_queue
            WHERE done_at IS NULL ORDER BY id""").fetchall()


def test_closing_the_store_under_the_worker_prints_nothing_and_loses_nothing(
        store: PostgresMemoryStore, pg_uri: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", SCRIPT, pg_uri], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "exited"
    assert "Traceback" not in done.stderr, done.stderr
    assert "Background extraction pass failed" not in done.stderr, done.stderr
    rows = _queue(pg_uri)
    # Whatever the closed worker left is still queued, and nothing is left leased: the
    # store released its pass's turns as it closed, so the next worker takes them now.
    assert not any(r[0] for r in _leases(pg_uri))
    layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline")
    layer.drain()
    after = _queue(pg_uri)
    print(f"store closed under the worker: {len(rows)} turns queued, "
          f"{sum(r[0] for r in rows)} extracted before the close, "
          f"{sum(r[0] for r in after)} after a drain")
    assert len(rows) == 40
    assert [r[:2] for r in after] == [(True, False)] * 40


def test_two_workers_extracting_identical_turns_add_the_fact_once(
        store: PostgresMemoryStore, pg_uri: str, index: dict) -> None:
    rounds = 8
    for n in range(rounds):
        turn = [HumanMessage(f"My favourite band is Band{n}.")]
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def work(turn: list[HumanMessage] = turn, barrier: threading.Barrier = barrier,
                 user: str = f"twin-{n}", errors: list[BaseException] = errors) -> None:
            try:
                with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as own:
                    layer = MemoryLayer(own, extractor=RuleExtractor(), extraction="inline")
                    barrier.wait()
                    layer.ingest(user, turn)
            except BaseException as e:  # reported by the assertion below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute("""SELECT user_id, count(*) FROM langmem_items
            WHERE is_memory AND value->>'status' = 'active' GROUP BY 1""").fetchall()
    print(f"two workers, identical turns: {rounds} rounds, active memories per user "
          f"{sorted(n for _, n in rows)}")
    assert sorted(n for _, n in rows) == [1] * rounds


class FaultyModel(BaseChatModel):
    """A chat model with faults in turn while ``faulty``: a timeout, garbage, and an
    error on every third call; when well, it states the turn's fact as the rules would."""

    faulty: bool = True
    calls: int = 0
    faults: int = 0

    @property
    def _llm_type(self) -> str:
        return "faulty"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage("unused"))])

    def with_structured_output(self, schema: Any, **kwargs: Any) -> Any:
        def reply(prompt: list[BaseMessage]) -> dict[str, Any]:
            self.calls += 1
            if self.faulty or self.calls % 3 == 0:
                self.faults += 1
                kind = self.calls % 3
                if kind == 0:
                    raise RuntimeError("model error on every third call")
                if kind == 1:
                    raise TimeoutError("model timed out")
                return {"raw": AIMessage('{"operations": [{"op": "ad'), "parsed": None,
                        "parsing_error": ValueError("truncated JSON")}
            band = re.search(r"Band\d+", prompt[-1].text)
            ops = {"operations": [{"op": "add", "content": f"Favourite band is {band[0]}.",
                                   "kind": "preference"}]} if band else {"operations": []}
            return {"raw": AIMessage(json.dumps(ops)), "parsed": ops, "parsing_error": None}

        return RunnableLambda(reply)


def test_a_faulty_chat_model_loses_no_turn_and_duplicates_none(
        store: PostgresMemoryStore, pg_uri: str, clock: Clock) -> None:
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("TRUNCATE langmem_reextract")
    model = FaultyModel()
    layer = MemoryLayer(store, extractor=LLMExtractor(model), extraction="background",
                        settings=MemorySettings(extract_every_n_turns=1000), clock=clock)
    for i in range(USERS):
        layer.admin.submit(f"user-{i}", [HumanMessage(f"My favourite band is Band{i}.")])
    layer.drain()
    with psycopg.connect(pg_uri) as conn:
        kept = conn.execute("SELECT count(*) FROM langmem_reextract").fetchone()
    assert kept == (USERS,)  # every turn the model failed is kept, with its error

    model.faulty = False  # back, still failing one call in three (retried once)
    counts = JOBS["reextract"].run(JobContext(store, layer=layer)).counts
    rows = _queue(pg_uri)
    with psycopg.connect(pg_uri) as conn:
        memories = conn.execute("""SELECT user_id, count(*) FROM langmem_items
            WHERE is_memory GROUP BY 1""").fetchall()
        left = conn.execute("SELECT count(*) FROM langmem_reextract").fetchone()
    print(f"faulty chat model: {USERS} turns, {sum(r[0] for r in rows)} extracted, "
          f"{model.faults} model faults survived, reextract {counts}, "
          f"memories per user {sorted(n for _, n in memories)}")
    assert [r[:2] for r in rows] == [(True, False)] * USERS
    assert counts["reextracted"] + counts["again"] == USERS and counts["failed"] == 0
    assert sorted(n for _, n in memories) == [1] * USERS  # the model's fact was the rules'
    if counts["again"]:  # a turn whose both attempts hit a fault waits for the next run
        assert left == (counts["again"],)
