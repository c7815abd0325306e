"""Writes a small, representative data set through one version's own public API.

Run by ``tests/make_schema_fixtures.py`` with ``PYTHONPATH`` set to a checkout of an
earlier commit, so ``import langmem_layer`` is that version's code:

    PYTHONPATH=/tmp/upgrades-<sha> python tests/schema_fixture_writer.py <database uri>

It runs that version's ``setup()`` and writes, for three users, what the version could
write: typed memories (``remember``, ``ingest``, a ``correct`` that links the new memory
to the old one), vectors from :class:`HashEmbeddings`, a generic item and a shared one
(``store.put``), an API key, a queued turn with its logged messages, and a job run. Each
step the version lacks is skipped; the steps done are printed as JSON.

The module imports nothing of ``langmem_layer`` at its top: ``tests/store/test_upgrades.py``
imports :class:`HashEmbeddings` from it to open today's store with the same index.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from langchain_core.embeddings import Embeddings

DIMS = 8
MODEL_ID = "hash-8"
USERS = ("alice", "bob", "carol")


class HashEmbeddings(Embeddings):
    """A deterministic 8-dimensional embedder: a text's SHA-256, scaled to unit length."""

    def _one(self, text: str) -> list[float]:
        raw = [b - 127.5 for b in hashlib.sha256(text.encode()).digest()[:DIMS]]
        norm = math.sqrt(sum(x * x for x in raw)) or 1.0
        return [x / norm for x in raw]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def index_config() -> dict[str, Any]:
    """The store's ``index`` argument, the same for every version and for the test."""
    return {"embed": HashEmbeddings(), "dims": DIMS, "model_id": MODEL_ID}


def _kind(name: str) -> Any:
    from langmem_layer import Kind

    return getattr(Kind, name)


def _quiet_worker(layer: Any) -> None:
    """Keep the background worker from extracting the queued turn (it stays pending)."""
    for name in ("_wake_worker", "_turn_due"):
        if hasattr(layer, name):
            setattr(layer, name, lambda *a, **k: False)
    worker = getattr(layer, "_worker", None)
    if worker is not None:
        for name in ("turn_due", "_turn_due", "wake", "_wake_thread"):
            if hasattr(worker, name):
                setattr(worker, name, lambda *a, **k: False)


def _run_jobs(store: Any, done: dict[str, Any]) -> None:
    """A job run, and the lifecycle's decay scores (where the version had them)."""
    try:
        from langmem_layer.jobs import JOBS, JobContext
    except ImportError:
        return
    run_due = None
    for mod in ("langmem_layer.jobs.runs", "langmem_layer.jobs.runner"):
        try:
            run_due = __import__(mod, fromlist=["run_due"]).run_due
            break
        except (ImportError, AttributeError):
            continue
    if run_due is not None:
        jobs = [j for j in ("sweep-ttl", "lifecycle") if j in JOBS]
        runs = run_due(JobContext(store), jobs=jobs)
        done["job_runs"] = [getattr(r, "job", str(r)) for r in runs]
    elif "lifecycle-all" in JOBS:
        JOBS["lifecycle-all"].run(JobContext(store))
        done["jobs"] = "lifecycle-all"


