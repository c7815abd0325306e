"""Retrieval on the real embedded PostgreSQL: strategies, fusion, ranking, decay, filters.

The embedder here is a deterministic "concept" model: words of one concept group
("car", "automobile", "vehicle") share a dimension, every other word hashes to its own
bucket, and digits are ignored. So a memory can be similar to a query without sharing
a word (vector only), share a number with it while meaning nothing alike (keyword
only), or share neither (reference, link, time).
"""

from __future__ import annotations

import hashlib
import math
import re
from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import HumanMessage

from langmem_layer import Kind, Layer, MemoryLayer, MemorySettings, Status
from langmem_layer.read.query import time_window, understand
from langmem_layer.read.rank import (
    decay_score,
    decay_weight,
    link_scores,
    rank_candidates,
    rrf_scores,
)
from langmem_layer.refs import extract_refs
from langmem_layer.settings import RankingWeights
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.ops import Candidate, LinkOp, RecallOp, SetStatusOp
from langmem_layer.store.sync import PostgresMemoryStore
from langmem_layer.types import LinkType, LoopStatus, MemoryRecord, Policy, Recalled
from tests.fakes import Clock

_CONCEPTS = (
    ("car", "cars", "automobile", "vehicle", "sedan"),
    ("dog", "dogs", "puppy", "canine", "hound"),
    ("cook", "cooked", "cooking", "bake", "baked", "recipe", "dinner"),
    ("money", "budget", "cost", "price", "dollars"),
    ("trip", "travel", "journey", "vacation", "flight"),
)
_STOP = frozenset(re.findall(r"\w+", "a an the i me my you is are was were to of in on at for "
                                     "and or it that this what when did do does about with"))
_DIMS = 64
_NOTHING = 7  # the direction of a text with no word the model knows


class ConceptEmbeddings(Embeddings):
    """Concept groups share a dimension; other words hash into buckets 8..63."""

    model = "concept-64"

    def _vec(self, text: str) -> list[float]:
        v = [0.0] * _DIMS
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in _STOP:
                continue
            group = next((g for g, words in enumerate(_CONCEPTS) if word in words), None)
            if group is not None:
                v[group] += 1.0
            else:
                v[8 + int(hashlib.md5(word.encode()).hexdigest(), 16) % (_DIMS - 8)] += 1.0
        if not any(v):
            v[_NOTHING] = 1.0
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vec(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text)


@pytest.fixture
def index() -> dict:
    """Overrides conftest's bag-of-words index for this module."""
    return {"embed": ConceptEmbeddings(), "dims": _DIMS, "model_id": "concept-64"}


def make_layer(store: PostgresMemoryStore, clock: Clock, **settings: object) -> MemoryLayer:
    return MemoryLayer(store, settings=MemorySettings(**settings), extraction="inline",
                       clock=clock)


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> MemoryLayer:
    return make_layer(store, clock)


def keys(found: list[Recalled]) -> list[str]:
    return [r.key for r in found]


def fact(layer: MemoryLayer, text: str, **kw: object) -> str:
    kw.setdefault("kind", Kind.PROFILE_FACT)  # a fact: semantic, and it decays
    return layer.remember("u1", text, **kw).key  # type: ignore[arg-type]


# -- each strategy finds what only it can find, and can rank first ---------------------


def test_vector_only_match_found_and_first(layer: MemoryLayer) -> None:
    target = fact(layer, "Automobile, a sedan, serviced.")  # cosine 2/sqrt(5) = 0.89
    fact(layer, "Likes jazz concerts downtown.")
    found = layer.recall("u1", "car")
    assert keys(found)[0] == target
    top = found[0]
    assert set(top.sources) == {"vector"}  # no shared word: no keyword, ref or link hit
    assert top.similarity is not None and top.similarity >= 0.70


