"""BaseStore conformance: our two stores against LangGraph's InMemoryStore.

The shared tests run once per implementation (``impl``): PostgresMemoryStore (its async
methods go through ``abatch`` → ``batch`` in a worker thread), AsyncPostgresMemoryStore,
and InMemoryStore with the same deterministic embedder. They check only behaviour all
three must agree on, outside the ``"memories"`` tenant root: round trips, timestamps,
namespace validation, prefix search, paging, filters, vector ranking and scores,
``index=False`` / ``index=[...]``, list_namespaces and mixed batches. A subset repeats
through the synchronous methods (``sync_impl``).

The last part checks what only our stores promise: TTL on the movable clock, richer
filters, typed-memory validation, tenancy, idempotent ``setup()``, in-batch op order,
and that an unchanged LangGraph graph runs on our stores.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import psycopg
import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
    get_text_at_path,
)
from langgraph.store.memory import InMemoryStore

from langmem_layer.errors import (
    InvalidFilterError,
    InvalidMemoryError,
    InvalidNamespaceError,
    SyncCallOnEventLoopError,
)
from langmem_layer.sql.migrations import MIGRATIONS
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore
from tests.fakes import BagOfWordsEmbeddings, Clock

OURS = ("ours_sync", "ours_async")


def _make(request: pytest.FixtureRequest, embedder: BagOfWordsEmbeddings) -> BaseStore:
    if request.param == "inmemory":
        return InMemoryStore(index={"embed": embedder, "dims": 64})
    return request.getfixturevalue("store" if request.param == "ours_sync" else "astore")


@pytest.fixture(params=["ours_sync", "ours_async", "inmemory"])
def impl(request: pytest.FixtureRequest, embedder: BagOfWordsEmbeddings) -> BaseStore:
    return _make(request, embedder)


@pytest.fixture(params=["ours_sync", "inmemory"])
def sync_impl(request: pytest.FixtureRequest, embedder: BagOfWordsEmbeddings) -> BaseStore:
    return _make(request, embedder)


def keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


def cosine(embedder: BagOfWordsEmbeddings, query: str, text: str) -> float:
    q, d = embedder.embed_query(query), embedder.embed_documents([text])[0]
    return sum(a * b for a, b in zip(q, d, strict=True))  # both are unit vectors


# -- shared conformance (async methods) ------------------------------------------------


async def test_put_get_round_trip_and_overwrite(impl: BaseStore, clock: Clock) -> None:
    value = {"text": "hello", "n": 3, "nested": {"xs": [1, 2.5, None, True]}}
    await impl.aput(("docs",), "a", value)
    item = await impl.aget(("docs",), "a")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("docs",), "a", value)
    assert item.created_at is not None and item.updated_at is not None
    assert item.created_at.tzinfo is not None
    clock.advance(seconds=5)  # our stores' time; InMemoryStore uses the wall clock
    await impl.aput(("docs",), "a", {"v": 2})
    second = await impl.aget(("docs",), "a")
    assert second is not None and second.value == {"v": 2}
    assert second.updated_at > item.updated_at
    await impl.aput(("docs",), "a", value)
    await impl.aput(("org", "team"), "a", {"v": "deeper"})  # same key, other namespace
    assert (await impl.aget(("docs",), "a")).value == value  # type: ignore[union-attr]
    assert (await impl.aget(("org", "team"), "a")).namespace == ("org", "team")  # type: ignore[union-attr]
    assert await impl.aget(("org",), "a") is None
    assert await impl.aget(("docs",), "nope") is None


async def test_delete_removes_only_that_item(impl: BaseStore) -> None:
    await impl.aput(("docs",), "a", {"v": 1})
    await impl.aput(("docs",), "b", {"v": 2})
    await impl.adelete(("docs",), "a")
    assert await impl.aget(("docs",), "a") is None
    assert (await impl.aget(("docs",), "b")).value == {"v": 2}  # type: ignore[union-attr]
    assert keys(await impl.asearch(("docs",))) == ["b"]
    await impl.adelete(("docs",), "never-existed")  # deleting a missing key is a no-op


@pytest.mark.parametrize(
    "namespace", [(), ("",), ("a", ""), ("a.b",), ("x", "y.z"), ("langgraph",), ("langgraph", "x")]
)
async def test_invalid_namespace_put_raises_value_error(
    impl: BaseStore, namespace: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError):
        await impl.aput(namespace, "k", {"v": 1})


async def test_invalid_labels_in_reads_raise_value_error(impl: BaseStore) -> None:
    with pytest.raises(ValueError):
        await impl.aget(("a.b",), "k")
    with pytest.raises(ValueError):
        await impl.asearch(("a", ""))
    with pytest.raises(ValueError):
        await impl.alist_namespaces(prefix=("a.b",))


async def test_search_prefix_matches_whole_labels(impl: BaseStore) -> None:
    await impl.aput(("a",), "1", {"v": 1})
    await impl.aput(("a", "b"), "2", {"v": 2})
    await impl.aput(("a", "b", "c"), "3", {"v": 3})
    await impl.aput(("ab",), "4", {"v": 4})
    await impl.aput(("a_",), "5", {"v": 5})  # '_' is a LIKE wildcard: must be literal
    await impl.aput(("ab", "c"), "6", {"v": 6})
    assert sorted(keys(await impl.asearch(("a",)))) == ["1", "2", "3"]
    assert sorted(keys(await impl.asearch(("a", "b")))) == ["2", "3"]
    assert sorted(keys(await impl.asearch(("ab",)))) == ["4", "6"]
    assert sorted(keys(await impl.asearch(("a_",)))) == ["5"]
    assert await impl.asearch(("zzz",)) == []


async def test_search_limit_offset_pages_cover_everything_once(impl: BaseStore) -> None:
    for i in range(7):
        await impl.aput(("page",), f"k{i}", {"i": i})
    pages = [keys(await impl.asearch(("page",), limit=3, offset=o)) for o in (0, 3, 6, 9)]
    assert [len(p) for p in pages] == [3, 3, 1, 0]
    flat = [k for p in pages for k in p]
    assert sorted(flat) == [f"k{i}" for i in range(7)] and len(set(flat)) == 7
    assert len(await impl.asearch(("page",))) == 7  # default limit is 10


async def test_filter_equality_and_ne(impl: BaseStore) -> None:
    await impl.aput(("f",), "r1", {"color": "red", "size": 1})
    await impl.aput(("f",), "r2", {"color": "red", "size": 2})
    await impl.aput(("f",), "b1", {"color": "blue", "size": 1})
    await impl.aput(("f",), "none", {"size": 1})  # no "color" at all
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"color": "red"}, ["r1", "r2"]),
        ({"color": "red", "size": 2}, ["r2"]),
        ({"color": {"$eq": "blue"}}, ["b1"]),
        ({"color": {"$ne": "red"}}, ["b1", "none"]),  # $ne keeps items lacking the field
        ({"color": "green"}, []),
    ]
    for filt, expected in cases:
        assert sorted(keys(await impl.asearch(("f",), filter=filt))) == expected, filt


@pytest.mark.parametrize(
    ("filt", "expected"),
    [
        ({"$gt": 5}, [9.5, 10, 100]),
        ({"$gte": 10}, [10, 100]),
        ({"$lt": 10}, [2, 9.5]),
        ({"$lte": 9.5}, [2, 9.5]),
        ({"$gt": 2, "$lt": 100}, [9.5, 10]),
        ({"$gte": 9.5, "$lte": 9.5}, [9.5]),
    ],
)
async def test_numeric_comparisons_compare_numbers(
    impl: BaseStore, filt: dict[str, float], expected: list[float]
) -> None:
    for v in (2, 10, 9.5, 100):
        await impl.aput(("nums",), f"s{v}", {"score": v})
    found = await impl.asearch(("nums",), filter={"score": filt})
    assert sorted(i.value["score"] for i in found) == expected


async def test_nested_dict_filter(impl: BaseStore) -> None:
    await impl.aput(("n",), "en", {"meta": {"lang": "en", "v": 1}})
    await impl.aput(("n",), "fr", {"meta": {"lang": "fr", "v": 1}})
    await impl.aput(("n",), "flat", {"lang": "en"})
    assert keys(await impl.asearch(("n",), filter={"meta": {"lang": "en"}})) == ["en"]
    assert keys(await impl.asearch(("n",), filter={"meta": {"lang": "fr", "v": 1}})) == ["fr"]
    found = await impl.asearch(("n",), filter={"meta": {"lang": {"$ne": "fr"}, "v": {"$gte": 1}}})
    assert keys(found) == ["en"]


async def test_query_search_ranks_by_similarity_with_cosine_score(
    impl: BaseStore, embedder: BagOfWordsEmbeddings
) -> None:
    docs = {
        "best": {"text": "apple banana cherry durian"},
        "half": {"text": "apple banana grape melon"},
        "none": {"text": "dog elephant fox giraffe"},
    }
    for k, v in docs.items():
        await impl.aput(("fruit",), k, v)
    query = "apple banana cherry durian"
    found = await impl.asearch(("fruit",), query=query)
    assert keys(found)[:2] == ["best", "half"]
    assert set(keys(found)) == set(docs)
    scores = [i.score for i in found]
    assert all(s is not None for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    for item in found:  # the default field "$" embeds the whole value as JSON
        expected = cosine(embedder, query, get_text_at_path(docs[item.key], "$")[0])
        assert item.score == pytest.approx(expected, abs=1e-6)
    assert len(await impl.asearch(("fruit",), query=query, limit=1)) == 1
    assert keys(await impl.asearch(("fruit",), query=query, limit=1, offset=1)) == ["half"]


async def test_query_search_combines_with_filter(impl: BaseStore) -> None:
    await impl.aput(("fruit",), "best", {"text": "apple banana cherry", "ok": False})
    await impl.aput(("fruit",), "good", {"text": "apple banana", "ok": True})
    await impl.aput(("fruit",), "weak", {"text": "apple dog", "ok": True})
    found = await impl.asearch(("fruit",), query="apple banana cherry", filter={"ok": True})
    assert keys(found) == ["good", "weak"]


async def test_index_false_item_never_ranks_by_similarity(impl: BaseStore) -> None:
    await impl.aput(("idx",), "hidden", {"text": "apple banana cherry"}, index=False)
    await impl.aput(("idx",), "shown", {"text": "apple banana"})
    found = await impl.asearch(("idx",), query="apple banana cherry")
    assert keys(found)[0] == "shown" and found[0].score is not None
    # InMemoryStore pads results with unindexed items (score None); ours leaves them out.
    assert all(i.score is None for i in found if i.key == "hidden")
    if not isinstance(impl, InMemoryStore):
        assert keys(found) == ["shown"]
    # Without a query it is an ordinary item.
    assert sorted(keys(await impl.asearch(("idx",)))) == ["hidden", "shown"]


async def test_index_fields_embeds_only_those_fields(
    impl: BaseStore, embedder: BagOfWordsEmbeddings
) -> None:
    for k, title, body in [
        ("1", "apple banana", "dog elephant"),
        ("2", "dog elephant", "apple banana"),
    ]:
        await impl.aput(("tf",), k, {"title": title, "body": body}, index=["title"])
    found = await impl.asearch(("tf",), query="dog elephant")
    assert keys(found) == ["2", "1"]
    assert found[0].score == pytest.approx(1.0, abs=1e-6)
    assert found[1].score == pytest.approx(cosine(embedder, "dog elephant", "apple banana"))


NAMESPACES = [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "c"), ("x", "y")]


async def _fill_namespaces(s: BaseStore) -> None:
    for ns in NAMESPACES:
        await s.aput(ns, "k", {"v": 1})
        await s.aput(ns, "k2", {"v": 2})  # two items must not list the namespace twice


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, sorted(NAMESPACES)),
        ({"prefix": ("a",)}, [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]),
        ({"prefix": ("a", "b", "c")}, [("a", "b", "c")]),
        ({"suffix": ("c",)}, [("a", "b", "c"), ("x", "b", "c")]),
        ({"prefix": ("*", "b")}, [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "c")]),
        ({"suffix": ("b", "*")}, [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "c")]),
        ({"prefix": ("a",), "suffix": ("d",)}, [("a", "b", "d")]),
        ({"max_depth": 2}, [("a", "b"), ("a", "e"), ("x", "b"), ("x", "y")]),
        ({"max_depth": 1}, [("a",), ("x",)]),
        ({"prefix": ("x",), "max_depth": 2}, [("x", "b"), ("x", "y")]),
        ({"limit": 2, "offset": 1}, sorted(NAMESPACES)[1:3]),
        ({"prefix": ("zz",)}, []),
    ],
)
async def test_list_namespaces(
    impl: BaseStore, kwargs: dict[str, Any], expected: list[tuple[str, ...]]
) -> None:
    await _fill_namespaces(impl)
    assert await impl.alist_namespaces(**kwargs) == expected


async def test_batch_mixed_ops_results_in_op_order(impl: BaseStore) -> None:
    await impl.aput(("mix",), "a", {"v": 1})
    await impl.aput(("mix", "sub"), "b", {"v": 2})
    ns = ("mix",)
    listing = ListNamespacesOp((MatchCondition("prefix", ns),), None, 10, 0)
    ops = [
        GetOp(ns, "a"),
        SearchOp(ns, {"v": 2}),
        GetOp(ns, "x"),
        listing,
        PutOp(ns, "c", {"v": 3}),
    ]
    get_a, search, get_x, listed, put = await impl.abatch(ops)
    assert get_a.key == "a" and get_a.value == {"v": 1}
    assert keys(search) == ["b"] and get_x is None and put is None
    assert listed == [("mix",), ("mix", "sub")]
    assert (await impl.aget(("mix",), "c")).value == {"v": 3}  # type: ignore[union-attr]


# -- shared conformance through the sync methods ----------------------------------------


def test_sync_round_trip_delete_and_missing(sync_impl: BaseStore) -> None:
    sync_impl.put(("docs", "x"), "a", {"text": "hello"})
    item = sync_impl.get(("docs", "x"), "a")
    assert item is not None and item.value == {"text": "hello"}
    assert sync_impl.get(("docs", "x"), "b") is None
    sync_impl.delete(("docs", "x"), "a")
    assert sync_impl.get(("docs", "x"), "a") is None
    for bad in [("a.b",), ("",), ("langgraph",), ()]:
        with pytest.raises(ValueError):
            sync_impl.put(bad, "k", {"v": 1})


def test_sync_search_filters_query_and_paging(sync_impl: BaseStore) -> None:
    for v in (2, 10, 9.5, 100):
        sync_impl.put(("nums",), f"s{v}", {"score": v, "text": f"number {v}"})
    sync_impl.put(("numsx",), "other", {"score": 50})
    found = sync_impl.search(("nums",), filter={"score": {"$gt": 5}})
    assert sorted(i.value["score"] for i in found) == [9.5, 10, 100]
    pages = [keys(sync_impl.search(("nums",), limit=2, offset=o)) for o in (0, 2)]
    assert sorted(pages[0] + pages[1]) == ["s10", "s100", "s2", "s9.5"]
    sync_impl.put(("fruit",), "best", {"text": "apple banana cherry"})
    sync_impl.put(("fruit",), "meh", {"text": "apple dog"})
    assert keys(sync_impl.search(("fruit",), query="apple banana cherry")) == ["best", "meh"]


def test_sync_list_namespaces_and_batch(sync_impl: BaseStore) -> None:
    for ns in NAMESPACES:
        sync_impl.put(ns, "k", {"v": 1})
    assert sync_impl.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "e")]
    assert sync_impl.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("x", "b", "c")]
    res = sync_impl.batch([GetOp(("x", "y"), "k"), GetOp(("x", "y"), "nope")])
    assert res[0].value == {"v": 1} and res[1] is None


# -- our stores only -------------------------------------------------------------------


@pytest.fixture(params=OURS)
def ours(request: pytest.FixtureRequest) -> PostgresMemoryStore | AsyncPostgresMemoryStore:
    return request.getfixturevalue("store" if request.param == "ours_sync" else "astore")


async def test_created_at_survives_overwrite(ours: BaseStore, clock: Clock) -> None:
    # InMemoryStore resets created_at on every put; ours keeps the first write's time.
    await ours.aput(("docs",), "a", {"v": 1})
    created = clock.now
    clock.advance(minutes=3)
    await ours.aput(("docs",), "a", {"v": 2})
    item = await ours.aget(("docs",), "a")
    assert item is not None and item.created_at == created and item.updated_at == clock.now


async def test_ttl_expiry_refresh_and_sweep(ours: BaseStore, clock: Clock, pg_uri: str) -> None:
    assert ours.supports_ttl is True
    await ours.aput(("t",), "a", {"v": 1}, ttl=10)
    await ours.aput(("t",), "b", {"v": 2}, ttl=10)
    await ours.aput(("t",), "keep", {"v": 3})
    clock.advance(minutes=9)
    assert await ours.aget(("t",), "a") is not None  # refreshes "a": expires at 19
    clock.advance(minutes=9)  # t=18: "b" expired at 10, "a" lives on
    assert await ours.aget(("t",), "b") is None
    assert await ours.aget(("t",), "a", refresh_ttl=False) is not None  # no refresh
    assert sorted(keys(await ours.asearch(("t",)))) == ["a", "keep"]  # refreshes: 28
    clock.advance(minutes=9)  # t=27
    assert await ours.aget(("t",), "a", refresh_ttl=False) is not None
    clock.advance(minutes=2)  # t=29 > 28
    assert await ours.aget(("t",), "a") is None
    assert await ours.alist_namespaces() == [("t",)]
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT count(*) FROM langmem_items").fetchone()[0] == 3
    swept = ours.sweep_ttl()
    assert (await swept if asyncio.iscoroutine(swept) else swept) == 2
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT key FROM langmem_items").fetchall() == [("keep",)]


def test_put_after_expiry_starts_a_new_item(store: PostgresMemoryStore, clock: Clock) -> None:
    # An expired item is gone ("never returned"), even before sweep_ttl removes its row;
    # putting the key again creates a new item, so created_at must be the new put's time.
    store.put(("e",), "k", {"v": 1}, ttl=1)
    clock.advance(minutes=5)
    assert store.get(("e",), "k") is None
    store.put(("e",), "k", {"v": 2})
    item = store.get(("e",), "k")
    assert item is not None and item.value == {"v": 2}
    assert item.created_at == clock.now, "created_at leaked from the expired item"


def test_ttl_config_default_ttl_and_refresh_on_read(
    store: PostgresMemoryStore, pg_uri: str, index: dict, clock: Clock
) -> None:
    ttl = {"default_ttl": 5, "refresh_on_read": False}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock, ttl=ttl) as s:
        s.put(("t",), "default", {"v": 1})
        s.put(("t",), "forever", {"v": 2}, ttl=None)
        clock.advance(minutes=4)
        assert s.get(("t",), "default") is not None  # refresh_on_read=False: no refresh
        clock.advance(minutes=2)
        assert s.get(("t",), "default") is None
        assert s.get(("t",), "forever") is not None


async def test_dotted_keys_in_and_nin(ours: BaseStore) -> None:
    await ours.aput(("f",), "en", {"meta": {"lang": "en", "n": 1}, "tag": "a"})
    await ours.aput(("f",), "fr", {"meta": {"lang": "fr", "n": 5}, "tag": "b"})
    await ours.aput(("f",), "de", {"meta": {"lang": "de", "n": 10}})
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"meta.lang": "fr"}, ["fr"]),
        ({"meta.n": {"$gte": 5}}, ["de", "fr"]),
        ({"tag": {"$in": ["a", "b", "z"]}}, ["en", "fr"]),
        ({"tag": {"$nin": ["a"]}}, ["de", "fr"]),  # a missing field is "not in"
        ({"meta.n": {"$in": [1, 10]}}, ["de", "en"]),
    ]
    for filt, expected in cases:
        assert sorted(keys(await ours.asearch(("f",), filter=filt))) == expected, filt


async def test_and_or_combinators_and_bad_filters(ours: BaseStore) -> None:
    for k, v in {"a": {"x": 1, "y": "p"}, "b": {"x": 2, "y": "q"}, "c": {"x": 3, "y": "p"}}.items():
        await ours.aput(("c",), k, v)
    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"$or": [{"x": 1}, {"x": {"$gte": 3}}]}, ["a", "c"]),
        ({"$and": [{"y": "p"}, {"x": {"$gt": 1}}]}, ["c"]),
        ({"$or": [{"$and": [{"y": "q"}, {"x": 2}]}, {"x": 1}], "y": {"$ne": "z"}}, ["a", "b"]),
    ]
    for filt, expected in cases:
        assert sorted(keys(await ours.asearch(("c",), filter=filt))) == expected, filt
    bad: list[dict[str, Any]] = [
        {"x": {"$regex": "a"}}, {"x": {"$gt": [1]}}, {"x": {"$in": 3}}, {"$or": []}, {"$gt": 1}
    ]  # fmt: skip
    for filt in bad:
        with pytest.raises(InvalidFilterError) as exc:
            await ours.asearch(("c",), filter=filt)
        assert isinstance(exc.value, ValueError)


T0 = "2026-11-18T15:00:00Z"


def _memory(**over: Any) -> dict[str, Any]:
    value = {"content": "Prefers tea", "kind": "preference", "layer": "semantic"}
    return {**value, "occurred_at": T0, "last_accessed_at": T0, **over}


async def test_typed_memory_validation(ours: BaseStore) -> None:
    ns = ("memories", "u1", "work")
    with pytest.raises(InvalidMemoryError) as exc:
        await ours.aput(ns, "bad", _memory(confidence=5))
    assert isinstance(exc.value, ValueError)
    # One bad memory in a batch writes nothing at all.
    with pytest.raises(InvalidMemoryError):
        await ours.abatch([PutOp(ns, "good", _memory()), PutOp(ns, "bad", _memory(confidence=5))])
    assert await ours.aget(ns, "bad") is None and await ours.aget(ns, "good") is None
    await ours.aput(ns, "good", _memory(confidence=0.9))
    item = await ours.aget(ns, "good")
    assert item is not None and item.value["confidence"] == 0.9 and item.value["content_hash"]


async def test_langmem_style_value_is_a_generic_item(ours: BaseStore) -> None:
    value = {"kind": "Memory", "content": {"content": "x"}}
    await ours.aput(("memories", "u1"), "m1", value)
    await ours.aput(("memories", "u1", "work"), "m2", value)
    assert (await ours.aget(("memories", "u1"), "m1")).value == value  # type: ignore[union-attr]
    assert (await ours.aget(("memories", "u1", "work"), "m2")).value == value  # type: ignore[union-attr]


async def test_tenancy_refuses_cross_user_access(ours: BaseStore) -> None:
    await ours.aput(("memories", "u1"), "k", {"text": "u1 secret"})
    await ours.aput(("memories", "u2"), "k", {"text": "u2 secret"})
    await ours.aput(("shared",), "k", {"text": "public"})
    for bad in [("memories",), ("memories", "*")]:
        with pytest.raises(InvalidNamespaceError):
            await ours.asearch(bad)
    with pytest.raises(InvalidNamespaceError):
        await ours.aput(("memories",), "k", {"v": 1})
    found = await ours.asearch(("memories", "u1"), query="secret")
    assert [i.value["text"] for i in found] == ["u1 secret"]
    assert [i.namespace for i in await ours.asearch(())] == [("shared",)]
    assert await ours.alist_namespaces(prefix=("memories", "u2")) == [("memories", "u2")]


async def test_batch_validates_namespaces_and_reads_own_writes(ours: BaseStore) -> None:
    # Ops passed straight to batch skip BaseStore's checks; ours validates anyway.
    for op in [PutOp(("a.b",), "k", {"v": 1}), GetOp(("",), "k"), PutOp(("langgraph",), "k", {})]:
        with pytest.raises(InvalidNamespaceError):
            await ours.abatch([op])
    # InMemoryStore applies all puts after all reads; ours runs ops in order.
    ns = ("rw",)
    res = await ours.abatch(
        [PutOp(ns, "k", {"v": 1}), GetOp(ns, "k"), PutOp(ns, "k", None), GetOp(ns, "k")]
    )
    assert res[1].value == {"v": 1} and res[3] is None


def test_setup_is_idempotent_even_without_version_table(
    store: PostgresMemoryStore, pg_uri: str
) -> None:
    store.put(("keep",), "k", {"v": 1})
    assert store.setup() == []
    assert store.setup() == []
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("DROP TABLE langmem_migrations")
    assert store.setup() == list(range(len(MIGRATIONS)))
    assert store.setup() == []
    assert store.get(("keep",), "k").value == {"v": 1}  # type: ignore[union-attr]


async def test_async_setup_idempotent_and_sync_call_from_worker_thread(
    astore: AsyncPostgresMemoryStore,
) -> None:
    assert await astore.setup() == []
    await astore.aput(("w",), "k", {"v": 1})
    item = await asyncio.to_thread(astore.get, ("w",), "k")
    assert item is not None and item.value == {"v": 1}
    with pytest.raises(SyncCallOnEventLoopError, match="deadlock"):
        astore.get(("w",), "k")


class _State(TypedDict, total=False):
    user: str
    text: str
    found: list[str]


def _graph(remember: Any, recall: Any) -> StateGraph:
    """START → remember → recall → END: plain LangGraph, nothing of ours."""
    g = StateGraph(_State)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    return g


def test_langgraph_graph_runs_on_sync_store(store: PostgresMemoryStore) -> None:
    def remember(state: _State, *, store: BaseStore) -> dict[str, Any]:
        store.put(("notes", state["user"]), "n1", {"text": state["text"]})
        return {}

    def recall(state: _State) -> dict[str, Any]:
        hits = get_store().search(("notes", state["user"]), query=state["text"])
        return {"found": [h.value["text"] for h in hits]}

    graph = _graph(remember, recall).compile(store=store)
    out = graph.invoke({"user": "ann", "text": "likes green tea"})
    assert out["found"] == ["likes green tea"]
    assert store.get(("notes", "ann"), "n1") is not None


async def test_langgraph_graph_runs_on_async_store(astore: AsyncPostgresMemoryStore) -> None:
    async def remember(state: _State, *, store: BaseStore) -> dict[str, Any]:
        await store.aput(("memories", state["user"]), "n1", {"text": state["text"]})
        return {}

    async def recall(state: _State) -> dict[str, Any]:
        hits = await get_store().asearch(("memories", state["user"]), query=state["text"])
        return {"found": [h.value["text"] for h in hits]}

    graph = _graph(remember, recall).compile(store=astore)
    out = await graph.ainvoke({"user": "bob", "text": "plays chess"})
    assert out["found"] == ["plays chess"]
