"""Recall, and a turn's other reads, as one call of ``langmem_on_shard``
(``sql.citus.on_shard``) find what their statements find.

On Citus a store sends recall's statement as a call the cluster delegates to the
worker holding the user's shards (``tests/store/test_citus.py`` checks that it does).
Here the call runs on one server, where the function fills in the tables themselves:
every strategy on, for a small user and for a user with an index of their own, each
candidate must come back the same, ranks, similarity, value and links included.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from langgraph.store.base import PutOp

from langmem_layer import Kind, Layer, MemoryRecord
from langmem_layer.sql import candidates as rsql
from langmem_layer.sql import citus
from langmem_layer.store.ops import (
    LogMessagesOp,
    RecentMessagesOp,
    SummaryCandidatesOp,
    TouchThreadOp,
    TrustCountOp,
    TurnReadsOp,
    TurnStartOp,
)
from langmem_layer.store.ops.turn_reads import RecallOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import LoopStatus, Policy, memory_namespace
from tests import audit
from tests.fakes import Clock
from tests.store import test_recall_plans as recall_plans

NOW = datetime(2026, 11, 18, tzinfo=UTC)
#: Those of the plans' test, and values that must reach the statement as they are.
TEXTS = [*recall_plans.TEXTS, "status report for the zanzibar project, 100% done",
         "the design review meeting ran long at o'clock langmem_items"]


def _value(i: int, content: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if i % 5 == 1:
        extra = {"kind": Kind.OPEN_LOOP, "loop_status": LoopStatus.OPEN,
                 "due_at": NOW + timedelta(days=1)}
    elif i % 5 == 2:
        extra = {"kind": Kind.PREFERENCE, "policy": Policy.ADAPT}
    return MemoryRecord(**{
        "content": content, "kind": Kind.EPISODIC_EVENT, "layer": Layer.EPISODIC,
        "occurred_at": NOW - timedelta(days=i % 9), "last_accessed_at": NOW,
        "pinned": i % 7 == 3,
        "refs": ["zanzibar"] if "zanzibar" in content else ["ana"] if "ana" in content else [],
        **extra}).to_value()


def _fill(store: PostgresMemoryStore, user: str, n: int) -> None:
    store.batch([PutOp(("memories", user, "work"), f"m{i:03}",
                       _value(i, f"{TEXTS[i % len(TEXTS)]} {i}")) for i in range(n)])
    with store.conn.transaction():  # a chain of links for the walk
        store.conn.execute(
            "INSERT INTO langmem_links (user_id, src_key, link_type, dst_key, created_at) "
            "SELECT %s, format('m%%s', lpad(g::text, 3, '0')), 'elaborates', "
            "format('m%%s', lpad((g + 1)::text, 3, '0')), %s FROM generate_series(0, %s) g",
            [user, NOW, n - 2])


def _recall(store: PostgresMemoryStore, user: str, query: str) -> list[tuple[Any, ...]]:
    (cands,) = store.batch([RecallOp(
        user, ("work",), query=query, refs=("zanzibar",), per_source=12, now=NOW,
        window=(NOW - timedelta(days=3), NOW), link_types=("elaborates",),
        open_questions=3, due_window=(NOW, NOW + timedelta(days=2)), due_limit=3,
        standing=3)])
    return sorted((c.key, tuple(sorted(c.ranks.items())), c.similarity, c.value,
                   c.updated_at, c.linked) for c in cands)


@pytest.mark.parametrize("large", [False, True], ids=["small", "own-index"])
def test_recall_as_one_call_on_the_users_shard_finds_what_the_statement_finds(
    store: PostgresMemoryStore, pg_uri: str, clock: Clock, large: bool,
) -> None:
    _fill(store, "u1", 60)
    _fill(store, "u2", 60)  # another user's matching memories must stay out
    if large:
        assert sorted(store.index_large_users(threshold=50)) == ["u1", "u2"]
    queries = ["zanzibar status meeting", "100% o'clock langmem_items %(user_id)s", "ana"]
    whole = [_recall(store, "u1", q) for q in queries]
    with (PostgresMemoryStore.from_conn_string(pg_uri, index=store.index_config,
                                               clock=clock) as split,
          audit.RECORDER.capture() as sent):
        if not store.distributed:  # as on Citus (where the store finds out itself)
            split.transaction_blocks, split.distributed = False, True
        calls = [_recall(split, "u1", q) for q in queries]
        calls_again = [_recall(split, "u1", q) for q in queries]
        # Prepared once in the session and kept: a small user's statement is planned
        # generically, once, and serves every call after (its values are parameters).
        kept = split.conn.execute(
            "SELECT sum(generic_plans), sum(custom_plans), count(*) FROM "
            "pg_prepared_statements WHERE name LIKE 'langmem\\_%'").fetchone()
    assert sum(n for s, n in sent.items() if "FROM langmem_on_shard(" in s) == 2 * len(queries)
    assert calls == whole and calls_again == whole
    assert kept is not None
    if store.distributed:  # the statements are kept in the workers' sessions there
        return
    assert kept[2] >= 1
    if not large:
        assert kept[0] == 2 * len(queries) and kept[1] == 0, kept
    first = {key: dict(ranks) for key, ranks, *_ in whole[0]}
    assert all(k.startswith("m") for k in first)
    # Every strategy found something, so each part of the text went through the call.
    found = {name for ranks in first.values() for name in ranks}
    assert found >= {"vector", "keyword", "ref", "time", "link", "open_question", "due",
                     "standing", "pinned"}, found


def test_the_calls_text_is_the_same_whatever_the_values() -> None:
    statement = ("SELECT i.key FROM langmem_items i JOIN langmem_links l ON true "
                 "WHERE i.user_id = %(user_id)s AND i.value->>'content' = %(q)s "
                 "AND i.key LIKE 'a%%' AND %(x)s < 1 AND i.prefix = ANY(%(p)s) "
                 "AND %(at)s < now() AND %(n)s > 0 AND %(flag)s AND %(none)s IS NULL "
                 "AND i.key <> 'langmem_items %%(q)s o''clock' FROM langmem_items")
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    one = {"user_id": "u1", "q": "langmem_items 50%(user_id)s o'clock", "x": 0.5,
           "p": ['a"b', "c\\d", "e,f"], "at": at, "n": 3, "flag": True, "none": None}
    sql, params = citus.on_shard("u1", (statement, one), "key text",
                                 settings=(("hnsw.ef_search", "120"),))
    assert params["tables"] == ["langmem_items", "langmem_links"]
    assert params["settings"] == ["hnsw.ef_search", "120"]
    assert params["sql"] == (
        "SELECT i.key FROM %1$s i JOIN %2$s l ON true WHERE i.user_id = ($1[1])::text "
        "AND i.value->>'content' = ($1[2])::text AND i.key LIKE 'a%%' "
        "AND ($1[3])::double precision < 1 AND i.prefix = ANY(($1[4])::text[]) "
        "AND ($1[5])::timestamptz < now() AND ($1[6])::integer > 0 AND ($1[7])::boolean "
        "AND ($1[8])::text IS NULL AND i.key <> 'langmem_items %%(q)s o''clock' FROM %1$s")
    assert params["args"] == ["u1", "langmem_items 50%(user_id)s o'clock", "0.5",
                              '{"a\\"b","c\\\\d","e,f"}', at.isoformat(), "3", "true", None]
    other = dict(one, user_id="u2", q="x", x=0.25, n=4, flag=False, none="y")
    assert citus.on_shard("u2", (statement, other), "key text")[1]["sql"] == params["sql"]
    assert sql.startswith("SELECT * FROM langmem_on_shard(%(user_id)s, %(sql)s,")
    assert sql.endswith(" AS r(key text)")
    with pytest.raises(TypeError, match="cannot carry"):
        citus.on_shard("u1", ("SELECT %(v)s", {"v": {"a": 1}}), "v text")


def test_the_audit_checks_the_statement_a_call_runs() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    statement = rsql.recall_candidates("u1", ["memories.u1.work"], now=now,
                                       query_text="tea", refs=["ana"], window=(now, now))
    _, params = citus.on_shard("u1", statement, rsql.ROW)
    inner = audit.on_shard_statement(params["sql"], params["tables"])
    assert audit.references(audit.normalise(inner)) and audit.check(inner) == []
    # A statement that does not bind its user is refused through the call too.
    _, params = citus.on_shard("u1", ("SELECT key FROM langmem_items WHERE prefix = %(p)s",
                                      {"p": "x"}), "key text")
    assert audit.check(audit.on_shard_statement(params["sql"], params["tables"]))


def test_a_user_named_like_a_table_keeps_their_name_in_a_large_users_walk() -> None:
    # The walk quotes the user into its text (its partial index names them): a user id
    # that spells a table must stay that user, not become the name of a shard.
    now = datetime(2026, 1, 1, tzinfo=UTC)
    statement = rsql.recall_candidates(
        "langmem_embeddings", ["memories.langmem_embeddings.work"], now=now,
        query_text="tea", query_vector=[0.5] * 3, model_id="m", indexed_dims=3)
    _, params = citus.on_shard("langmem_embeddings", statement, rsql.ROW)
    assert "e.user_id = 'langmem_embeddings'" in params["sql"]
    assert "FROM %1$s e" in params["sql"] or "FROM %2$s e" in params["sql"]


def _turn_reads(store: PostgresMemoryStore, user: str, now: datetime) -> list[Any]:
    summaries = SummaryCandidatesOp(user, memory_namespace(user, "work"),
                                    "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", 12, now)
    recent = RecentMessagesOp(user, "work", now - timedelta(days=1), 10, "t0")
    stamp = TouchThreadOp(user, "t0", "work", None, now)
    reads, alone, start = store.batch([TurnReadsOp(user, summaries), recent,
                                       TurnStartOp(user, stamp, recent)])
    return [reads.learned, reads.summaries, alone, start]


def test_a_turns_other_reads_as_calls_find_what_their_statements_find(
    store: PostgresMemoryStore, pg_uri: str, clock: Clock,
) -> None:
    # The trust and summaries read, and the recent history (alone and with the thread's
    # stamp) go as calls on Citus as recall does: each must find what its statement does.
    now = clock()
    for user in ("u1", "u2"):  # u2's matching rows must stay out of u1's reads
        ns = memory_namespace(user, "work")
        week = {"synthesis": "temporal_summary", "start": "2026-11-10T00:00:00Z",
                "end": "2026-11-17T00:00:00Z"}
        store.batch([
            PutOp(ns, "s1", MemoryRecord(content=f"{user}'s week in Lisbon, 100%",
                                         kind=Kind.TEMPORAL_SUMMARY, layer=Layer.EPISODIC,
                                         metadata=week, occurred_at=now,
                                         last_accessed_at=now).to_value()),
            PutOp(ns, "no", MemoryRecord(
                content="never mention the divorce", kind=Kind.PREFERENCE,
                layer=Layer.SEMANTIC, policy=Policy.AVOID,
                source={"thread_id": "t2", "message_id": "h2"}, occurred_at=now,
                last_accessed_at=now).to_value()),
            *(LogMessagesOp(user, t, "work", [
                {"message_id": f"h{t[1]}", "role": "user", "text": f"o'clock %(user_id)s {t}"},
                {"message_id": f"a{t[1]}", "role": "assistant", "text": "noted"}],
                now - timedelta(minutes=10 - int(t[1]))) for t in ("t1", "t2", "t3")),
            TrustCountOp(user, "planner", "", 1, now, 2)])
    whole = _turn_reads(store, "u1", now)
    with (PostgresMemoryStore.from_conn_string(pg_uri, index=store.index_config,
                                               clock=clock) as split,
          audit.RECORDER.capture() as sent):
        if not store.distributed:  # as on Citus (where the store finds out itself)
            split.transaction_blocks, split.distributed = False, True
        calls = _turn_reads(split, "u1", now)
    assert sum(n for s, n in sent.items() if "FROM langmem_on_shard(" in s) == 3
    assert calls == whole
    learned, summaries, alone, start = whole
    assert learned.by_agent == {"planner": 0.5}
    assert [s.key for s in summaries] == ["s1"] and "u1's week" in str(summaries[0].value)
    # The avoided turn (t2) is left out; t0 is the turn's own thread.
    assert [m.thread_id for m in alone] == ["t1", "t1", "t3", "t3"] and start == alone

