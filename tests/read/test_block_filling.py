"""The block is filled from the ranking up to a token target and a relevance floor, on
a real store: what ``context_block`` (and so ``assemble_context``) gives the agent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _fill(layer: MemoryLayer, n: int) -> list[str]:
    keys = []
    for i in range(n):
        keys.append(layer.remember(
            "u", f"Went sailing on the lake with friend number {i} and talked for hours.",
            kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC, thread_id=f"t{i}",
            now=T0 + timedelta(hours=i)).key)
    return keys


def test_block_fills_past_the_recall_limit_up_to_the_target(store: PostgresMemoryStore
                                                             ) -> None:
    wide = {"candidates_per_source": 40, "similarity_floor": 0.0,
            "episodic_similarity_floor": 0.0}
    layer = MemoryLayer(store, settings=MemorySettings(block_target_tokens=0, **wide))
    _fill(layer, 30)
    now = T0 + timedelta(days=2)
    everything = layer.context_block("u", "sailing on the lake with a friend", now=now)
    # The block is not limited to recall()'s ten: all thirty fit the budget.
    assert len(layer.recall("u", "sailing on the lake with a friend", now=now)) == 10
    assert len(everything.placements) == 30
    target = everything.tokens // 3
    small = MemoryLayer(store, settings=MemorySettings(block_target_tokens=target, **wide))
    block = small.context_block("u", "sailing on the lake with a friend", now=now)
    assert 0 < len(block.placements) < 30 and block.tokens <= target


def test_relevance_floor_keeps_weak_hits_out(store: PostgresMemoryStore) -> None:
    layer = MemoryLayer(store)
    layer.remember("u", "Adopted a grey cat called Miso.", kind=Kind.PROFILE_FACT, now=T0)
    for i in range(5):
        layer.remember("u", f"Bought cat food number {i} at the market.",
                       kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC, now=T0)
    now = T0 + timedelta(days=1)
    query = "What is the name of my grey cat Miso?"
    loose = layer.context_block("u", query, now=now)
    strict = MemoryLayer(store, settings=MemorySettings(block_min_relevance=0.9)
                         ).context_block("u", query, now=now)
    assert len(strict.placements) < len(loose.placements)
    assert any("Miso" in line for line in strict.text.splitlines())
    # The floor is relative to the best hit: the best hit always clears it.
    assert len(strict.placements) >= 1


def test_preferences_on_how_to_answer_join_every_turn(store: PostgresMemoryStore) -> None:
    from langmem_layer.read.block import SILENT
    from langmem_layer.types import Policy

    layer = MemoryLayer(store)
    short = layer.remember("u", "Prefers short answers.", kind=Kind.PREFERENCE,
                           policy=Policy.ADAPT, now=T0).key
    layer.remember("u", "Likes hiking in the Alps.", kind=Kind.PREFERENCE, now=T0)
    layer.remember("u", "Lives in Lyon.", kind=Kind.PROFILE_FACT, now=T0)
    now = T0 + timedelta(days=1)
    # The question resembles none of them; the preference on how to answer still comes.
    found = layer.recall("u", "Explain how vaccines work", now=now)
    assert [r.key for r in found if "standing" in r.sources] == [short]
    block = layer.context_block("u", "Explain how vaccines work", now=now)
    assert block.placements.get(short) == SILENT
    off = MemoryLayer(store, settings=MemorySettings(standing_preferences=0))
    assert short not in {r.key for r in off.recall("u", "Explain how vaccines work", now=now)}


def test_the_graph_state_carries_only_what_the_block_can_place(store: PostgresMemoryStore
                                                               ) -> None:
    wide = {"candidates_per_source": 40, "similarity_floor": 0.0,
            "episodic_similarity_floor": 0.0}
    _fill(MemoryLayer(store), 30)
    now = T0 + timedelta(days=2)
    query = "sailing on the lake with a friend"
    every = MemoryLayer(store, settings=MemorySettings(block_target_tokens=0, **wide))
    assert len(every.threads.load_thread("u", [], query, now=now, reinforce=False).recalled) == 30
    small = MemoryLayer(store, settings=MemorySettings(block_target_tokens=100, **wide))
    loaded = small.threads.load_thread("u", [], query, now=now, reinforce=False).recalled
    block = small.context_block("u", query, now=now)
    # What load_memory hands on is bounded by the target, and holds all the block places.
    assert len(block.placements) <= len(loaded) < 30
    assert set(block.placements) <= {r.key for r in loaded}
