"""The forms a distributed server gets (``Query.parts``) do what the whole statements do.

On Citus a store sends a statement of several writes as statements of their own, and
rows as ``VALUES`` rather than a ``SELECT`` of parameters, so that each routes to the
user's shard (``tests/store/test_citus.py`` checks the plans there). Here both forms
run on one server, for two users given the same turns at the same time, and every
table must hold the same rows for each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import psycopg
from langchain_core.messages import AIMessage, HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.store.ops.working import VALUES_ROWS
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import Clock

TURNS = (
    [HumanMessage("I moved to Lisbon last year and I love green tea.", id="h1"),
     AIMessage("Noted.", id="a1")],
    [HumanMessage("My sister is called Ana. Remind me to call the dentist tomorrow.",
                  id="h2"),
     AIMessage("I will.", id="a2")],
    [HumanMessage("Actually I prefer black tea now.", id="h3"), AIMessage("OK.", id="a3")],
)

#: What each table holds for a user, without what differs by construction (serial ids,
#: random keys), ordered so that equal contents compare equal.
TABLES = {
    "langmem_items": "SELECT prefix, value - 'id' - 'source' AS value, is_memory, search_text, "
                     "created_at, updated_at, expires_at, ttl_minutes, access, moved "
                     "FROM langmem_items WHERE user_id = %s",
    "langmem_messages": "SELECT thread_id, message_id, profile, role, text, at "
                        "FROM langmem_messages WHERE user_id = %s ORDER BY id",
    "langmem_threads": "SELECT thread_id, profile, agent_id, last_active_at, closed_at "
                       "FROM langmem_threads WHERE user_id = %s",
    "langmem_extraction_queue": "SELECT profile, thread_id, messages, turn_at, done_at, "
                                "attempts, parked_at, last_error "
                                "FROM langmem_extraction_queue WHERE user_id = %s ORDER BY id",
    "langmem_ingest_log": "SELECT at, thread_id, jsonb_array_length(decisions) AS decisions "
                          "FROM langmem_ingest_log WHERE user_id = %s ORDER BY id",
    "langmem_applied_ops": "SELECT count(*) FROM langmem_applied_ops WHERE user_id = %s",
    "langmem_links": "SELECT link_type, count(*) FROM langmem_links WHERE user_id = %s "
                     "GROUP BY link_type",
}


def _contents(uri: str, user: str) -> dict[str, list[Any]]:
    with psycopg.connect(uri) as conn:
        out = {}
        for table, query in TABLES.items():
            rows = [tuple(_anonymous(v, user) for v in r)
                    for r in conn.execute(query, [user]).fetchall()]
            out[table] = rows if "ORDER BY" in query else sorted(rows, key=repr)
        return out


def _anonymous(value: Any, user: str) -> Any:
    return value.replace(user, "USER") if isinstance(value, str) else (
        _anonymous_json(value, user) if isinstance(value, dict | list) else value)


def _anonymous_json(value: Any, user: str) -> Any:
    if isinstance(value, dict):
        return {k: _anonymous_json(v, user) for k, v in value.items()}
    if isinstance(value, list):
        return [_anonymous_json(v, user) for v in value]
    return value.replace(user, "USER") if isinstance(value, str) else value


def _day(store: PostgresMemoryStore, user: str, clock: Clock) -> None:
    layer = MemoryLayer(store, extractor=RuleExtractor(), clock=clock,
                        settings=MemorySettings(extract_every_n_turns=1000))
    for turn in TURNS:
        assert layer.threads.record_turn(user, turn, thread_id="t1") is not None
        layer.admin.process_pending(user_id=user)
    layer.threads.load_thread(user, [HumanMessage("Where do I live?")], "Where do I live?",
                              thread_id="t1", reinforce=False)
    ns = ("memories", user, "notes")
    store.put(ns, "short", {"text": "lives a while"}, ttl=5.0)
    store.put(ns, "kept", {"text": "stays"})
    store.put(ns, "short", {"text": "lives a while longer"}, ttl=7.5)
    # A history beyond what one VALUES list holds goes as arrays, in order.
    many = [HumanMessage(f"line {n}", id=f"m{n}") for n in range(VALUES_ROWS + 3)]
    layer.threads.record_turn(user, many, thread_id="t2")
    layer.close()


@contextmanager
def _sent() -> Iterator[list[str]]:
    """The statements sent inside the block, their whitespace folded."""
    seen: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self: Any, query: Any, *a: Any, **k: Any) -> Any:
        if isinstance(query, str):
            seen.append(" ".join(query.split()))
        return original(self, query, *a, **k)

    with patch.object(psycopg.Cursor, "execute", execute):
        yield seen


#: Statements only the split forms send: an item's row as VALUES, the write lock, the
#: queue entry's completion and the turn's enqueue each on its own, the thread's link
#: without a CTE.
SPLIT_ONLY = (re.compile(r"^INSERT INTO langmem_items AS i \(.*\) VALUES \("),
              re.compile(r"^SELECT pg_advisory_xact_lock"),
              re.compile(r"^UPDATE langmem_extraction_queue SET done_at"),
              re.compile(r"^(WITH queued AS \()?INSERT INTO langmem_extraction_queue"),
              re.compile(r"^INSERT INTO langmem_links \(.*\) SELECT i\.user_id, .*'elaborates'"))


def _split_forms(sent: list[str]) -> list[bool]:
    return [any(form.search(sql) for sql in sent) for form in SPLIT_ONLY]


def test_the_split_forms_leave_the_same_rows_as_the_whole_statements(
    store: PostgresMemoryStore, pg_uri: str, clock: Clock,
) -> None:
    with _sent() as sent:
        _day(store, "whole-user", clock)
    assert not any(_split_forms(sent))
    with (PostgresMemoryStore.from_conn_string(pg_uri, index=store.index_config,
                                               clock=clock) as split, _sent() as sent):
        # As on Citus: known without asking the server, which would say otherwise.
        split.transaction_blocks, split.distributed = False, True
        _day(split, "split-user", clock)
    assert all(_split_forms(sent))
    whole, parts = _contents(pg_uri, "whole-user"), _contents(pg_uri, "split-user")
    assert whole["langmem_items"] and whole["langmem_ingest_log"]
    assert len(whole["langmem_messages"]) == 6 + VALUES_ROWS + 3
    expiring = [r for r in whole["langmem_items"] if r[6] is not None and not r[2]]
    assert [r[6] - r[5] for r in expiring] == [timedelta(minutes=7.5)]
    assert parts == whole
