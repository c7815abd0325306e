"""Context vectors on the real embedded PostgreSQL: a memory remembered into a thread is
embedded with the memories before it, recall's context strategy finds it by them, and
deleting any memory a vector was made from deletes the vector."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.sql.candidates import recall_candidates
from langmem_layer.store import ops as mops
from langmem_layer.store.ops.context import context_text
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings, ScriptedExtractor

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
TURNS = (
    "Do you still go to yoga classes on Tuesdays?",
    "I have been going for about three years now.",
    "Nice, I started running last month.",
    "How far do you run each morning?",
)


def _thread(layer: MemoryLayer, user: str = "u1", thread: str = "t1",
            turns: tuple[str, ...] = TURNS) -> list[str]:
    return [layer.remember(user, text, thread_id=thread, now=NOW + timedelta(minutes=i)).key
            for i, text in enumerate(turns)]


def _vectors(pg_uri: str, user: str = "u1") -> dict[str, tuple[str, str | None]]:
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            "SELECT key, after_key, before_that FROM langmem_context_vectors "
            "WHERE user_id = %s", [user]).fetchall()
    return {k: (a, b) for k, a, b in rows}


def test_each_memory_after_the_first_gets_the_two_before_it(store: PostgresMemoryStore,
                                                             pg_uri: str) -> None:
    keys = _thread(MemoryLayer(store))
    assert _vectors(pg_uri) == {keys[1]: (keys[0], None), keys[2]: (keys[1], keys[0]),
                                keys[3]: (keys[2], keys[1])}


def test_the_vector_embeds_the_earlier_memories_then_the_memory(
        store: PostgresMemoryStore, pg_uri: str, embedder: BagOfWordsEmbeddings) -> None:
    keys = _thread(MemoryLayer(store))
    with psycopg.connect(pg_uri) as conn:
        (stored,) = conn.execute(
            "SELECT embedding::text FROM langmem_context_vectors WHERE user_id = 'u1' "
            "AND key = %s", [keys[2]]).fetchone()  # type: ignore[misc]
    expected = embedder.embed_documents([context_text(TURNS[2], (TURNS[1], TURNS[0]))])[0]
    got = [float(x) for x in stored.strip("[]").split(",")]
    assert got == pytest.approx(expected, abs=1e-6)
    assert context_text("c", ("b", "a")) == "a\nb\nc"
    assert context_text("c", ("x" * 600,)) == "x" * 500 + "\nc"


def test_context_turns_bounds_them_and_zero_turns_them_off(store: PostgresMemoryStore,
                                                          pg_uri: str) -> None:
    keys = _thread(MemoryLayer(store, settings=MemorySettings(context_turns=1)))
    assert _vectors(pg_uri) == {keys[1]: (keys[0], None), keys[2]: (keys[1], None),
                                keys[3]: (keys[2], None)}
    _thread(MemoryLayer(store, settings=MemorySettings(context_turns=0)), user="u2")
    assert _vectors(pg_uri, "u2") == {}


def test_none_without_a_thread_or_without_vectors(store: PostgresMemoryStore,
                                                 pg_uri: str) -> None:
    layer = MemoryLayer(store)
    for text in TURNS:
        layer.remember("u1", text, now=NOW)
    assert _vectors(pg_uri) == {}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as plain:
        keys = _thread(MemoryLayer(plain), user="u3")
    assert len(keys) == len(TURNS) and _vectors(pg_uri, "u3") == {}


def test_another_users_thread_of_the_same_name_is_not_context(store: PostgresMemoryStore,
                                                              pg_uri: str) -> None:
    layer = MemoryLayer(store)
    _thread(layer, user="u1", turns=TURNS[:2])
    mine = _thread(layer, user="u2", turns=TURNS[2:])
    assert _vectors(pg_uri, "u2") == {mine[1]: (mine[0], None)}
    before = store.batch([mops.ContextBeforeOp("u2", ("memories", "u2", "work"), mine[0],
                                               "t1")])[0]
    assert before == ()


def test_deleting_a_memory_deletes_the_vectors_holding_its_words(store: PostgresMemoryStore,
                                                                 pg_uri: str) -> None:
    layer = MemoryLayer(store)
    keys = _thread(layer)
    layer.forget("u1", keys[0])  # archived: its words are still kept, and so are the vectors
    assert set(_vectors(pg_uri)) == set(keys[1:])
    layer.forget("u1", keys[0], hard=True)
    assert _vectors(pg_uri) == {keys[3]: (keys[2], keys[1])}
    layer.forget("u1", keys[2], hard=True)
    assert _vectors(pg_uri) == {}


def _embedding(pg_uri: str, key: str) -> list[float]:
    with psycopg.connect(pg_uri) as conn:
        (stored,) = conn.execute(
            "SELECT embedding::text FROM langmem_context_vectors WHERE user_id = 'u1' "
            "AND key = %s", [key]).fetchone()  # type: ignore[misc]
    return [float(x) for x in stored.strip("[]").split(",")]


def test_a_correction_makes_the_vectors_holding_its_words_again(
        store: PostgresMemoryStore, pg_uri: str, embedder: BagOfWordsEmbeddings) -> None:
    layer = MemoryLayer(store)
    keys = _thread(layer)
    chains = _vectors(pg_uri)
    new = "I have been going for about four years, on Mondays."
    layer.correct("u1", keys[1], new)
    # The same chains, each vector made from the corrected text: its own, and those of
    # the two memories it is context for.
    assert _vectors(pg_uri) == chains
    for key, text, before in ((keys[1], new, (TURNS[0],)),
                              (keys[2], TURNS[2], (new, TURNS[0])),
                              (keys[3], TURNS[3], (TURNS[2], new))):
        expected = embedder.embed_documents([context_text(text, before)])[0]
        assert _embedding(pg_uri, key) == pytest.approx(expected, abs=1e-6)
    # With context_turns=0 the vectors holding the old text just go.
    MemoryLayer(store, settings=MemorySettings(context_turns=0)).correct(
        "u1", keys[0], "Do you still go to pilates?")
    assert _vectors(pg_uri) == {keys[3]: (keys[2], keys[1])}


def test_recall_finds_a_memory_by_its_context(store: PostgresMemoryStore) -> None:
    layer = MemoryLayer(store)
    keys = _thread(layer)
    found = {r.key: r for r in layer.recall("u1", "yoga", now=NOW + timedelta(days=1))}
    # "I have been going for about three years now" names no yoga; its context does.
    assert keys[1] in found and "context" in found[keys[1]].sources
    off = MemoryLayer(store, settings=MemorySettings(context_candidates=0))
    assert all("context" not in r.sources
               for r in off.recall("u1", "yoga", now=NOW + timedelta(days=1)))


def test_a_question_like_no_context_vector_brings_none(store: PostgresMemoryStore) -> None:
    _thread(MemoryLayer(store))

    def by_context(query: str, floor: float) -> set[str]:
        (cands,) = store.batch([mops.RecallOp("u1", ("work",), query=query, now=NOW,
                                              context=40, context_floor=floor)])
        return {c.key for c in cands if "context" in c.ranks}

    # Unlike every context vector: below the floor, the strategy takes none of them.
    floor = MemorySettings().context_similarity_floor
    assert by_context("weather forecast", floor) == set()
    assert by_context("yoga", floor) != set()
    assert len(by_context("weather forecast", -1.0)) == len(TURNS) - 1


def _ingest(store: PostgresMemoryStore, user: str, thread: str | None, minute: int,
            *contents: str) -> list[str]:
    layer = MemoryLayer(store, extraction="inline", extractor=ScriptedExtractor(
        [MemoryOperation(op=OpType.ADD, content=c) for c in contents]))
    done = layer.ingest(user, [HumanMessage(" ".join(contents))], thread_id=thread,
                        now=NOW + timedelta(minutes=minute))
    return list(done.written)


def test_the_write_path_gives_the_memories_it_extracts_context_vectors(
        store: PostgresMemoryStore, pg_uri: str) -> None:
    # One turn's memories join the chain in order, so the second has the first as context.
    a = _ingest(store, "u1", "t1", 0, "Still goes to yoga classes on Tuesdays.",
                "Likes the teacher there.")
    b = _ingest(store, "u1", "t1", 1, "Has been going for about three years now.")
    assert len(a) == 2 and len(b) == 1
    assert _vectors(pg_uri) == {a[1]: (a[0], None), b[0]: (a[1], a[0])}
    # A memory the turn repeats is reinforced, not written: no new vector.
    assert _ingest(store, "u1", "t1", 2, "Likes the teacher there.") == []
    assert len(_vectors(pg_uri)) == 2
    found = {r.key: r for r in MemoryLayer(store).recall(
        "u1", "yoga classes", now=NOW + timedelta(days=1))}
    assert b[0] in found and "context" in found[b[0]].sources
    # Without a thread, none.
    _ingest(store, "u2", None, 0, "Plays chess.", "Plays the cello.")
    assert _vectors(pg_uri, "u2") == {}


def test_the_context_strategy_binds_the_user_and_skips_large_users() -> None:
    sql, params = recall_candidates(
        "u1", ["memories.u1.work"], now=NOW, statuses=("active",), query_text="yoga",
        query_vector=[0.1] * 4, model_id="m", context_limit=40)
    assert "langmem_context_vectors v" in sql and "v.user_id = %(user_id)s" in sql
    assert params["n_cx"] == 40
    large, _ = recall_candidates(
        "u1", ["memories.u1.work"], now=NOW, statuses=("active",), query_text="yoga",
        query_vector=[0.1] * 4, model_id="m", context_limit=40, indexed_dims=4)
    assert "langmem_context_vectors" not in large
