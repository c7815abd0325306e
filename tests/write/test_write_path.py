"""The write path on the real database: operations, exactly-once apply, the durable queue,
worker crashes, conflict policies between agents, identity vs profile scoping."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import Kind, Layer, MemoryLayer, MemorySettings, Status
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.store import driver
from langmem_layer.store.ops import ClaimOp, LinksOp, PendingOp
from langmem_layer.types import IDENTITY_SCOPE
from tests.fakes import Clock, ScriptedExtractor


def add(content: str, **kw) -> MemoryOperation:
    return MemoryOperation(op=OpType.ADD, content=content, **kw)


@pytest.fixture
def rules(store, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extraction="inline", clock=clock)


def statuses(layer: MemoryLayer, user: str = "u1") -> dict[str, str]:
    return {i["value"]["content"]: i["value"]["status"]
            for i in layer.export(user)["items"] if i["is_memory"]}


def test_every_operation_applies(rules: MemoryLayer) -> None:
    loop = rules.remember("u1", "Call the dentist about the crown.", kind=Kind.OPEN_LOOP)
    fact = rules.remember("u1", "Favourite band is Muse.")
    old = rules.remember("u1", "Drives a red Volvo.")
    ops = [
        add("Plays chess on Tuesdays."),
        MemoryOperation(op=OpType.UPDATE, content="Drives a blue Tesla.", target_id=old.key),
        MemoryOperation(op=OpType.REINFORCE, target_id=fact.key),
        MemoryOperation(op=OpType.CLOSE_OPEN_LOOP, target_id=loop.key),
        MemoryOperation(op=OpType.FORGET, target_hint="muse"),
    ]
    layer = MemoryLayer(rules.store, extractor=ScriptedExtractor(ops), extraction="inline",
                        clock=rules._clock)
    result = layer.ingest("u1", [HumanMessage("(scripted)", id="m1")])
    assert all(d.accepted for d in result.decisions), [d.reason for d in result.decisions]
    st = statuses(layer)
    assert st["Plays chess on Tuesdays."] == "active"
    assert st["Drives a blue Tesla."] == "active" and st["Drives a red Volvo."] == "contradicted"
    assert st["Call the dentist about the crown."] == "archived"
    assert st["Favourite band is Muse."] == "archived"  # reinforced, then forgotten
    assert layer.get("u1", fact.key).record.reinforcement_count == 1
    links = layer.store.batch([LinksOp("u1", (old.key,))])[0]
    assert [x.link_type for x in links] == ["supersedes"]


def test_replaying_a_batch_changes_nothing(rules: MemoryLayer) -> None:
    fact = rules.remember("u1", "Favourite band is Muse.")
    ops = [add("Plays chess on Tuesdays."),
           MemoryOperation(op=OpType.REINFORCE, target_id=fact.key)]
    layer = MemoryLayer(rules.store, extractor=ScriptedExtractor(ops), extraction="inline",
                        clock=rules._clock)
    msgs = [HumanMessage("(scripted)", id="same-message")]
    first = layer.ingest("u1", msgs)
    before = [i for i in layer.export("u1")["items"]]
    second = layer.ingest("u1", msgs)
    assert len(first.written) == 1 and second.written == [] and len(second.replayed) == 2
    assert layer.export("u1")["items"] == before
    assert layer.get("u1", fact.key).record.reinforcement_count == 1


def test_a_partly_replayed_turn_applies_only_what_is_new(rules: MemoryLayer) -> None:
    # The optimistic apply meets an operation applied before: the batch rolls back and
    # runs again checking each operation, so the new one is applied, once.
    msgs = [HumanMessage("(scripted)", id="same-message")]
    first = MemoryLayer(rules.store, extractor=ScriptedExtractor([add("Plays chess.")]),
                        extraction="inline", clock=rules._clock).ingest("u1", msgs)
    both = [add("Plays chess."), add("Speaks Dutch.")]
    second = MemoryLayer(rules.store, extractor=ScriptedExtractor(both), extraction="inline",
                         clock=rules._clock).ingest("u1", msgs)
    assert len(first.written) == 1 and len(second.written) == 1
    assert len(second.replayed) == 1
    assert sorted(m.record.content for m in rules.list("u1")) == ["Plays chess.",
                                                                  "Speaks Dutch."]
    assert all(m.record.reinforcement_count == 0 for m in rules.list("u1"))


def test_a_turns_operations_go_out_with_their_exactly_once_record(
        rules: MemoryLayer, monkeypatch: pytest.MonkeyPatch) -> None:
    rules.ingest("u1", [HumanMessage("I live in Lisbon.", id="m1")])
    rounds: list[list[str]] = []
    sent = driver.Rounds.next

    def record(self: driver.Rounds) -> list[Any]:
        statements = sent(self)
        rounds.append([q.sql for q in statements])
        return statements

    monkeypatch.setattr(driver.Rounds, "next", record)
    again = rules.ingest("u1", [HumanMessage("I live in Lisbon.", id="m2")])
    assert again.changed and not again.replayed  # a reinforcement, newly applied
    (apply,) = [r for r in rounds if any("langmem_applied_ops" in q for q in r)]
    at = next(n for n, q in enumerate(apply) if "langmem_applied_ops" in q)
    # The reinforcement and the completed log follow the record in its round trip.
    assert any("UPDATE langmem_items" in q for q in apply[at + 1:]), apply
    assert any("langmem_ingest_log" in q for q in apply[at + 1:]), apply


def test_decision_log_explains_what_was_kept(rules: MemoryLayer) -> None:
    rules.ingest("u1", [HumanMessage("I prefer morning meetings. I like jazz.")], thread_id="t")
    rules.ingest("u1", [HumanMessage("I prefer morning meetings.")], thread_id="t")
    log = rules.admin.decisions("u1", thread_id="t")
    assert len(log) == 2
    newest, oldest = log
    assert oldest.decisions[0]["accepted"] and oldest.decisions[0]["op"] == "add"
    assert newest.decisions[0]["op"] == "reinforce" and newest.decisions[0]["accepted"]
    assert len(rules.list("u1")) == 1


def test_identity_is_global_and_the_rest_per_profile(rules: MemoryLayer) -> None:
    rules.ingest("u1", [HumanMessage("My name is Dana. I work at Acme.")], profile="work")
    spaces = {i["value"]["content"]: i["namespace"][2]
              for i in rules.export("u1")["items"] if i["is_memory"]}
    assert spaces == {"Name is Dana.": IDENTITY_SCOPE, "Works at Acme.": "work"}
    personal = {r.record.content for r in rules.recall("u1", "Dana Acme", profile="personal")}
    assert personal == {"Name is Dana."}


def test_queue_survives_a_failing_extractor_and_retries_with_backoff(store,
                                                                     clock: Clock) -> None:
    extractor = ScriptedExtractor([add("Plays chess on Tuesdays.")], fail=2)
    settings = MemorySettings(extraction_retry_base_seconds=60)
    layer = MemoryLayer(store, extractor=extractor, settings=settings, clock=clock)
    entry = layer.admin.submit("u1", [HumanMessage("I play chess on Tuesdays.", id="m1")],
                         thread_id="t")
    assert entry is not None
    result = layer.drain()
    assert result.failed == [entry] and result.done == []
    pending = store.batch([PendingOp("u1")])[0]
    assert pending[0]["attempts"] == 1 and "model unavailable" in pending[0]["last_error"]
    assert layer.drain().failed == []  # not ready yet: backoff, nothing claimed
    clock.advance(seconds=61)
    assert layer.drain().failed == [entry]  # second failure, backoff doubles
    clock.advance(seconds=61)
    assert layer.drain().done == []
    clock.advance(seconds=60)
    assert layer.drain().done == [entry]
    assert statuses(layer) == {"Plays chess on Tuesdays.": "active"}
    assert store.batch([PendingOp("u1")])[0] == []
    layer.close()


def test_worker_crash_mid_batch_loses_and_duplicates_nothing(store, clock: Clock) -> None:
    # A layer whose own worker never wakes: it only queues.
    layer = MemoryLayer(store, extractor=ScriptedExtractor([add("Plays chess on Tuesdays.")]),
                        settings=MemorySettings(extract_every_n_turns=1000), clock=clock)
    ids = [layer.admin.submit("u1", [HumanMessage(f"turn {n}", id=f"m{n}")], thread_id="t")
           for n in range(3)]
    assert layer.admin.submit("u1", [HumanMessage("turn 0", id="m0")], thread_id="t") is None
    # A worker leases two entries and dies before finishing them.
    leased = store.batch([ClaimOp(limit=2, lease_seconds=300, now=clock.now)])[0]
    assert [e.id for e in leased] == ids[:2]
    # A restarted worker sees only the unleased entry until the lease runs out.
    restarted = MemoryLayer(store, extractor=ScriptedExtractor([add("Plays chess.")]),
                            extraction="inline", clock=clock)
    assert restarted.drain().done == ids[2:]
    clock.advance(seconds=301)
    assert restarted.drain().done == ids[:2]
    # Every turn extracted once: one memory, reinforced by the two later turns.
    (memory,) = restarted.list("u1")
    assert memory.record.content == "Plays chess." and memory.record.reinforcement_count == 2
    assert store.batch([PendingOp("u1")])[0] == []
    assert len(restarted.admin.decisions("u1")) == 3


def test_background_extraction_does_not_block_and_drain_waits(store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock)  # background
    layer.admin.submit("u1", [HumanMessage("I prefer tea over coffee.", id="x1")], thread_id="t")
    layer.drain()
    assert "Prefers tea over coffee." in statuses(layer)
    layer.close()


@pytest.mark.parametrize(
    ("policy", "trust", "expected"),
    [
        ("latest", {}, {"Works at Acme.": "contradicted", "Works at Globex.": "active"}),
        ("trust", {"hr-bot": 0.9, "chat-bot": 0.4}, {"Works at Acme.": "active"}),
        ("trust", {"hr-bot": 0.3, "chat-bot": 0.8},
         {"Works at Acme.": "contradicted", "Works at Globex.": "active"}),
        ("review", {}, {"Works at Acme.": "active", "Works at Globex.": "active"}),
    ],
)
def test_conflicting_agents(store, clock: Clock, policy: str, trust: dict,
                            expected: dict) -> None:
    settings = MemorySettings(conflict_policy=policy)  # type: ignore[arg-type]
    layer = MemoryLayer(store, settings=settings, trust=trust, extraction="inline", clock=clock)
    layer.ingest("u1", [HumanMessage("I work at Acme.")], agent_id="hr-bot")
    clock.advance(minutes=1)
    result = layer.ingest("u1", [HumanMessage("I work at Globex.")], agent_id="chat-bot")
    assert statuses(layer) == expected
    if policy == "review":
        new = layer.get("u1", result.written[0])
        assert new.record.metadata == {"needs_review": True}
        links = store.batch([LinksOp("u1", (new.key,))])[0]
        assert [x.link_type for x in links] == ["contradicts"]
    if expected == {"Works at Acme.": "active"}:
        assert not result.decisions[0].accepted and "outranks" in result.decisions[0].reason


async def test_async_queue_and_drain(astore, clock: Clock) -> None:
    layer = MemoryLayer(astore, clock=clock)
    await layer.admin.asubmit("u1", [HumanMessage("I live in Lisbon.", id="a1")], thread_id="t")
    await layer.adrain()
    assert [r.record.content for r in await layer.arecall("u1", "Lisbon")] == ["Lives in Lisbon."]
    await layer.aclose()


def test_relative_dates_resolve_against_the_turn_not_the_worker(store, clock: Clock) -> None:
    layer = MemoryLayer(store, clock=clock)
    turn_at = clock.now  # Wednesday 2026-11-18 15:00 UTC
    layer.admin.submit("u1", [HumanMessage("Remind me to call mom tomorrow.", id="r1")],
                       thread_id="t")
    clock.advance(days=3)  # the worker runs days later
    layer.drain()
    loop = next(r for r in layer.list("u1") if r.record.kind == Kind.OPEN_LOOP)
    assert loop.record.due_at is not None
    assert loop.record.due_at.date() == (turn_at + timedelta(days=1)).date()
    assert loop.record.layer == Layer.EPISODIC and loop.record.status == Status.ACTIVE
    layer.close()


def test_write_path_embeddings_are_cached_per_user(pg_uri: str, clock: Clock) -> None:

    from langmem_layer.store.sync import PostgresMemoryStore
    from tests.fakes import BagOfWordsEmbeddings

    class Counting(BagOfWordsEmbeddings):
        def __init__(self) -> None:
            super().__init__(dims=64)
            self.documents: list[str] = []

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            self.documents.extend(texts)
            return super().embed_documents(texts)

    embedder = Counting()
    index = {"embed": embedder, "dims": 64, "model_id": "counting"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=clock) as store:
        layer = MemoryLayer(store, extraction="inline", clock=clock)
        layer.ingest("cache-u1", [HumanMessage("I live in Lisbon.", id="c1")])
        assert embedder.documents == ["Lives in Lisbon."]  # written through ApplyOnceOp
        record = layer.list("cache-u1")[0]
        store.put(("memories", "cache-u1", "work"), "copy", record.record.to_value())
        assert embedder.documents == ["Lives in Lisbon."]  # served from the cache
        store.put(("memories", "cache-u2", "work"), "copy", record.record.to_value())
        assert embedder.documents == ["Lives in Lisbon."] * 2  # the cache is per user
