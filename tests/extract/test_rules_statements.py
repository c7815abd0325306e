"""RuleExtractor on how people state facts about themselves (write/statements.py), and
what it must leave alone: questions, hypotheticals, sarcasm, quotes, other people."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from langchain_core.messages import HumanMessage

from langmem_layer.extract.dates import resolve_date
from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.types import Kind, Layer, MemoryRecord, Recalled

NOW = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)  # a Monday


def extract(text: str, existing: tuple[Recalled, ...] = ()) -> list[MemoryOperation]:
    return RuleExtractor().extract([HumanMessage(text, id="m")], existing=existing, now=NOW)


@pytest.mark.parametrize(("text", "kind", "content"), [
    ("My favourite coffee shop is Café Vermelho.", Kind.PREFERENCE,
     "Favourite coffee shop is Café Vermelho."),
    ("Radiohead is my favourite band.", Kind.PREFERENCE, "Favourite band is Radiohead."),
    ("Oh and my fave food is ramen.", Kind.PREFERENCE, "Favourite food is ramen."),
    ("My dog Rex loves the beach.", Kind.PROFILE_FACT, "Has a dog named Rex."),
    ("I also have a cat named Mango.", Kind.PROFILE_FACT, "Has a cat named Mango."),
    ("I have two cats.", Kind.PROFILE_FACT, "Has two cats."),
    ("My sister Ana works at Google as a nurse.", Kind.PROFILE_FACT,
     "Their sister Ana works at Google as a nurse."),
    ("My mom is a retired teacher.", Kind.PROFILE_FACT, "Their mom is a retired teacher."),
    ("My son's name is Leo.", Kind.PROFILE_FACT, "Their son is named Leo."),
    ("I'm from Brazil.", Kind.PROFILE_FACT, "Is from Brazil."),
    ("I work as a pediatric nurse.", Kind.PROFILE_FACT, "Works as a pediatric nurse."),
    ("I'm a software engineer.", Kind.PROFILE_FACT, "Is a software engineer."),
    ("I drive a Tesla Model 3.", Kind.PROFILE_FACT, "Drives a Tesla Model 3."),
    ("I own a small sailboat.", Kind.PROFILE_FACT, "Owns a small sailboat."),
    ("I have asthma, so no running in the cold.", Kind.PROFILE_FACT, "Has asthma."),
    ("I'm vegetarian.", Kind.PROFILE_FACT, "Is vegetarian."),
    ("I don't eat pork.", Kind.PREFERENCE, "Does not eat pork."),
    ("I'm learning Japanese.", Kind.PROFILE_FACT, "Is learning Japanese."),
    ("I've been learning the guitar for a year.", Kind.PROFILE_FACT,
     "Is learning the guitar."),
    ("I quit smoking last year.", Kind.PROFILE_FACT, "Has stopped smoking."),
    ("I no longer eat meat.", Kind.PROFILE_FACT, "No longer eats meat."),
    ("We live in Berlin, near the park.", Kind.PROFILE_FACT, "Lives in Berlin."),
    ("I have a job interview on Friday, wish me luck.", Kind.OPEN_LOOP,
     "Has a job interview on Friday (Fri 2026-11-06)."),
    ("We're going to Lisbon next month for a wedding.", Kind.OPEN_LOOP,
     "Is going to Lisbon next month for a wedding (Tue 2026-12-01)."),
])
def test_statements_about_oneself(text: str, kind: Kind, content: str) -> None:
    (op,) = extract(text)
    assert (op.op, op.kind, op.content) == (OpType.ADD, kind, content)


def test_a_relatives_fact_is_theirs_not_the_users() -> None:
    (op,) = extract("My brother lives in Lyon.")
    assert op.subject == "brother" and op.predicate == "family"


@pytest.mark.parametrize(("text", "predicate", "content"), [
    ("We moved to Porto last spring.", "lives_in", "Lives in Porto."),
    ("I'm based in Porto these days.", "lives_in", "Lives in Porto."),
    ("I started a new job at Stripe last month.", "works_at", "Works at Stripe."),
    ("I got a new job at Farfetch.", "works_at", "Works at Farfetch."),
])
def test_moves_and_job_changes_said_indirectly_update(text: str, predicate: str,
                                                       content: str) -> None:
    old = "Lisbon" if predicate == "lives_in" else "Initech"
    words = "Lives in" if predicate == "lives_in" else "Works at"
    existing = Recalled("k", ("memories", "u", "work"), MemoryRecord(
        content=f"{words} {old}.", kind=Kind.PROFILE_FACT, layer=Layer.SEMANTIC,
        subject="user", predicate=predicate, object=old, occurred_at=NOW,
        last_accessed_at=NOW))
    (op,) = extract(text, (existing,))
    assert (op.op, op.content, op.target_id) == (OpType.UPDATE, content, "k")


@pytest.mark.parametrize("text", [
    # questions
    "Do you know where I live?", "What's my favourite coffee shop?", "Should I work at Google?",
    "Is my dog Rex too old for the beach?",
    # hypotheticals
    "If I lived in Paris, I'd eat croissants every day.", "Imagine I worked at NASA.",
    "Suppose my name was Bob.", "I wish I had a dog named Biscuit.",
    # other people
    "My colleague works at Google.", "She is allergic to cats.", "Tom speaks five languages.",
    "My neighbour has a dog named Rufus.", "My sister said she lives in Paris.",
    # sarcasm
    "Oh sure, I just love waiting in line for hours.",
    "Yeah right, I totally live at the office.", "Sure, and my name is the Queen of England.",
    # quotes and reported speech
    '"I work at Google," he told me.', 'She said "I\'m allergic to cats."',
    'The song goes "I live in a yellow submarine".', "My boss said I should move to Berlin.",
    # figures of speech
    "I'm learning a lot from this conversation.", "I have a question about taxes.",
    "That's my favourite part of your answer.", "I'm going to Lisbon one day.",
])
def test_nothing_to_remember(text: str) -> None:
    assert extract(text) == []


def test_weekend_and_next_month_resolve() -> None:
    assert resolve_date("this weekend", NOW) == datetime(2026, 11, 7, 9, tzinfo=UTC)
    assert resolve_date("next weekend", NOW) == datetime(2026, 11, 14, 9, tzinfo=UTC)
    assert resolve_date("next month", NOW) == datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert resolve_date("next month", datetime(2026, 12, 20, tzinfo=UTC)) == datetime(
        2027, 1, 1, 9, tzinfo=UTC)
