"""Text helpers of the rule extractor (``langmem_layer.extract.rules``): sentences and
clauses, cleaning a remembered phrase, first to third person, and the cues that make a
sentence not a literal statement about the user (hypotheticals, sarcasm, quotes,
reported speech)."""

from __future__ import annotations

import re
from itertools import takewhile

from langchain_core.messages import BaseMessage

__all__ = [
    "clauses",
    "clean",
    "name_run",
    "not_literal",
    "person",
    "reported_before",
    "sentences",
    "text_of",
    "third_person",
    "untimed",
]

_A = "['’]"  # both apostrophes
_NEG = rf"(?:don{_A}t|do\s+not)"
_FILLER = re.compile(r"(?:[\s,]+(?:by\s+the\s+way|btw|though|anyway|actually|lol|haha|thanks|"
                     r"thank\s+you|please|too|as\s+well|now|these\s+days|any\s?more|again|ever|"
                     r"right\s+now|wish\s+me\s+luck|fingers\s+crossed|yay|ugh|"
                     r"(?:so|really|a\s+bit|kind\s+of)\s+(?:nervous|excited|scared|stressed)))+"
                     r"\s*$", re.IGNORECASE)
# A comma that starts an aside ("Berlin, near the park"; "design, not engineering"): the
# remembered value ends before it.
_ASIDE = re.compile(r",\s+(?:near|close|next|by|with|which|where|who|and|but|so|because|since|"
                    r"though|not|just|right|in\s+the|at\s+the|for|although|as|if|when)\b.*$",
                    re.IGNORECASE)
_UNITS = r"(?:days?|weeks?|months?|years?|decades?)"
_WHEN = (r"(?:spring|summer|autumn|fall|winter|week|weekend|month|year|january|february|march|"
         r"april|may|june|july|august|september|october|november|december|monday|tuesday|"
         r"wednesday|thursday|friday|saturday|sunday)")
# When a fact became true is not part of it ("Porto last spring" -> "Porto").
_TRAILING_TIME = re.compile(
    rf"\s+(?:(?:last|this|past|earlier\s+this|in|since|back\s+in)\s+(?:the\s+)?{_WHEN}"
    rf"|(?:a\s+few|a\s+couple\s+of|two|three|four|five|several|some|\d+|an?)\s+{_UNITS}\s+ago"
    r"|(?:in|since|back\s+in)\s+(?:19|20)\d\d|recently|lately|yesterday|today|"
    rf"for\s+(?:about\s+|almost\s+|over\s+)?(?:a|an|a\s+few|a\s+couple\s+of|two|three|four|"
    rf"five|several|many|\d+)\s+(?:\w+\s+)?{_UNITS}|for\s+ages|for\s+a\s+while)$",
    re.IGNORECASE)
_PRONOUNS = {"my": "their", "me": "them", "myself": "themselves", "mine": "theirs", "i": "they",
             "i'm": "they're", "i’m": "they're", "i've": "they've", "i’ve": "they've"}
_ABBREVIATIONS = frozenset(["a.m", "p.m", "dr", "mr", "mrs", "ms", "st", "e.g", "i.e", "etc",
                            "vs", "jr", "sr"])
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)|\n+")
_CLAUSE = re.compile(rf"\s*;\s*|\s*,?\s+(?:and|but|so|also|plus)\s+(?=(?:I|I{_A}[mdv]\w*|I{_A}ll|"
                     rf"my|please|remind|never|{_NEG}|forget)\b)|,\s+(?=(?:I|I{_A}m|I{_A}ve|my)\b)",
                     re.IGNORECASE)
# Not a literal statement about the user: a hypothetical, sarcasm, or a quotation.
_HYPOTHETICAL = re.compile(r"^\W*(?:if|what\s+if|suppose|supposing|imagine|pretend|"
                           r"hypothetically|let['’]s\s+say|in\s+theory)\b|\bI\s+wish\b|"
                           r"\bif\s+only\b", re.IGNORECASE)
