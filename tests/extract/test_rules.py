"""RuleExtractor: each phrase family, corrections, forgets, boundaries, dates, reinforcement."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langmem_layer.extract.extractor import Extractor, MemoryOperation, OpType
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.types import Kind, Layer, MemoryRecord, Policy, Recalled

# Wednesday 2026-11-18 15:00 UTC.
NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)


def at(month: int, day: int, hour: int = 9, minute: int = 0, year: int = 2026) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def extract(
    *texts: str, existing: Sequence[Recalled] = (), now: datetime = NOW
) -> list[MemoryOperation]:
    messages: list[BaseMessage] = [HumanMessage(t, id=f"m{i}") for i, t in enumerate(texts)]
    return RuleExtractor().extract(messages, existing=existing, now=now)


def one(text: str, existing: Sequence[Recalled] = ()) -> MemoryOperation:
    ops = extract(text, existing=existing)
    assert len(ops) == 1, ops
    return ops[0]


def memory(key: str, content: str, **fields: Any) -> Recalled:
    values: dict[str, Any] = {
        "content": content,
        "kind": Kind.PROFILE_FACT,
        "layer": Layer.SEMANTIC,
        "occurred_at": at(1, 1),
        "last_accessed_at": at(1, 1),
        **fields,
    }
    return Recalled(key=key, namespace=("memories", "u", "work"), record=MemoryRecord(**values))


WORKS_AT_INITECH = memory(
    "k-work", "Works at Initech.", subject="user", predicate="works_at", object="Initech"
)
LIVES_IN_BERLIN = memory(
    "k-home", "Lives in Berlin.", subject="user", predicate="lives_in", object="Berlin"
)
MEETING_SAM = memory(
    "k-sam",
    "Is meeting Sam on Friday.",
    kind=Kind.OPEN_LOOP,
    layer=Layer.EPISODIC,
    refs=["Sam"],
)
VEGETARIAN = memory("k-veg", "Is vegetarian.", subject="user")


# --- protocol and plumbing ------------------------------------------------------------


def test_implements_the_extractor_protocol() -> None:
    assert isinstance(RuleExtractor(), Extractor)


async def test_aextract_matches_extract() -> None:
    messages = [HumanMessage("I prefer tea. Remind me to call mom tomorrow.", id="a")]
    sync = RuleExtractor().extract(messages, now=NOW)
    async_ = await RuleExtractor().aextract(messages, now=NOW)
    assert async_ == sync and len(sync) == 2


def test_only_human_messages_are_read() -> None:
    messages = [
        SystemMessage("My name is System."),
        AIMessage("I prefer short answers. My name is Claude."),
        ToolMessage("I work at ToolCorp.", tool_call_id="t1"),
        HumanMessage("I live in Lisbon.", id="h1"),
    ]
    ops = RuleExtractor().extract(messages, now=NOW)
    assert [op.content for op in ops] == ["Lives in Lisbon."]
    assert ops[0].source_message_id == "h1"
    assert ops[0].source_text == "I live in Lisbon."


def test_list_content_is_read() -> None:
    message = HumanMessage(
        content=[
            {"type": "text", "text": "I prefer tea"},
            {"type": "text", "text": "I live in Rome"},
        ]
    )
    assert [op.content for op in RuleExtractor().extract([message], now=NOW)] == [
        "Prefers tea.",
        "Lives in Rome.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "hi, how are you?",
        "Hello!",
        "thanks, that was helpful.",
        "What's the weather like today?",
        "Can you summarise this article for me?",
        "I'm tired today.",
        "I'm having a bad day.",
        "I have a cold today.",
        "ok",
        "",
    ],
)
def test_small_talk_yields_nothing(text: str) -> None:
    assert extract(text) == []


def test_questions_are_not_statements() -> None:
    assert extract("Do I prefer tea?") == []
    assert extract("Where do I work at the moment?") == []
    assert extract("what do you know about me?") == []


def test_conditionals_are_not_facts() -> None:
    assert extract("If I prefer tea, tell me.") == []


def test_source_and_reason_are_recorded() -> None:
    ops = extract("Hello there. I prefer window seats! Also, I live in Oslo.")
    assert [(op.source_message_id, op.source_text, op.reason) for op in ops] == [
        ("m0", "I prefer window seats!", "rule:prefer"),
        ("m0", "Also, I live in Oslo.", "rule:live"),
    ]


def test_several_sentences_and_clauses() -> None:
    ops = extract(
        "Hi, my name is Dana and I work at Acme. I prefer morning meetings; I'm allergic to "
        "peanuts.\nI live in Berlin, I speak German."
    )
    assert [op.content for op in ops] == [
        "Name is Dana.",
        "Works at Acme.",
        "Prefers morning meetings.",
        "Is allergic to peanuts.",
        "Lives in Berlin.",
        "Speaks German.",
    ]


def test_repeats_in_one_call_are_proposed_once() -> None:
    assert len(extract("I prefer tea.", "I prefer tea!")) == 1


# --- the rule table ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "I prefer morning meetings",
        "i prefer morning meetings.",
        "I PREFER morning meetings!!",
        "To be honest, I really prefer morning meetings by the way.",
        "Good question. Anyway I generally prefer morning meetings, thanks",
    ],
)
def test_prefer(text: str) -> None:
    op = one(text)
    assert op.op is OpType.ADD
    assert op.content.lower() == "prefers morning meetings."  # type: ignore[union-attr]
    assert (op.kind, op.layer, op.policy) == (Kind.PREFERENCE, Layer.PROCEDURAL, Policy.ADAPT)
    assert (op.confidence, op.salience) == (0.95, 0.7)
    assert op.subject == "user" and op.predicate == "prefers"
    assert "morning meetings" in op.refs
    assert op.reason == "rule:prefer"


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("I always take the stairs.", "Always takes the stairs."),
        ("i always double-check my email", "Always double-checks their email."),
        ("Honestly, I always try to finish early!", "Always tries to finish early."),
        ("I always go for a run before work", "Always goes for a run before work."),
        ("I always watch the news", "Always watches the news."),
    ],
)
def test_always(text: str, content: str) -> None:
    op = one(text)
    assert op.content == content
    assert (op.kind, op.layer, op.policy, op.confidence) == (
        Kind.PREFERENCE,
        Layer.PROCEDURAL,
        Policy.ADAPT,
        0.9,
    )
    assert op.predicate == "habit"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("My name is Dana", "Dana"),
        ("Hi! my name is Dana Scully.", "Dana Scully"),
        ("Hello, my name is Dana, nice to meet you", "Dana"),
        ("My name is Dana but friends call me D", "Dana"),
        ("You can call me Dee.", "Dee"),
        ("Please call me Dr Dee", "Dr Dee"),
        ("I'm called Zoë.", "Zoë"),
        ("I’m called Zoë by everyone", "Zoë"),
        ("my name is dana", "dana"),
    ],
)
def test_name(text: str, name: str) -> None:
    op = one(text)
    assert op.content == f"Name is {name}."
    assert (op.kind, op.layer, op.policy, op.confidence, op.salience) == (
        Kind.PROFILE_FACT,
        Layer.IDENTITY,
        Policy.SPEAK,
        1.0,
        0.9,
    )
    assert (op.subject, op.predicate, op.object) == ("user", "name", name)


@pytest.mark.parametrize("text", ["Call me tomorrow.", "call me back later", "Don't call me Danny"])
def test_call_me_needs_a_name(text: str) -> None:
    assert extract(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "I'm allergic to peanuts",
        "I am allergic to peanuts.",
        "I’m severely allergic to peanuts!",
        "Just so you know, I'M ALLERGIC TO peanuts",
    ],
)
def test_allergy(text: str) -> None:
    op = one(text)
    assert op.content.lower() == "is allergic to peanuts."  # type: ignore[union-attr]
    assert (op.kind, op.layer, op.policy, op.confidence, op.salience) == (
        Kind.PROFILE_FACT,
        Layer.IDENTITY,
        Policy.FACTCHECK,
        0.95,
        0.9,
    )
    assert op.predicate == "allergic_to" and op.refs == ["peanuts"]


@pytest.mark.parametrize(
    "text",
    [
        "I don't like loud music",
        "I do not like loud music.",
        "I don’t really like loud music!",
        "I dislike loud music",
        "Ugh, I hate loud music.",
        "I can't stand loud music",
    ],
)
def test_dislike(text: str) -> None:
    op = one(text)
    assert op.content == "Dislikes loud music."
    assert (op.kind, op.layer, op.policy, op.confidence) == (
        Kind.PREFERENCE,
        Layer.PROCEDURAL,
        Policy.ADAPT,
        0.85,
    )
    assert op.predicate == "dislikes"


@pytest.mark.parametrize(
    ("text", "employer"),
    [
        ("I work at Acme", "Acme"),
        ("i work for Acme Corp.", "Acme Corp"),
        ("By the way, I currently work at the Acme lab, thanks!", "the Acme lab"),
        ("I work at Acme too", "Acme"),
    ],
)
def test_work(text: str, employer: str) -> None:
    op = one(text)
    assert op.op is OpType.ADD
    assert op.content == f"Works at {employer}."
    assert (op.kind, op.layer, op.policy, op.confidence, op.salience) == (
        Kind.PROFILE_FACT,
        Layer.SEMANTIC,
        Policy.SPEAK,
        0.9,
        0.6,
    )
    assert (op.predicate, op.object) == ("works_at", employer)
    assert op.refs[0] == employer.lower().removeprefix("the ")


@pytest.mark.parametrize("text", ["I work at night", "I work from home", "I work at 9am"])
def test_work_needs_an_employer(text: str) -> None:
    assert extract(text) == []


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("I live in Berlin", "Berlin"),
        ("i live in New York City.", "New York City"),
        ("Fun fact: I live in a small village near Porto!", "a small village near Porto"),
    ],
)
def test_live(text: str, place: str) -> None:
    op = one(text)
    assert op.content == f"Lives in {place}."
    assert (op.layer, op.predicate, op.object, op.confidence) == (
        Layer.SEMANTIC,
        "lives_in",
        place,
        0.9,
    )


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("I speak French", "French"),
        ("I also speak French and German.", "French and German"),
        ("Oh, I speak fluent French too!", "fluent French"),
    ],
)
def test_speak(text: str, language: str) -> None:
    op = one(text)
    assert op.content == f"Speaks {language}."
    assert (op.layer, op.policy, op.predicate, op.confidence) == (
        Layer.IDENTITY,
        Policy.SPEAK,
        "speaks",
        0.95,
    )


@pytest.mark.parametrize("text", ["I speak to my boss tomorrow", "I speak with Sam often"])
def test_speak_to_someone_is_not_a_language(text: str) -> None:
    assert [op for op in extract(text) if op.predicate == "speaks"] == []


@pytest.mark.parametrize(
    "text",
    [
        "I'm usually free on Tuesday afternoons",
        "I am usually free on Tuesday afternoons.",
        "FYI, I’m usually free on Tuesday afternoons!",
    ],
)
def test_usually_free(text: str) -> None:
    op = one(text)
    assert op.content == "Is usually free on Tuesday afternoons."
    assert (op.kind, op.layer, op.policy, op.confidence) == (
        Kind.PREFERENCE,
        Layer.PROCEDURAL,
        Policy.ADAPT,
        0.85,
    )
    assert op.due_at is None


@pytest.mark.parametrize(
    ("text", "content", "due"),
    [
        ("Remind me to call mom", "Wants a reminder to call mom.", None),
        (
            "remind me to call mom tomorrow",
            "Wants a reminder to call mom tomorrow (Thu 2026-11-19).",
            at(11, 19),
        ),
        (
            "Can you remind me about the dentist on December 3?",
            "Wants a reminder about the dentist on December 3 (Thu 2026-12-03).",
            at(12, 3),
        ),
        (
            "Oh and please REMIND ME TO renew my passport at 4pm on Friday!",
            "Wants a reminder to renew their passport at 4pm on Friday (Fri 2026-11-20 16:00).",
            at(11, 20, 16),
        ),
    ],
)
def test_remind(text: str, content: str, due: datetime | None) -> None:
    op = one(text)
    assert op.content == content
    assert op.due_at == due
    assert (op.kind, op.layer, op.policy, op.confidence, op.salience) == (
        Kind.OPEN_LOOP,
        Layer.EPISODIC,
        Policy.CONTINUE,
        1.0,
        0.8,
    )
    assert op.reason == "rule:remind"


# --- threshold ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["I like this answer", "I love jazz.", "I really enjoy hiking"])
def test_rule_at_the_threshold_is_not_proposed(text: str) -> None:
    # "I like/love/enjoy" has confidence 0.8, not above min_confidence.
    assert RuleExtractor.min_confidence == 0.8
    assert extract(text) == []


def test_threshold_is_a_class_attribute() -> None:
    class Eager(RuleExtractor):
        min_confidence = 0.75

    class Strict(RuleExtractor):
        min_confidence = 0.9

    messages = [HumanMessage("I love jazz. I don't like opera. I prefer tea.", id="x")]
    assert [op.content for op in Eager().extract(messages, now=NOW)] == [
        "Likes jazz.",
        "Dislikes opera.",
        "Prefers tea.",
    ]
    assert [op.content for op in Strict().extract(messages, now=NOW)] == ["Prefers tea."]
    # Corrections have their own confidence (0.85 here) and are held to the same bar.
    correction = [HumanMessage("Actually, it's Bob, not Sam.", id="c")]
    assert len(RuleExtractor().extract(correction, now=NOW)) == 1
    assert Strict().extract(correction, now=NOW) == []


def test_rule_below_threshold_does_not_shadow_later_rules() -> None:
    # "I love ..." (0.8) matches first in the clause but is skipped, so the plan is found.
    op = one("I love that I have an interview tomorrow!")
    assert (op.content, op.due_at) == ("Has an interview tomorrow (Thu 2026-11-19).", at(11, 19))


# --- boundaries -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("Never mention my divorce.", "their divorce"),
        ("never mention my divorce again", "their divorce"),
        ("Don't bring up my divorce", "their divorce"),
        ("Please don’t bring up my divorce, ever.", "their divorce"),
        ("do not bring up the divorce!", "the divorce"),
        ("Please don't talk about my divorce", "their divorce"),
        ("Thanks. And don't remind me about my divorce.", "their divorce"),
        ("Could you never mention my divorce?", "their divorce"),
    ],
)
def test_boundary(text: str, topic: str) -> None:
    op = one(text)
    assert op.op is OpType.ADD
    assert op.content == f"Do not bring up {topic} unless the user does."
    assert (op.kind, op.layer, op.policy, op.salience) == (
        Kind.PROTOCOL,
        Layer.IDENTITY,
        Policy.AVOID,
        0.9,
    )
    assert op.confidence >= 0.85
    assert op.refs[0] == "divorce"
    assert op.predicate == "avoid_topic"


def test_not_wanting_to_talk_is_a_boundary() -> None:
    op = one("I don't want to talk about work.")
    assert op.content == "Do not bring up work unless the user does."
    assert op.policy is Policy.AVOID and op.confidence == 0.85


# --- forget -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("Forget about my old job.", "my old job"),
        ("please forget that I have a sister", "I have a sister"),
        ("Please don't remember my address!", "my address"),
        ("Can you stop remembering my address?", "my address"),
        ("OK, delete what you know about my ex.", "my ex"),
        ("Also, forget my phone number", "my phone number"),
    ],
)
def test_forget_without_a_matching_memory(text: str, hint: str) -> None:
    op = one(text, existing=[WORKS_AT_INITECH])
    assert op.op is OpType.FORGET
    assert op.target_hint == hint
    assert op.target_id is None
    assert op.confidence == 0.95 and op.reason == "rule:forget"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Please forget about Sam.", "k-sam"),
        ("forget about SAM", "k-sam"),
        ("Forget that I live in Berlin.", "k-home"),
        ("delete what you know about initech", "k-work"),
    ],
)
def test_forget_targets_matching_memories(text: str, key: str) -> None:
    op = one(text, existing=[WORKS_AT_INITECH, LIVES_IN_BERLIN, MEETING_SAM])
    assert op.op is OpType.FORGET
    assert op.target_id == key


def test_forget_names_every_matching_memory() -> None:
    also_sam = memory("k-sam2", "Sam is their brother.", refs=["Sam"])
    ops = extract("Forget about Sam", existing=[MEETING_SAM, WORKS_AT_INITECH, also_sam])
    assert [(op.op, op.target_id) for op in ops] == [
        (OpType.FORGET, "k-sam"),
        (OpType.FORGET, "k-sam2"),
    ]


@pytest.mark.parametrize("text", ["Forget it.", "I always forget my keys", "I forget things"])
def test_not_forget_requests(text: str) -> None:
    assert [op for op in extract(text) if op.op is OpType.FORGET] == []


# --- corrections --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Actually I work at Globex now.",
        "actually, I work for Globex",
        "I work at Globex these days!",
        "Oh, I work at Globex now by the way.",
    ],
)
def test_actually_work_at_updates_the_workplace(text: str) -> None:
    op = one(text, existing=[LIVES_IN_BERLIN, WORKS_AT_INITECH])
    assert op.op is OpType.UPDATE
    assert op.content == "Works at Globex."
    assert (op.predicate, op.object) == ("works_at", "Globex")
    assert op.target_id == "k-work"
    assert op.target_hint == "Works at Initech."


def test_actually_without_matching_memory_hints_the_predicate() -> None:
    op = one("Actually I work at Globex now.", existing=[LIVES_IN_BERLIN])
    assert op.op is OpType.UPDATE
    assert op.target_id is None
    assert op.target_hint == "works at"  # the predicate, in the words memories use


def test_new_value_of_a_single_valued_fact_updates_without_a_cue() -> None:
    op = one("I work at Globex.", existing=[WORKS_AT_INITECH])
    assert (op.op, op.target_id) == (OpType.UPDATE, "k-work")


def test_plain_fact_with_no_memory_is_an_add() -> None:
    assert one("I work at Globex.", existing=[LIVES_IN_BERLIN]).op is OpType.ADD


@pytest.mark.parametrize(
    "text",
    [
        "I no longer live in Berlin, I live in Paris now.",
        "I don't live in Berlin anymore, I live in Paris.",
        "i do not live in berlin any more; I live in Paris",
        "Since June I no longer live in Berlin and I live in Paris now",
    ],
)
def test_no_longer_with_new_value(text: str) -> None:
    op = one(text, existing=[WORKS_AT_INITECH, LIVES_IN_BERLIN])
    assert op.op is OpType.UPDATE
    assert op.content == "Lives in Paris."
    assert op.target_id == "k-home"
    assert op.target_hint is not None and "berlin" in op.target_hint.lower()
    assert op.reason == "rule:correction-verb"


def test_no_longer_with_new_value_and_no_memory() -> None:
    op = one("I no longer live in Berlin, I live in Paris now.")
    assert (op.op, op.content, op.target_id) == (OpType.UPDATE, "Lives in Paris.", None)
    assert op.target_hint == "lives in Berlin"


def test_moved_to_updates_home() -> None:
    op = one("I've just moved to Lisbon!", existing=[LIVES_IN_BERLIN])
    assert (op.op, op.content, op.target_id) == (OpType.UPDATE, "Lives in Lisbon.", "k-home")


@pytest.mark.parametrize(
    "text",
    [
        "I no longer work at Initech.",
        "I don't work at Initech anymore.",
        "I stopped working at Initech",
    ],
)
def test_no_longer_without_new_value_contradicts(text: str) -> None:
    op = one(text, existing=[LIVES_IN_BERLIN, WORKS_AT_INITECH])
    assert op.op is OpType.CONTRADICT
    assert op.content == "No longer works at Initech."
    assert (op.target_id, op.target_hint) == ("k-work", "works at Initech")


def test_no_longer_without_memory_still_names_the_old_value() -> None:
    op = one("I no longer work at Initech.")
    assert (op.op, op.target_id, op.target_hint) == (OpType.CONTRADICT, None, "works at Initech")


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("I'm not vegetarian anymore.", "Is no longer vegetarian."),
        ("I am no longer vegetarian", "Is no longer vegetarian."),
        ("Heads up: I’m not a vegetarian any more!", "Is no longer a vegetarian."),
    ],
)
def test_not_x_anymore(text: str, content: str) -> None:
    op = one(text, existing=[WORKS_AT_INITECH, VEGETARIAN])
    assert (op.op, op.content, op.target_id) == (OpType.CONTRADICT, content, "k-veg")


def test_vague_not_anymore_without_memory_proposes_nothing() -> None:
    assert extract("I'm not sure anymore.", existing=[WORKS_AT_INITECH]) == []


def test_not_at_x_anymore_with_new_fact() -> None:
    op = one("I'm not at Initech anymore, I work for Globex now.", existing=[WORKS_AT_INITECH])
    assert (op.op, op.content, op.target_id) == (OpType.UPDATE, "Works at Globex.", "k-work")


def test_dont_without_anymore_is_not_a_correction() -> None:
    assert extract("I don't live in Berlin.", existing=[LIVES_IN_BERLIN]) == []


@pytest.mark.parametrize(
    "text",
    [
        "Actually, it's Bob, not Sam.",
        "actually it's Bob not Sam",
        "No, it’s Bob, not Sam!",
        "Sorry, I meant Bob, not Sam.",
    ],
)
def test_its_y_not_x_rewrites_the_matching_memory(text: str) -> None:
    op = one(text, existing=[WORKS_AT_INITECH, MEETING_SAM])
    assert op.op is OpType.UPDATE
    assert op.content == "Is meeting Bob on Friday."
    assert (op.target_id, op.target_hint) == ("k-sam", "Sam")
    assert op.kind is Kind.OPEN_LOOP
    assert op.confidence == 0.85


def test_its_y_not_x_without_memory() -> None:
    op = one("Actually, it's Bob, not Sam.")
    assert (op.op, op.target_id, op.target_hint) == (OpType.UPDATE, None, "Sam")
    assert op.content == "Correction: Bob, not Sam."


def test_its_y_not_x_needs_a_correction_cue() -> None:
    assert extract("It's blue, not red.", existing=[MEETING_SAM]) == []


# --- dated plans ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "content", "due"),
    [
        (
            "I have an interview on Friday",
            "Has an interview on Friday (Fri 2026-11-20).",
            at(11, 20),
        ),
        (
            "Wish me luck, I have a job interview next Friday at 10am!",
            "Has a job interview next Friday at 10am (Fri 2026-11-27 10:00).",
            at(11, 27, 10),
        ),
        (
            "I'm meeting Sam tomorrow.",
            "Is meeting Sam tomorrow (Thu 2026-11-19).",
            at(11, 19),
        ),
        (
            "I am flying to Rome tonight",
            "Is flying to Rome tonight (Wed 2026-11-18).",
            at(11, 18, 20),
        ),
        (
            "My exam is next Monday",
            "Exam is next Monday (Mon 2026-11-23).",
            at(11, 23),
        ),
        (
            "the deadline is on 2026-12-03",
            "Deadline is on 2026-12-03.",
            at(12, 3),
        ),
        (
            "Our team offsite meeting is in 2 weeks.",
            "Team offsite meeting is in 2 weeks (Wed 2026-12-02).",
            at(12, 2),
        ),
        (
            "My dentist appointment's on December 3.",
            "Dentist appointment's on December 3 (Thu 2026-12-03).",
            at(12, 3),
        ),
        (
            "I need to finish the report in 3 days",
            "Needs to finish the report in 3 days (Sat 2026-11-21).",
            at(11, 21),
        ),
        (
            "I'll call the bank the day after tomorrow.",
            "Plans to call the bank the day after tomorrow (Fri 2026-11-20).",
            at(11, 20),
        ),
        (
            "I'm going to the gym at 6 p.m. today",
            "Is going to the gym at 6 p.m. today (Wed 2026-11-18 18:00).",
            at(11, 18, 18),
        ),
        (
            "I promised to send Ana the slides next week",
            "Promised to send Ana the slides next week (Wed 2026-11-25).",
            at(11, 25),
        ),
        (
            "remind me to call mom tomorrow",
            "Wants a reminder to call mom tomorrow (Thu 2026-11-19).",
            at(11, 19),
        ),
        (
            "I have a meeting on 3 December",
            "Has a meeting on 3 December (Thu 2026-12-03).",
            at(12, 3),
        ),
        (
            "I've got a flight in 2 days",
            "Has a flight in 2 days (Fri 2026-11-20).",
            at(11, 20),
        ),
    ],
)
def test_dated_plans(text: str, content: str, due: datetime) -> None:
    op = one(text)
    assert op.op is OpType.ADD
    assert op.content == content
    assert op.due_at == due
    assert (op.kind, op.layer, op.policy, op.salience) == (
        Kind.OPEN_LOOP,
        Layer.EPISODIC,
        Policy.CONTINUE,
        0.8,
    )
    assert op.confidence >= 0.85


@pytest.mark.parametrize(
    "text",
    [
        "I have an interview",  # no date
        "I had an interview yesterday",  # past
        "I have an interview yesterday",  # past date: not a plan
        "I have a cold today",  # not an event
        "The weather is nice today",  # not an event
        "I'm feeling great today",  # a mood
        "I'll be late tomorrow",  # a state, not a plan
    ],
)
def test_not_plans(text: str) -> None:
    assert extract(text) == []


def test_dates_use_the_turn_time_not_the_wall_clock() -> None:
    long_ago = datetime(2001, 1, 3, 12, tzinfo=UTC)  # a Wednesday
    ops = extract("I have an interview tomorrow. Remind me to vote next Friday.", now=long_ago)
    assert [op.due_at for op in ops] == [
        datetime(2001, 1, 4, 9, tzinfo=UTC),
        datetime(2001, 1, 12, 9, tzinfo=UTC),
    ]
    assert ops[0].content == "Has an interview tomorrow (Thu 2001-01-04)."


def test_naive_now_is_taken_as_utc() -> None:
    op = one("I have an exam tomorrow")
    naive = extract("I have an exam tomorrow", now=NOW.replace(tzinfo=None))
    assert [o.due_at for o in naive] == [op.due_at] == [at(11, 19)]


def test_plans_in_the_past_of_now_are_dropped_even_if_future_on_the_wall_clock() -> None:
    far_future = datetime(2099, 6, 10, 12, tzinfo=UTC)
    assert extract("My exam is on 2030-01-01", now=far_future) == []


# --- reinforcement and refs ---------------------------------------------------------------


def test_same_content_reinforces() -> None:
    existing = [memory("k-tea", "Prefers tea.", kind=Kind.PREFERENCE, layer=Layer.PROCEDURAL)]
    op = one("I prefer tea!", existing=existing)
    assert (op.op, op.target_id, op.content) == (OpType.REINFORCE, "k-tea", "Prefers tea.")
    assert op.reason == "rule:prefer+reinforce"


def test_same_triple_reinforces() -> None:
    op = one("i work at initech", existing=[WORKS_AT_INITECH])
    assert (op.op, op.target_id) == (OpType.REINFORCE, "k-work")


def test_different_content_adds() -> None:
    existing = [memory("k-tea", "Prefers tea.", kind=Kind.PREFERENCE, layer=Layer.PROCEDURAL)]
    op = one("I prefer coffee.", existing=existing)
    assert (op.op, op.target_id) == (OpType.ADD, None)


def test_refs_hold_object_and_proper_nouns() -> None:
    op = one("I prefer meetings with Ana and Bob Smith")
    assert op.refs == ["meetings with ana and bob smith", "ana", "bob smith"]
    # Objects over six words are not refs; weekdays are not proper nouns.
    assert one("I prefer meetings with Ana and Bob Smith on Mondays").refs == ["ana", "bob smith"]
    plan = one("I'm meeting Sam in London tomorrow.")
    assert plan.refs == ["sam", "london"]
    assert one("I prefer the window seat").refs == ["window seat"]