def test_vector_only_match_below_floor_is_dropped(layer: MemoryLayer, clock: Clock) -> None:
    weak = fact(layer, "Serviced the automobile at the garage near the old bridge.")
    found = layer.recall("u1", "car")
    assert weak not in keys(found)  # similarity 0.41 < floor 0.70, and nothing else found it
    loose = make_layer(layer.store, clock, similarity_floor=0.3)  # type: ignore[arg-type]
    assert keys(loose.recall("u1", "car")) == [weak]


def test_keyword_only_match_found_and_first(layer: MemoryLayer) -> None:
    target = fact(layer, "Ticket 58213 was escalated to the vendor.")
    fact(layer, "Ticket queue reviewed with the team.")
    found = layer.recall("u1", "58213")  # the model ignores digits: nothing alike
    assert keys(found)[0] == target
    assert found[0].sources.get("keyword") == 0
    assert found[0].similarity is not None and found[0].similarity < 0.70  # floor skipped


def test_reference_only_match_found_and_first(layer: MemoryLayer) -> None:
    target = fact(layer, "Kickoff slides are due soon.", refs=["Falcon"])
    fact(layer, "Lunch with the design team.")
    found = layer.recall("u1", "What is happening with Falcon?")
    assert keys(found)[0] == target
    assert set(found[0].sources) >= {"ref"} and "keyword" not in found[0].sources
    assert found[0].sources["ref"] == 0
    # Explicit refs work the same way, without the word in the query.
    assert keys(layer.recall("u1", "slides", refs=["FALCON "]))[0] == target


def test_link_only_memory_found_and_can_rank_first(layer: MemoryLayer, clock: Clock) -> None:
    # Without the "due" strategy, which would bring back the loop due tomorrow anyway.
    layer = make_layer(layer.store, clock, due_limit=0)
    seed = fact(layer, "Booked the automobile service.", kind=Kind.EPISODIC_EVENT,
                salience=0.2)
    other = fact(layer, "Washed the car last weekend.", kind=Kind.EPISODIC_EVENT, salience=0.2)
    linked = fact(layer, "Pick up the receipt from the mechanic.", kind=Kind.OPEN_LOOP,
                  salience=0.9, due_at=clock.now + timedelta(hours=20))
    unlinked = make_layer(layer.store, clock, due_limit=0).recall("u1", "car service")
    assert linked not in keys(unlinked)
    layer.store.batch([LinkOp("u1", linked, LinkType.ELABORATES, seed)])
    found = layer.recall("u1", "car service")
    by_key = {r.key: r for r in found}
    # Found through the link alone: its vector rank is far below the floor.
    assert "link" in by_key[linked].sources and "keyword" not in by_key[linked].sources
    assert (by_key[linked].similarity or 0.0) < layer.settings.episodic_similarity_floor
    assert keys(found)[0] == linked  # due tomorrow and salient: it wins over its seed
    assert keys(found).index(seed) < keys(found).index(other)
    # A link type the settings do not walk finds nothing.
    narrow = make_layer(layer.store, clock, link_types=("caused_by",), due_limit=0)
    assert linked not in keys(narrow.recall("u1", "car service"))


def test_link_walk_starts_only_from_seeds_above_the_floor(layer: MemoryLayer) -> None:
    weak = fact(layer, "Serviced the automobile at the garage near the old bridge.")
    neighbour = fact(layer, "Paid with the company card.")
    layer.store.batch([LinkOp("u1", neighbour, LinkType.ELABORATES, weak)])
    assert layer.recall("u1", "car") == []  # the seed is below the floor: no walk


def test_link_inheritance_lifts_a_weak_direct_hit(store: PostgresMemoryStore,
                                                  clock: Clock) -> None:
    layer = make_layer(store, clock, weights=RankingWeights(recency=0.0), rrf_k=5)
    best = fact(layer, "Dinner recipe: dinner recipe.", kind=Kind.EPISODIC_EVENT)
    a = fact(layer, "Dinner recipe with lemon.", kind=Kind.EPISODIC_EVENT)
    b = fact(layer, "Dinner recipe with lemon and garlic.", kind=Kind.EPISODIC_EVENT)
    before = keys(layer.recall("u1", "dinner recipe"))
    assert before == [best, a, b]
    store.batch([LinkOp("u1", b, LinkType.CAUSED_BY, best)])
    after = layer.recall("u1", "dinner recipe")
    assert keys(after) == [best, b, a]
    assert "link" in after[1].sources