def write(uri: str) -> dict[str, Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    from langmem_layer import MemoryLayer, PostgresMemoryStore

    done: dict[str, Any] = {}
    now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    with PostgresMemoryStore.from_conn_string(uri, index=index_config()) as store:
        done["setup"] = store.setup()
        layer = MemoryLayer(store, clock=lambda: now)
        _quiet_worker(layer)
        # The layer is never closed: closing drains the queue, and the queued turn below
        # is to stay pending (the process ends without it, see __main__).
        # alice: facts (one pinned, with references), a preference, an open loop,
        # a turn ingested, a correction, and two links between her memories.
        a1 = layer.remember("alice", "I live in Lisbon with my partner Rui.",
                            refs=["rui"], pinned=True)
        a2 = layer.remember("alice", "I prefer short answers without bullet lists.",
                            kind=_kind("PREFERENCE"), profile="work")
        a3 = layer.remember("alice", "Send the quarterly report to Marta.",
                            kind=_kind("OPEN_LOOP"), profile="work", refs=["marta"],
                            due_at=now + timedelta(days=3))
        layer.ingest("alice", [HumanMessage("My sister Ana is a doctor in Porto."),
                               AIMessage("Noted, Ana is a doctor in Porto.")],
                     thread_id="alice-t1")
        layer.correct("alice", a1.key, "I live in Porto with my partner Rui.")
        link_op = None
        for mod in ("langmem_layer.store.ops", "langmem_layer.ops"):
            try:
                link_op = __import__(mod, fromlist=["LinkOp"]).LinkOp
                break
            except (ImportError, AttributeError):
                continue
        assert link_op is not None
        store.batch([link_op("alice", a3.key, "elaborates", a2.key, now, {"why": "test"}),
                     link_op("alice", a3.key, "derived_from", a1.key, now)])
        done["alice"] = "remember, ingest, correct, links"
        # bob: facts, and a turn ingested.
        layer.remember("bob", "I am allergic to peanuts.", salience=0.9)
        layer.remember("bob", "I run every Sunday morning.", profile="health")
        layer.ingest("bob", [HumanMessage("I work as a nurse at Santa Maria hospital.")],
                     thread_id="bob-t1")
        done["bob"] = "remember, ingest"
        # carol: a generic item under her memories, and one typed memory.
        store.put(("memories", "carol", "default"), "note-1",
                  {"note": "carol's plain item", "n": 3})
        layer.remember("carol", "My cat is called Miso.")
        done["carol"] = "put, remember"
        # carol: turns remembered into a thread, with their context vectors, where the
        # version kept them.
        with psycopg.connect(uri) as conn:
            has_context = conn.execute(
                "SELECT to_regclass('langmem_context_vectors') IS NOT NULL").fetchone()
        if has_context and has_context[0]:
            for text in ("Do you still go to yoga on Tuesdays?",
                         "I have been going for about three years now.",
                         "Miso sleeps on the mat while I practise."):
                layer.remember("carol", text, thread_id="carol-t1")
            done["context"] = "remember(thread_id=)"
        # an item outside any tenant root (user_id '').
        store.put(("shared", "docs"), "faq-1", {"text": "Opening hours are 9 to 5."})
        done["shared"] = "put"

        # an API key
        create_key = None
        for mod in ("langmem_layer.server.keys", "langmem_layer.auth"):
            try:
                create_key = __import__(mod, fromlist=["create_key"]).create_key
                break
            except (ImportError, AttributeError):
                continue
        if create_key is not None:
            create_key(store, "alice")
            done["api_key"] = "alice"

        # learned agent trust
        if hasattr(layer, "feedback"):
            layer.feedback("alice", True, agent_id="planner")
            layer.feedback("alice", False, agent_id="planner")
            done["trust"] = "feedback"
        # per-user ANN (and keyword) indexes of the users with 3 vectors or more
        if hasattr(store, "index_large_users"):
            done["indexed"] = store.index_large_users(threshold=3)

        # a job run (before the queued turn: a pass may extract it)
        _run_jobs(store, done)

        # a queued turn (with its messages in the log when the version had one), where
        # the version had a queue (the first one extracted a submitted turn at once)
        with psycopg.connect(uri) as conn:
            has_queue = conn.execute(
                "SELECT to_regclass('langmem_extraction_queue') IS NOT NULL").fetchone()
        if not (has_queue and has_queue[0]):
            return done
        turn = [HumanMessage("Remind me that my dentist appointment is on Friday."),
                AIMessage("I will remember the dentist appointment on Friday.")]
        if hasattr(layer, "load_thread"):
            layer.load_thread("bob", turn[:1], "dentist", thread_id="bob-t2", profile="health")
            done["thread"] = "load_thread"
        if hasattr(layer, "record_turn"):
            layer.record_turn("bob", turn, thread_id="bob-t2", profile="health")
            done["queued"] = "record_turn"
        else:
            layer.submit("bob", turn, thread_id="bob-t2", profile="health")
            done["queued"] = "submit"
        with psycopg.connect(uri) as conn:
            done["pending"] = conn.execute(
                "SELECT count(*) FROM langmem_extraction_queue WHERE done_at IS NULL"
            ).fetchone()
    return done


if __name__ == "__main__":
    print(json.dumps(write(sys.argv[1]), default=str), flush=True)
    # Without waiting for the layer's worker (which would extract the queued turn).
    os._exit(0)
