from langmem_layer.store.sync import PostgresMemoryStore


def test_put_get_search(store: PostgresMemoryStore) -> None:
    store.put(("docs",), "a", {"text": "hello world"})
    item = store.get(("docs",), "a")
    assert item is not None and item.value == {"text": "hello world"}
    assert [i.key for i in store.search(("docs",), query="hello")] == ["a"]


async def test_async_put_get(astore) -> None:
    await astore.aput(("docs",), "a", {"text": "hello"})
    item = await astore.aget(("docs",), "a")
    assert item is not None and item.value == {"text": "hello"}
