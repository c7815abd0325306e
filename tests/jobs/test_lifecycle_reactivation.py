"""A stale memory matched again by a turn is reactivated, not duplicated."""

from __future__ import annotations

from datetime import timedelta

from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.store.ops import SetStatusOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import Kind, Layer, MemoryRecord, Status
from tests.fakes import Clock


def test_a_stale_memory_said_again_is_reactivated(store: PostgresMemoryStore,
                                                   clock: Clock) -> None:
    t0 = clock.now
    rec = MemoryRecord(content="Lives in Lisbon.", kind=Kind.PROFILE_FACT,
                       layer=Layer.SEMANTIC, occurred_at=t0, last_accessed_at=t0,
                       metadata={"ephemeral": True})
    store.put(("memories", "u1", "work"), "home", rec.to_value())
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    ctx = JobContext(store, settings=MemorySettings())
    assert JOBS["lifecycle"].function(ctx, "u1", now=t0 + timedelta(days=3))[
        "stale_ephemeral"] == 1
    later = t0 + timedelta(days=4)
    assert all(r.key != "home" for r in layer.recall("u1", "Lisbon", now=later))

    result = layer.ingest("u1", [HumanMessage("I live in Lisbon.")], now=later)
    assert result.written == [] and result.changed == ["home"]
    (decision,) = result.accepted
    assert decision.reason.startswith("near-duplicate of home")
    back = layer.get("u1", "home").record
    assert back.status == Status.ACTIVE and back.reinforcement_count == 1
    assert [(h.old, h.new, h.at, h.reason) for h in back.history] == [
        ("active", "stale", t0 + timedelta(days=3), "ephemeral: not referenced for 3 days"),
        ("stale", "active", later, "reactivated: matched again by a turn")]
    assert [r.key for r in layer.recall("u1", "Lisbon", now=later)] == ["home"]
    # The history travels with the memory: in the export, and back in an import.
    exported = layer.export("u1")
    (item,) = [i for i in exported["items"] if i["key"] == "home"]
    assert [h["new"] for h in item["value"]["history"]] == ["stale", "active"]
    # Archived (or contradicted) memories stay retired: the turn writes a new memory.
    store.batch([SetStatusOp("u1", ("home",), Status.ARCHIVED, later)])
    again = layer.ingest("u1", [HumanMessage("I live in Lisbon.")],
                         now=later + timedelta(hours=1))
    assert again.changed == [] and len(again.written) == 1