# -- full-text ranking -----------------------------------------------------------------


def test_bm25_weighs_a_rare_term_over_a_common_one(layer: MemoryLayer, clock: Clock) -> None:
    for i in range(6):
        fact(layer, f"Caroline said something ordinary number {i}.")
    chatty = fact(layer, "Caroline, Caroline and Caroline again at the Caroline party.")
    rare = fact(layer, "Adopted a cockapoo from the shelter.")
    op = RecallOp("u1", ("work", "identity"), query="Caroline cockapoo", now=clock.now)
    (bm25,) = layer.store.batch([op])
    ranks = {c.key: c.ranks.get("keyword") for c in bm25}
    assert ranks[rare] == 0
    (cd,) = layer.store.batch([op._replace(keyword="cover_density")])
    assert {c.key: c.ranks.get("keyword") for c in cd}[chatty] == 0


# -- fusion ----------------------------------------------------------------------------


def _cand(key: str, ranks: dict[str, int], sim: float | None = 0.9, **fields: object
          ) -> Candidate:
    now = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
    record = MemoryRecord(content=f"memory {key}", kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC,
                          occurred_at=now, last_accessed_at=now, **fields)  # type: ignore[arg-type]
    return Candidate(("memories", "u1", "work"), key, record.to_value(), now, now, sim, ranks)


