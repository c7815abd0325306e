"""The large-user read path and the thread links of the write path.

A user with an HNSW index of their own reads BM25's document frequencies and N from
``langmem_terms`` (kept by triggers) and scores only the memories holding the query's
rarest terms; pinned memories, open loops and time windows come from partial indexes.
"""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.base import PutOp

from langmem_layer import Kind, Layer, MemoryLayer, MemoryRecord, MemorySettings
from langmem_layer.sql import candidates as rsql
from langmem_layer.store.ops import LinksOp, RecallOp
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import Clock

NOW = datetime(2026, 11, 18, tzinfo=UTC)

_RECOUNT = """
    SELECT i.user_id, i.prefix, l.lexeme, count(*) AS df
    FROM langmem_items i CROSS JOIN LATERAL langmem_terms_of(i.tsv) AS l(lexeme)
    WHERE i.is_memory GROUP BY 1, 2, 3
"""


def _value(content: str, **extra: object) -> dict:
    return {
        **MemoryRecord(
            content=content,
            kind=Kind.EPISODIC_EVENT,
            layer=Layer.EPISODIC,
            occurred_at=NOW,
            last_accessed_at=NOW,
        ).to_value(),
        **extra,
    }


def _terms(uri: str) -> tuple[dict, dict]:
    with psycopg.connect(uri) as conn:
        kept = {
            r[:3]: r[3]
            for r in conn.execute(
                "SELECT user_id, prefix, lexeme, df FROM langmem_terms WHERE df > 0"
            )
        }
        counted = {r[:3]: r[3] for r in conn.execute(_RECOUNT)}
    return kept, counted


def test_term_frequencies_follow_inserts_updates_and_deletes(
    store: PostgresMemoryStore, pg_uri: str
) -> None:
    ns, other = ("memories", "u1", "work"), ("memories", "u2", "work")
    store.batch(
        [
            PutOp(ns, "a", _value("Bob fixed the analytics dashboard")),
            PutOp(ns, "b", _value("Bob reviewed the summary")),
            PutOp(other, "c", _value("Alice and Bob went hiking")),
        ]
    )
    store.put(("notes",), "n", {"text": "not a memory"})
    kept, counted = _terms(pg_uri)
    assert kept == counted
    assert kept[("u1", "memories.u1.work", "bob")] == 2
    assert kept[("u1", "memories.u1.work", "")] == 2  # N: the scope's memories
    store.put(ns, "b", _value("Carol reviewed the summary"))  # content changed
    store.put(ns, "a", _value("Bob fixed the analytics dashboard"))  # unchanged content
    store.delete(other, "c")
    kept, counted = _terms(pg_uri)
    assert kept == counted
    assert kept[("u1", "memories.u1.work", "bob")] == 1
    assert ("u2", "memories.u2.work", "hike") not in kept


def _large_user(store: PostgresMemoryStore, user: str = "big") -> None:
    ns = ("memories", user, "work")
    ops = [PutOp(ns, f"f{i}", _value(f"weekly status meeting notes number {i}")) for i in range(60)]
    ops.append(PutOp(ns, "rare", _value("the zanzibar status meeting moved",
                                        refs=["zanzibar"])))
    ops.append(PutOp(ns, "pin", _value("allergic to peanuts", pinned=True)))
    store.batch(ops)
    store.index_large_users(threshold=50)  # [] when an earlier test indexed the user already
    dims = store.conn.execute("SELECT dims FROM langmem_vector_indexes WHERE user_id = %s",
                              (user,))
    assert dims.fetchall()