_SARCASM = re.compile(r"^\W*(?:oh\s+)?(?:yeah|sure|right)\b[\s,]*(?:right|sure|and)\b|"
                      r"^\W*oh\s+(?:sure|great|yeah|wonderful|joy|perfect)\b|\byeah\s+right\b|"
                      r"\bas\s+if\b|(?:^|\s)/s\b", re.IGNORECASE)
_QUOTE = re.compile(r"[\"“”„«»]")
_REPORTED = re.compile(r"\b(?:said|says|say|told|tells|thinks|thought|claims?|claimed|reckons?|"
                       r"believes?|heard|wrote|goes)\b", re.IGNORECASE)


def not_literal(sentence: str) -> bool:
    """Whether ``sentence`` is a hypothetical, sarcasm or holds a quotation: its first-person
    statements are not facts about the user."""
    return bool(_HYPOTHETICAL.search(sentence) or _SARCASM.search(sentence)
                or _QUOTE.search(sentence))


def reported_before(text: str) -> bool:
    """Whether ``text`` (a clause up to a match) reports someone's words ("my boss said")."""
    return bool(_REPORTED.search(text))


def untimed(x: str) -> str:
    """``x`` without a trailing time phrase ("Porto last spring" -> "Porto")."""
    return _TRAILING_TIME.sub("", x).strip()


def clean(text: str) -> str:
    """The remembered part of a clause: no trailing punctuation, fillers or aside."""
    text = _ASIDE.sub("", text.strip()).rstrip(".!?,;: ")
    return _FILLER.sub("", text).strip().rstrip(".!?,;: ")


def name_run(x: str) -> str:
    """A name's words: the leading capitalised run ("Dana but friends..." -> "Dana")."""
    words = x.split()
    if words and words[0][0].isupper():
        return " ".join(takewhile(lambda w: w[0].isupper(), words))
    return " ".join(words[:3])


def person(text: str) -> str:
    """Turn first-person pronouns into third person ("my desk" -> "their desk")."""
    return re.sub(r"\b(?:I['’](?:m|ve)|my|me|myself|mine|I)\b",
                  lambda m: _PRONOUNS[m.group().lower()], text, flags=re.IGNORECASE)


def third_person(phrase: str) -> str:
    """Conjugate the first word of a verb phrase ("take the stairs" -> "takes the stairs")."""
    verb, _, rest = phrase.partition(" ")
    low = verb.lower()
    irregular = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is"}
    if low in irregular:
        verb = irregular[low]
    elif re.search(r"(?:s|sh|ch|x|z|o)$", low):
        verb += "es"
    elif re.search(r"[^aeiou]y$", low):
        verb = verb[:-1] + "ies"
    else:
        verb += "s"
    return f"{verb} {rest}".strip()


def text_of(message: BaseMessage) -> str:
    """The text parts of a message's content."""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p if isinstance(p, str) else str(p.get("text", ""))
                     for p in message.content if isinstance(p, str) or p.get("type") == "text")


def sentences(text: str) -> list[str]:
    """Split on sentence punctuation and newlines, sparing "p.m.", "Dr." etc."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        word = re.search(r"(\S+)$", text[start : m.start()])
        if m.group().startswith(".") and word and word.group(1).lower() in _ABBREVIATIONS:
            continue
        if piece := text[start : m.end()].strip():
            out.append(piece)
        start = m.end()
    tail = text[start:].strip()
    return [*out, tail] if tail else out


def clauses(sentence: str) -> list[str]:
    """Split at semicolons and where "and"/"but"/a comma starts a new first-person clause.

    A one-word left part ("Actually, I ...", "Hi, my name ...") is glued back on, so
    a cue like "actually" stays with the clause it qualifies.
    """
    out: list[str] = []
    for piece in (p for p in _CLAUSE.split(sentence) if p.strip()):
        if out and len(re.findall(r"\w+", out[-1])) <= 1:
            out[-1] = f"{out[-1]}, {piece}"
        else:
            out.append(piece)
    return out