def test_rrf_over_the_union_hand_computed() -> None:
    cands = [
        _cand("a", {"vector": 0, "keyword": 2}),
        _cand("b", {"keyword": 0}),
        _cand("c", {"vector": 1, "ref": 0, "time": 3}),
        _cand("p", {"pinned": 0}),
    ]
    got = rrf_scores(cands, k=60)
    assert got["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert got["b"] == pytest.approx(1 / 61)
    assert got["c"] == pytest.approx(1 / 62 + 1 / 61 + 1 / 64)
    assert got["p"] == 0.0
    weighted = rrf_scores(cands, k=5, weights={"keyword": 2.0, "time": 0.0})
    assert weighted["a"] == pytest.approx(1 / 6 + 2 / 8)
    assert weighted["c"] == pytest.approx(1 / 7 + 1 / 6)


def test_rank_candidates_scores_are_the_composite_of_the_fused_relevance() -> None:
    now = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
    settings = MemorySettings(rrf_k=60)
    cands = [_cand("a", {"vector": 0, "keyword": 0}), _cand("b", {"keyword": 1})]
    ranked = rank_candidates(cands, now=now, settings=settings, limit=5, trust={})
    w = settings.weights
    rest = w.salience * 0.5 + w.confidence * 0.8 + w.recency * 1.0  # no urgency
    relevance = {"a": 1.0, "b": (1 / 62) / (2 / 61)}  # fused over the best fused
    expected = {k: (w.relevance * rel + rest) * 0.5 for k, rel in relevance.items()}
    assert [r.key for r in ranked] == ["a", "b"]
    for r in ranked:
        assert r.score == pytest.approx(expected[r.key])


def test_link_scores_pass_on_the_margin_over_the_last_place() -> None:
    fused = {"a": 0.5, "b": 0.2, "c": 0.1}
    links = {"x": ["a", "b"], "y": ["c"], "z": ["missing"]}
    assert link_scores(fused, links, 0.5, floor=0.1) == pytest.approx({"x": 0.2})
    assert link_scores(fused, links, 0.0, floor=0.1) == {}


def test_composite_weights_change_the_order(store: PostgresMemoryStore, clock: Clock) -> None:
    # The composite of the fused relevance (the reranking stage, which replaces that
    # relevance by its own, has tests of its own: tests/read/test_rerank.py).
    layer = make_layer(store, clock, rerank_depth=0)
    relevant = fact(layer, "Budget for the trip is 2000 dollars.", salience=0.1)
    salient = fact(layer, "Trip planning notes.", salience=1.0)
    # Spec weights: both are hits, salience (20 %) decides.
    assert keys(layer.recall("u1", "trip budget dollars")) == [salient, relevant]
    focused = make_layer(store, clock, weights=RankingWeights(relevance=1.0, salience=0.0),
                         rerank_depth=0)
    assert keys(focused.recall("u1", "trip budget dollars")) == [relevant, salient]


# -- decay ----------------------------------------------------------------------


def _record(kind: Kind, layer_: Layer, *, confidence: float = 1.0, access_count: int = 0,
            days: float = 0.0) -> tuple[MemoryRecord, datetime]:
    last = datetime(2026, 1, 1, tzinfo=UTC)
    record = MemoryRecord(content="x" * 10, kind=kind, layer=layer_, confidence=confidence,
                          access_count=access_count, occurred_at=last, last_accessed_at=last)
    return record, last + timedelta(days=days)


def test_decay_ebbinghaus_hand_computed() -> None:
    record, now = _record(Kind.PROFILE_FACT, Layer.SEMANTIC, access_count=10, days=6)
    assert decay_score(record, now) == pytest.approx(math.exp(-1))  # S = 1 + 0.5*10 = 6
    assert decay_score(record, now) == pytest.approx(0.368, abs=5e-4)
    record, now = _record(Kind.PREFERENCE, Layer.PROCEDURAL, confidence=0.8, days=1)
    assert decay_score(record, now) == pytest.approx(0.8 * math.exp(-1))
    assert decay_weight(record, now) == pytest.approx(math.exp(-1))  # confidence left out
    record, now = _record(Kind.PREFERENCE, Layer.PROCEDURAL, confidence=0.8, days=2)
    assert decay_score(record, now) == pytest.approx(0.8 * math.exp(-2))
    assert decay_weight(record, now) == 0.25  # floored: deprioritised, never hidden


def test_decay_half_life_kinds() -> None:
    record, now = _record(Kind.REFLECTION, Layer.SEMANTIC, confidence=0.8, days=180)
    assert decay_score(record, now) == pytest.approx(0.4)
    assert decay_score(record, now, half_life_days=90) == pytest.approx(0.2)
    record, now = _record(Kind.TEMPORAL_SUMMARY, Layer.SEMANTIC, days=360)
    assert decay_score(record, now) == pytest.approx(0.25)


def test_episodic_events_do_not_decay() -> None:
    record, now = _record(Kind.EPISODIC_EVENT, Layer.EPISODIC, confidence=0.9, days=3650)
    assert decay_score(record, now) == pytest.approx(0.9)
    assert decay_weight(record, now) == 1.0


def test_decayed_memory_is_deprioritised_not_dropped(store: PostgresMemoryStore,
                                                     clock: Clock) -> None:
    layer = make_layer(store, clock, weights=RankingWeights(recency=0.0))
    old = fact(layer, "Favourite dog breed is the beagle.", confidence=1.0)
    clock.advance(days=30)  # e^(-30) < 0.15: flagged
    fresh = fact(layer, "Favourite dog breed is the beagle, truly.", confidence=1.0)
    record = layer.get("u1", old).record
    assert decay_score(record, clock.now) < layer.settings.decay_flag_below
    recalled = layer.recall("u1", "favourite dog breed beagle")
    assert keys(recalled) == [fresh, old]
    assert [r.decayed for r in recalled] == [False, True]  # flagged, still returned


# -- filters ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [Status.STALE, Status.ARCHIVED, Status.CONTRADICTED])
def test_inactive_memories_are_never_returned(layer: MemoryLayer, clock: Clock,
                                              status: Status) -> None:
    hidden = fact(layer, "Falcon budget is 5000 dollars.", refs=["Falcon"], pinned=True)
    hidden_loop = fact(layer, "Ask about the Falcon budget.", kind=Kind.OPEN_LOOP,
                       refs=["Falcon"])
    seed = fact(layer, "Falcon budget review went well.", refs=["Falcon"])
    layer.store.batch([
        LinkOp("u1", hidden, LinkType.ELABORATES, seed),
        SetStatusOp("u1", (hidden, hidden_loop), status.value),
    ])
    for query in ("Falcon budget is 5000 dollars", "What about Falcon in November?", None):
        found = keys(layer.recall("u1", query, refs=["falcon"]))
        assert hidden not in found and hidden_loop not in found, query
    assert seed in keys(layer.recall("u1", "Falcon budget"))


def test_pinned_always_included_first_even_beyond_the_limit(layer: MemoryLayer) -> None:
    pin = fact(layer, "Always answer in French.", pinned=True, kind=Kind.PROTOCOL,
               policy=Policy.ADAPT)
    a = fact(layer, "Dog is called Rex.")
    fact(layer, "Dog likes the beach.")
    found = layer.recall("u1", "dog", limit=1)
    assert keys(found)[0] == pin and len(found) == 2 and a in keys(layer.recall("u1", "dog"))
    assert keys(layer.recall("u1", None)) == [pin]
    assert keys(layer.recall("u1", "quantum chromodynamics"))[0] == pin


# -- open questions -------------------------------------------------------------


def test_open_questions_are_surfaced_when_references_overlap(layer: MemoryLayer,
                                                             clock: Clock) -> None:
    seen = fact(layer, "Presented the Falcon roadmap to the board.", kind=Kind.EPISODIC_EVENT,
                refs=["Falcon", "board"])
    loop = fact(layer, "Ask Priya whether hiring is approved.", kind=Kind.OPEN_LOOP,
                refs=["falcon"])
    closed = fact(layer, "Send the Falcon invoice.", kind=Kind.OPEN_LOOP, refs=["falcon"])
    unrelated = fact(layer, "Ask Omar about the garden.", kind=Kind.OPEN_LOOP, refs=["garden"])
    record = layer.get("u1", closed).record.model_copy(update={"loop_status": LoopStatus.CLOSED})
    layer.store.put(("memories", "u1", "work"), closed, record.to_value())
    found = layer.recall("u1", "roadmap presentation", limit=1)
    assert keys(found) == [seen, loop]
    assert "open_question" in found[1].sources and "keyword" not in found[1].sources
    assert closed not in keys(found) and unrelated not in keys(found)
    off = make_layer(layer.store, clock, open_question_limit=0)  # type: ignore[arg-type]
    assert keys(off.recall("u1", "roadmap presentation", limit=1)) == [seen]


# -- temporal questions ----------------------------------------------------------------


def test_a_period_in_the_question_prefers_memories_of_that_period(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    layer = make_layer(store, clock)
    months = {}
    for month in (1, 3, 6, 9):
        when = datetime(2026, month, 12, 18, 0, tzinfo=UTC)
        months[month] = layer.remember("u1", f"Cooked a big dinner, batch {month * 7}.",
                                       kind=Kind.EPISODIC_EVENT, now=when).key
    clock.now = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
    question = "What did I cook in March 2026?"
    found = layer.recall("u1", question)
    assert keys(found)[0] == months[3]
    assert found[0].sources.get("time") == 0
    assert keys(layer.recall("u1", "What did I cook last June?"))[0] == months[6]
    blind = make_layer(store, clock, temporal_window=False)
    assert "time" not in blind.recall("u1", question)[0].sources


def test_the_time_strategy_keeps_a_memory_dating_an_event_in_the_period_beside_similar_ones(
    store: PostgresMemoryStore, clock: Clock
) -> None:
    """Said on the 4th, "yesterday" is the 3rd: the time strategy ranks the period's
    memories that date something beside the most similar, so such a memory is found even
    when more similar ones fill the strategy's share of candidates."""
    # The profile's similarity floor stays: a memory of the period stands on the period,
    # however little it resembles the question.
    layer = make_layer(store, clock, candidates_per_source=2)
    for day, text in ((2, "The city lights were lovely from the bridge."),
                      (5, "We walked across the old city at dusk."),
                      (6, "A city market sold fresh bread and cheese.")):
        layer.remember("u1", text, kind=Kind.EPISODIC_EVENT,
                       now=datetime(2026, 10, day, 18, tzinfo=UTC))
    dated = layer.remember("u1", "Yesterday I met some artists in Boston.",
                           kind=Kind.EPISODIC_EVENT,
                           now=datetime(2026, 10, 4, 12, tzinfo=UTC)).key
    clock.now = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
    found = {r.key: r for r in layer.recall("u1", "Which city was I in on October 3, 2026?",
                                             limit=10)}
    assert dated in found and "time" in found[dated].sources
    ranked = [r for r in found.values() if "time" in r.sources]
    assert len(ranked) == 2  # the strategy's share: the most similar, and the dated one


NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(
    ("text", "start", "end", "granularity"),
    [
        ("What did we do on October 13, 2023?", "2023-10-13", "2023-10-14", "day"),
        ("on 8th December, 2023", "2023-12-08", "2023-12-09", "day"),
        ("on Aug 15th", "2026-08-15", "2026-08-16", "day"),
        ("on December 3", "2025-12-03", "2025-12-04", "day"),  # latest past one
        ("in May 2023", "2023-05-01", "2023-06-01", "month"),
        ("in May", "2026-05-01", "2026-06-01", "month"),
        ("in December", "2025-12-01", "2026-01-01", "month"),
        ("summer 2021", "2021-06-01", "2021-09-01", "season"),
        ("in 2022", "2022-01-01", "2023-01-01", "year"),
        ("last month", "2026-10-01", "2026-11-01", "month"),
        ("last year", "2025-01-01", "2026-01-01", "year"),
        ("yesterday", "2026-11-17", "2026-11-18", "day"),
        ("3 days ago", "2026-11-15", "2026-11-16", "day"),
        ("last Friday", "2026-11-13", "2026-11-14", "day"),
        ("last week", "2026-11-08", "2026-11-15", "week"),
    ],
)
def test_time_window_phrases(text: str, start: str, end: str, granularity: str) -> None:
    w = time_window(text, NOW, slack_days=0)
    assert w is not None
    assert (w.start.date().isoformat(), w.end.date().isoformat()) == (start, end)
    assert w.granularity == granularity


def test_time_window_slack_and_no_window() -> None:
    w = time_window("in May 2023", NOW, slack_days=7)
    assert w is not None and w.start == datetime(2023, 4, 24, tzinfo=UTC)
    assert datetime(2023, 6, 5, tzinfo=UTC) in w and datetime(2023, 6, 9, tzinfo=UTC) not in w
    for text in ("Where may I park?", "What is Dana's favourite dish?", "next Friday",
                 "in 3 days"):
        assert time_window(text, NOW) is None, text


def test_understand_reads_refs_and_window() -> None:
    info = understand("When did Caroline go to the LGBTQ support group in May 2023?", NOW)
    assert info.refs == ("caroline", "lgbtq")
    assert info.window is not None and info.window.granularity == "month"
    assert understand(None, NOW).refs == () and understand("", NOW).window is None
    assert understand("Falcon in May 2023", NOW, refs=False, window=False).window is None


def test_extract_refs() -> None:
    assert extract_refs("Caroline: I met Dana at the LGBTQ center in New York.") == [
        "dana", "lgbtq", "new york"]
    assert extract_refs("Melanie: Hey Caroline! Thanks, Mel. It was the Pride parade.") == [
        "caroline", "mel", "pride"]
    assert extract_refs('We watched "Eternal Sunshine" with Tim\'s dad on Monday.') == [
        "eternal sunshine", "tim"]
    assert extract_refs("I think so. OK then.") == []


async def test_async_recall_uses_the_same_strategies(astore: AsyncPostgresMemoryStore,
                                                      clock: Clock) -> None:
    # The strategies and the fusion, before the reranking stage reorders them.
    layer = MemoryLayer(astore, extraction="inline", clock=clock,
                        settings=MemorySettings(rerank_depth=0))
    seed = (await layer.aremember("u1", "Booked the automobile service.", refs=["Falcon"])).key
    linked = (await layer.aremember("u1", "Pick up the receipt from the mechanic.")).key
    loop = (await layer.aremember("u1", "Ask about the invoice.", kind=Kind.OPEN_LOOP,
                                  refs=["falcon"])).key
    await astore.abatch([LinkOp("u1", linked, LinkType.ELABORATES, seed)])
    found = await layer.arecall("u1", "car service", limit=2)
    by_key = {r.key: r for r in found}
    assert keys(found)[0] == seed
    assert "link" in by_key[linked].sources
    assert "open_question" in by_key[loop].sources


# -- one enrichment for every way a memory is written ----------------------------------


def test_a_remembered_memory_gets_the_write_paths_refs_and_a_reference_finds_it(
        store: PostgresMemoryStore, clock: Clock) -> None:
    from langmem_layer.extract.extractor import MemoryOperation, OpType
    from tests.fakes import ScriptedExtractor

    text = "Went hiking with Dana near Lake Tahoe."
    written = MemoryLayer(store, extraction="inline", clock=clock, extractor=ScriptedExtractor(
        [MemoryOperation(op=OpType.ADD, content=text, kind=Kind.EPISODIC_EVENT)]))
    result = written.ingest("w1", [HumanMessage("We went hiking.", id="w1-1")])
    (extracted,) = result.written
    layer = make_layer(store, clock)
    direct = layer.remember("u1", text)

    assert direct.record.kind == Kind.EPISODIC_EVENT  # raw text: what was said, no decay
    assert direct.record.refs == extract_refs(text) == ["dana", "lake tahoe"]
    assert layer.get("u1", direct.key).record.refs == written.get("w1", extracted).record.refs
    # Found by the reference strategy alone (no query text), and for a question naming it.
    (only,) = layer.recall("u1", None, refs=["Lake Tahoe"])
    assert only.key == direct.key and "ref" in only.sources
    found = {r.key: r for r in layer.recall("u1", "Who did I meet at Lake Tahoe?")}
    assert "ref" in found[direct.key].sources


def test_the_write_path_recalls_existing_memories_as_the_read_path_does(
        store: PostgresMemoryStore, clock: Clock) -> None:
    from langmem_layer.read.recall import recall_op
    from tests.fakes import ScriptedExtractor

    extractor = ScriptedExtractor()
    layer = MemoryLayer(store, extraction="inline", clock=clock, extractor=extractor)
    booked = layer.remember("u1", "Booked the dentist.", refs=["Zoltan"]).key
    query = "Did Zoltan call back about May 2023?"
    (hit,) = layer.recall("u1", query)  # only as a reference: the embedding is too far
    assert hit.sources.keys() - {"vector"} == {"ref"}
    assert (hit.similarity or 0.0) < layer.settings.episodic_similarity_floor
    layer.ingest("u1", [HumanMessage(query, id="z-1")])
    assert booked in [r.key for r in extractor.seen[0]]  # the extractor weighs it too

    op = recall_op(layer.env, "u1", query, profile=None, now=clock.now)
    assert op.per_source == layer.settings.candidates_per_source  # what ranking assumes
    assert op.refs == ("zoltan",) and op.window is not None
    # The write path's only difference: no link walk (see write.apply.ingest).
    walkless = recall_op(layer.env, "u1", query, profile=None, now=clock.now, walk_links=False)
    assert walkless == op._replace(link_types=())


# -- the names a question gives: matched exactly, not embedded; the subjects it names -----


def test_without_refs_leaves_the_names_out() -> None:
    from langmem_layer.read.query import without_refs

    q = "What was Melanie's reaction to her kids at the Grand  Canyon?"
    assert without_refs(q, extract_refs(q)) == "What was reaction to her kids at the ?"
    assert without_refs("When was Jon in Rome?", ["jon", "rome"]) == "When was in ?"
    assert without_refs("Jonathan met Jon", ["jon"]) == "Jonathan met"  # whole words only
    assert without_refs("Boston?", ["boston"]) == "Boston?"  # nothing left: the text itself
    assert without_refs("What pets does Nate have?", []) == "What pets does Nate have?"


def test_the_query_is_embedded_without_the_names_it_gives(store: PostgresMemoryStore,
                                                         clock: Clock) -> None:
    # No word in common: only the embedding finds it. With the name, the query's vector is
    # half "caroline" (cosine 0.5, under the 0.70 floor); without it, all puppy (0.71).
    layer_fact = make_layer(store, clock)
    walked = fact(layer_fact, "Walked the hound.")
    found = layer_fact.recall("u1", "Is Caroline with a puppy?")
    assert keys(found) == [walked]
    assert found[0].similarity == pytest.approx(1 / math.sqrt(2), abs=1e-4)
    with_names = make_layer(store, clock, embed_query_refs=True)
    assert keys(with_names.recall("u1", "Is Caroline with a puppy?")) == []
    # The exact strategies still have the name: a memory carrying it is found by it.
    named = fact(layer_fact, "Joined the book club.", refs=["Caroline"])
    assert named in keys(layer_fact.recall("u1", "Is Caroline with a puppy?"))


def test_subject_of_a_memory() -> None:
    from langmem_layer.read.rank import subject_of

    assert subject_of({"subject": "Caroline"}) == "caroline"
    assert subject_of({"subject": "Mary  Ann"}) == "mary ann"
    assert subject_of({"subject": " "}) is None
    assert subject_of({"subject": None}) is None
    assert subject_of({"content": "Caroline: I went to the support group."}) is None


def _line(key: str, content: str, ranks: dict[str, int], subject: str | None = None
          ) -> Candidate:
    now = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
    record = MemoryRecord(content=content, kind=Kind.EPISODIC_EVENT, layer=Layer.EPISODIC,
                          occurred_at=now, last_accessed_at=now, subject=subject)
    return Candidate(("memories", "u1", "work"), key, record.to_value(), now, now, 0.9, ranks)


def test_subject_focus_favours_the_memories_of_the_subject_the_query_names() -> None:
    now = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)
    cands = [_line("other", "Nate, your turtles are so cute!", {"vector": 0}, "Joanna"),
             _line("named", "I give the turtles a bath on Sundays.", {"vector": 1}, "Nate"),
             _line("plain", "Bought turtle food.", {"vector": 2})]

    def ranked(names: tuple[str, ...], focus: float) -> dict[str, float]:
        out = rank_candidates(cands, now=now, settings=MemorySettings(
            rrf_k=60, subject_focus=focus, rerank_depth=0), limit=5, trust={}, names=names)
        return {r.key: r.relevance for r in out}

    off = ranked(("nate",), 1.0)
    assert list(off) == ["other", "named", "plain"]
    on = ranked(("nate",), 0.5)
    assert list(on) == ["named", "plain", "other"]
    assert on["other"] == pytest.approx(0.5 * (1 / 61) / (1 / 62))  # half, over the new best
    assert on["plain"] == pytest.approx((1 / 63) / (1 / 62))  # no subject: unchanged score
    # A name that is nobody's subject (a pet, a place) focuses nothing; nor does no name.
    assert list(ranked(("max",), 0.5)) == ["other", "named", "plain"]
    assert list(ranked((), 0.5)) == ["other", "named", "plain"]


def test_recall_focuses_on_the_subject_the_question_names(store: PostgresMemoryStore,
                                                          clock: Clock) -> None:
    layer = make_layer(store, clock)
    other = fact(layer, "The puppy ran off.", subject="Joanna")
    named = fact(layer, "The puppy slept.", subject="Nate")
    found = {r.key: r for r in layer.recall("u1", "Is Nate with a puppy?")}
    assert keys(list(found.values()))[0] == named
    assert found[other].relevance is not None and found[other].relevance < 0.55
    off = {r.key: r for r in make_layer(store, clock, subject_focus=1.0).recall(
        "u1", "Is Nate with a puppy?")}
    assert off[other].relevance is not None and off[other].relevance > 0.9
