"""Re-validation in the block: a fact the lifecycle flagged ``needs_revalidation`` asks
the agent to confirm it naturally when the turn places it, at most one per block, and a
turn restating it clears the flag at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, MemorySettings
from langmem_layer.jobs import JOBS, JobContext
from langmem_layer.read.block import AVOID, RELEVANT, SILENT, build_context_block
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.tokens import TokenCounter, get_token_counter
from langmem_layer.types import HistoryEntry, Kind, Layer, MemoryRecord, Policy, Recalled
from tests.fakes import Clock

T0 = datetime(2026, 1, 10, 9, 0, tzinfo=UTC)
FLAGGED_AT = datetime(2026, 5, 3, 4, 0, tzinfo=UTC)
ASK = " [unconfirmed since 2026-05: confirm if natural]"


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return get_token_counter("o200k_base")


def fact(key: str, content: str, *, flagged: bool = True, layer: Layer = Layer.SEMANTIC,
         policy: Policy = Policy.SPEAK, history: bool = True) -> Recalled:
    entries = [HistoryEntry(at=FLAGGED_AT, event="flag", new="needs_revalidation",
                            reason="not confirmed for 180 days")] if history else []
    record = MemoryRecord(
        content=content, kind=Kind.PROFILE_FACT if layer != Layer.EPISODIC
        else Kind.EPISODIC_EVENT, layer=layer, policy=policy, occurred_at=T0,
        last_accessed_at=T0, metadata={"needs_revalidation": True} if flagged else {},
        history=entries if flagged else [])
    return Recalled(key, ("memories", "u1", "work"), record)


def test_one_flagged_fact_per_block_asks_to_be_confirmed(counter: TokenCounter) -> None:
    block = build_context_block(
        [fact("plain", "Has two kids.", flagged=False), fact("job", "Works at Acme."),
         fact("home", "Lives in Lisbon.")], budget_tokens=1000, counter=counter)
    assert block.revalidate == "job"
    assert block.text.splitlines()[-3:] == [
        "- Has two kids.", "- Works at Acme." + ASK, "- Lives in Lisbon."]
    assert block.placements == {"plain": RELEVANT, "job": RELEVANT, "home": RELEVANT}


def test_only_a_semantic_fact_placed_to_be_spoken_asks(counter: TokenCounter) -> None:
    recalled = [fact("quiet", "Prefers short answers.", policy=Policy.ADAPT),
                fact("avoid", "Going through a divorce.", policy=Policy.AVOID),
                fact("event", "Ran a marathon in March.", layer=Layer.EPISODIC)]
    block = build_context_block(recalled, budget_tokens=1000, counter=counter)
    assert block.revalidate is None and "confirm if natural" not in block.text
    assert block.placements == {"quiet": SILENT, "avoid": AVOID, "event": RELEVANT}
    # Recently spoken, it is used silently: not the moment to ask.
    block = build_context_block([fact("job", "Works at Acme.")], budget_tokens=1000,
                                counter=counter, recently_spoken=["job"])
    assert block.revalidate is None and block.placements == {"job": SILENT}


def test_without_history_the_month_is_the_facts_own(counter: TokenCounter) -> None:
    block = build_context_block([fact("job", "Works at Acme.", history=False)],
                                budget_tokens=1000, counter=counter)
    assert block.text.endswith("- Works at Acme. [unconfirmed since 2026-01: confirm if natural]")


def test_a_tight_budget_places_the_fact_plainly(counter: TokenCounter) -> None:
    one = [fact("job", "Works at Acme.")]
    plain = build_context_block([fact("job", "Works at Acme.", flagged=False)],
                                budget_tokens=1000, counter=counter)
    asking = build_context_block(one, budget_tokens=1000, counter=counter)
    assert asking.tokens > plain.tokens
    block = build_context_block(one, budget_tokens=plain.tokens, counter=counter,
                                semantic_share=1.0)
    assert block.text == plain.text and block.revalidate is None
    assert block.tokens <= plain.tokens and block.placements == {"job": RELEVANT}


def test_the_lifecycle_flags_the_block_asks_and_a_restatement_clears(
        store: PostgresMemoryStore, clock: Clock) -> None:
    layer = MemoryLayer(store, extraction="inline", clock=clock)
    t0 = clock.now
    layer.ingest("u1", [HumanMessage("I work at Acme.")], now=t0)
    (job,) = layer.list("u1")
    ctx = JobContext(store, settings=MemorySettings())
    flagged_at = t0 + timedelta(days=181)
    assert JOBS["lifecycle"].function(ctx, "u1", now=flagged_at)["needs_revalidation"] == 1

    later = flagged_at + timedelta(days=2)
    block = layer.context_block("u1", "Where do I work?", now=later)
    assert block.revalidate == job.key
    assert f"- Works at Acme. [unconfirmed since {flagged_at:%Y-%m}: confirm if natural]" in (
        block.text.splitlines())

    layer.ingest("u1", [HumanMessage("Yes, I still work at Acme.")], now=later)
    record = layer.get("u1", job.key).record
    assert "needs_revalidation" not in record.metadata
    assert [(h.event, h.old, h.new, h.at) for h in layer.admin.history("u1", job.key)] == [
        ("flag", None, "needs_revalidation", flagged_at),
        ("flag", "needs_revalidation", None, later)]
    block = layer.context_block("u1", "Where do I work?", now=later)
    assert block.revalidate is None and "confirm if natural" not in block.text
    # The next lifecycle run has nothing to revalidate or re-flag.
    moved = JOBS["lifecycle"].function(ctx, "u1", now=later + timedelta(days=1))
    assert moved["revalidated"] == 0 and moved["needs_revalidation"] == 0