def test_large_user_bm25_finds_the_rare_term_within_the_budget(
    store: PostgresMemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _large_user(store)
    # "status" and "meet" are in 61 memories: over the budget, so only "zanzibar"
    # (df 1) chooses what is scored, and the rare memory ranks first.
    monkeypatch.setattr(rsql, "KW_DOC_BUDGET", 20)
    (cands,) = store.batch([RecallOp("big", ("work",), query="zanzibar status meeting", now=NOW)])
    by_kw = sorted((c for c in cands if "keyword" in c.ranks), key=lambda c: c.ranks["keyword"])
    assert [c.key for c in by_kw] == ["rare"]
    assert any(c.key == "pin" and "pinned" in c.ranks for c in cands)
    # With a budget that holds every match, the same scores as the small-user path.
    monkeypatch.setattr(rsql, "KW_DOC_BUDGET", 1000)
    (cands,) = store.batch([RecallOp("big", ("work",), query="zanzibar status meeting", now=NOW)])
    by_kw = sorted((c for c in cands if "keyword" in c.ranks), key=lambda c: c.ranks["keyword"])
    assert by_kw[0].key == "rare" and len(by_kw) == 40  # per_source


def test_large_user_keyword_search_stays_in_the_user(store: PostgresMemoryStore) -> None:
    _large_user(store)
    store.put(("memories", "small", "work"), "s", _value("zanzibar trip planned"))
    (cands,) = store.batch([RecallOp("big", ("work",), query="zanzibar", now=NOW)])
    assert {c.key for c in cands if "keyword" in c.ranks} == {"rare"}
    assert all(c.namespace[1] == "big" for c in cands)


@pytest.mark.parametrize("user", ["big", "o'brien %s 100%"])
def test_large_user_recall_uses_every_strategy_and_stays_in_the_user(
    store: PostgresMemoryStore, user: str
) -> None:
    # The large-user statement names the user as a literal (for the partial indexes):
    # quotes and psycopg's '%' must survive it.
    _large_user(store, user)
    store.put(("memories", "small", "work"), "s", _value("zanzibar trip", refs=["zanzibar"]))
    (cands,) = store.batch([RecallOp(user, ("work",), query="zanzibar status meeting",
                                     refs=("zanzibar",), now=NOW)])
    found = {c.key: c.ranks for c in cands}
    assert {"vector", "keyword", "ref"} <= set(found["rare"])
    assert {k for k, r in found.items() if "ref" in r} == {"rare"}
    assert "pinned" in found["pin"]
    assert all(c.namespace[1] == user for c in cands)
    assert len([c for c in cands if "vector" in c.ranks]) == 40  # per_source


def test_an_index_another_store_builds_or_drops_changes_recall_from_the_next_turn(
    store: PostgresMemoryStore, pg_uri: str, index: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store remembers each user's index lookup and sends it with the recall, whose
    # shape follows what the last lookup found: a stale memory costs one recall its
    # speed (it searches exactly), never what it finds.
    user = "memo-user"
    shapes: list[int | None] = []
    real = rsql.recall_candidates

    def recorded(*args: object, **kwargs: object) -> object:
        shapes.append(kwargs["indexed_dims"])  # type: ignore[arg-type]
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(rsql, "recall_candidates", recorded)

    def recall_finds_rare() -> None:
        (cands,) = store.batch([RecallOp(user, ("work",), query="zanzibar status meeting",
                                         now=NOW)])
        ranks = {c.key: c.ranks for c in cands}
        assert {"vector", "keyword"} <= set(ranks["rare"])
        assert all(c.namespace[1] == user for c in cands)

    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for (name,) in conn.execute("SELECT index_name FROM langmem_vector_indexes"
                                    " WHERE user_id = %s", (user,)).fetchall():
            # one index per DROP: Citus refuses several distributed objects in one
            for dropped in (name, f"{name}_kw"):
                conn.execute(f'DROP INDEX IF EXISTS "{dropped}"')
        conn.execute("DELETE FROM langmem_vector_indexes WHERE user_id = %s", (user,))
    ns = ("memories", user, "work")
    store.batch([PutOp(ns, f"f{i}", _value(f"weekly status meeting notes number {i}"))
                 for i in range(60)] + [PutOp(ns, "rare", _value("the zanzibar status meeting"))])
    recall_finds_rare()
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as other:
        assert other.index_large_users(threshold=50) == [user]
    recall_finds_rare()  # shaped as before: no index
    recall_finds_rare()  # the lookup sent with the last one found it
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        (name,) = conn.execute("DELETE FROM langmem_vector_indexes WHERE user_id = %s"
                               " RETURNING index_name", (user,)).fetchone() or ("",)
        for dropped in (name, f"{name}_kw"):
            conn.execute(f'DROP INDEX "{dropped}"')
    recall_finds_rare()  # shaped for the index that is gone: still finds the memory
    recall_finds_rare()
    assert shapes == [None, None, 64, 64, None]


def _elaborates(layer: MemoryLayer, key: str) -> list[str]:
    links = layer.store.batch([LinksOp("u1", (key,))])[0]
    return [x.dst_key for x in links if x.src_key == key and x.link_type == "elaborates"]


def test_write_path_links_a_threads_memories_in_order(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    first = layer.ingest("u1", [HumanMessage("I work at Acme.", id="t1")], thread_id="th")
    clock.advance(minutes=1)
    second = layer.ingest("u1", [HumanMessage("I live in Berlin.", id="t2")], thread_id="th")
    clock.advance(minutes=1)
    other = layer.ingest(
        "u1", [HumanMessage("I prefer window seats.", id="t3")], thread_id="elsewhere"
    )
    assert first.written and second.written and other.written
    assert _elaborates(layer, second.written[0]) == [first.written[-1]]
    assert _elaborates(layer, other.written[0]) == []  # another thread starts its own chain
    # Replaying the turn writes no second link.
    layer.ingest("u1", [HumanMessage("I live in Berlin.", id="t2")], thread_id="th")
    assert _elaborates(layer, second.written[0]) == [first.written[-1]]


def test_remember_with_a_thread_links_and_the_setting_turns_it_off(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    a = layer.remember("u1", "We talked about the trip.", kind=Kind.EPISODIC_EVENT, thread_id="s1")
    clock.advance(minutes=1)
    b = layer.remember("u1", "The flight leaves at noon.", kind=Kind.EPISODIC_EVENT, thread_id="s1")
    assert b.record.source.thread_id == "s1"
    assert _elaborates(layer, b.key) == [a.key]
    off = MemoryLayer(
        store, extraction="inline", clock=clock, settings=MemorySettings(link_thread_memories=False)
    )
    clock.advance(minutes=1)
    c = off.remember("u1", "Bring the passports.", kind=Kind.EPISODIC_EVENT, thread_id="s1")
    assert _elaborates(layer, c.key) == []
