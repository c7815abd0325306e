"""memory.admin.browse and set_surface: the panel's calls, sync and async, and their errors."""

from __future__ import annotations

import pytest

from langmem_layer import (
    InvalidInputError,
    InvalidMemoryError,
    MemoryLayer,
    MemoryNotFoundError,
    MemorySettings,
    PostgresMemoryStore,
)
from langmem_layer.types import Kind, Policy


@pytest.fixture
def layer(store: PostgresMemoryStore) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline")


def test_browse_filters_and_pages(layer: MemoryLayer) -> None:
    fact = layer.remember("u", "Lives in Lisbon.", kind=Kind.PROFILE_FACT)
    loop = layer.remember("u", "Will call Ana.", kind=Kind.OPEN_LOOP, profile="home")
    old = layer.remember("u", "Liked sushi.", kind=Kind.PREFERENCE)
    layer.forget("u", old.key)
    layer.remember("v", "Someone else's memory.")
    keys = lambda found: {r.key for r in found}  # noqa: E731
    assert keys(layer.admin.browse("u")) == {fact.key, loop.key, old.key}
    assert keys(layer.admin.browse("u", kinds="open_loop")) == {loop.key}
    assert keys(layer.admin.browse("u", layers=["semantic"], statuses="active")) == {fact.key}
    assert keys(layer.admin.browse("u", statuses=["archived"])) == {old.key}
    assert keys(layer.admin.browse("u", profile="home")) == {loop.key}
    ranked = layer.admin.browse("u", query="Lisbon")
    assert ranked[0].key == fact.key and ranked[0].similarity is not None
    pages = [layer.admin.browse("u", limit=2, offset=n) for n in (0, 2)]
    assert [len(p) for p in pages] == [2, 1]
    assert keys(pages[0] + pages[1]) == keys(layer.admin.browse("u"))
    with pytest.raises(InvalidMemoryError):
        layer.admin.browse("u", kinds="bogus")
    with pytest.raises(InvalidInputError):
        layer.admin.browse("u", offset=-1)
    with pytest.raises(InvalidInputError):
        layer.admin.browse("u", statuses="gone")


def test_a_search_lists_only_what_matches(layer: MemoryLayer, pg_uri: str) -> None:
    peanuts = layer.remember("s", "Is allergic to peanuts.", kind=Kind.PROFILE_FACT)
    penicillin = layer.remember("s", "Allergic to penicillin since childhood.",
                                kind=Kind.PROFILE_FACT)
    for text in ("Prefers tea over coffee.", "Lives in Lisbon.", "Works at Acme Robotics.",
                 "Name is Dana."):
        layer.remember("s", text, kind=Kind.PROFILE_FACT)
    porto = layer.remember("s", "Visited Porto in May.")  # episodic
    assert len(layer.admin.browse("s")) == 7
    # A word in common matches (recall's keyword strategy: stemmed, any term).
    found = layer.admin.browse("s", query="Allergic reaction")
    assert {r.key for r in found} == {peanuts.key, penicillin.key}
    assert found[0].similarity >= found[1].similarity  # type: ignore[operator]
    assert [r.key for r in layer.admin.browse("s", query="allergic", limit=1, offset=1)] == [
        layer.admin.browse("s", query="allergic")[1].key]  # pages within the matches
    assert layer.admin.browse("s", query="astronomy") == []  # the others are not listed
    # Without a word in common, a memory needs the search floor (and at least the
    # episodic floor for an episodic memory): here every floor is met but the episodic one.
    loose = MemoryLayer(layer.store, settings=MemorySettings(
        search_similarity_floor=-1, episodic_similarity_floor=1))
    assert {r.key for r in loose.admin.browse("s", query="astronomy")} == {
        r.key for r in layer.admin.browse("s")} - {porto.key}
    # A store without embeddings matches words only.
    with PostgresMemoryStore.from_conn_string(pg_uri, index=None) as plain:
        words = MemoryLayer(plain).admin.browse("s", query="penicillin")
    assert [(r.key, r.similarity) for r in words] == [(penicillin.key, None)]


def test_set_surface_records_history(layer: MemoryLayer) -> None:
    m = layer.remember("u", "Avoid mentioning the exam.")
    after = layer.admin.set_surface("u", m.key, pinned=True, policy="avoid")
    assert after.record.pinned and after.record.policy is Policy.AVOID
    assert layer.get("u", m.key).record == after.record
    assert [(h.event, h.old, h.new) for h in layer.admin.history("u", m.key)] == [
        ("pinned", "false", "true"), ("policy", "speak", "avoid")]
    same = layer.admin.set_surface("u", m.key, pinned=True)  # no change: no history
    assert len(same.record.history) == 2
    with pytest.raises(InvalidInputError):
        layer.admin.set_surface("u", m.key)
    with pytest.raises(InvalidInputError):
        layer.admin.set_surface("u", m.key, pinned="yes")  # type: ignore[typeddict-item]
    with pytest.raises(InvalidMemoryError):
        layer.admin.set_surface("u", m.key, policy="shout")
    with pytest.raises(MemoryNotFoundError):
        layer.admin.set_surface("v", m.key, pinned=False)  # another user's id: not found


async def test_async_twins(store: PostgresMemoryStore) -> None:
    layer = MemoryLayer(store, extraction="inline")
    m = await layer.aremember("w", "Drinks oat milk.")
    assert [r.key for r in await layer.admin.abrowse("w")] == [m.key]
    assert (await layer.admin.aset_surface("w", m.key, pinned=True)).record.pinned
