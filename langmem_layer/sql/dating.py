"""Phrases that date something, for the time strategy's SQL and the reranker alike.

One pattern in one place: ``DATING`` for Python's ``re`` (``dates_something``, which the
reranker calls) and ``DATING_SQL``, the same for PostgreSQL's ``~*``
(``langmem_layer.sql.candidates``). Both engines pay ~20-25 us a text for it, the larger part
of a long period's time strategy, so each first asks for ``CUES``: a digit or one of a
few words, which every text the pattern matches holds (six in seven texts hold none).
"""

from __future__ import annotations

import re

__all__ = ["CUES", "CUES_SQL", "DATED_PARAMS", "DATING", "DATING_SQL", "dated_sql",
           "dates_something"]

#: A text dating something: "yesterday", "last week", "two years ago", "May 3", "2023" (the
#: phrases ``langmem_layer.read.query.time_window`` reads; a Python pattern, case aside),
#: or how long something has lasted ("for three years"), which dates its start: "Which
#: year did she start yoga?" is answered by "I've been doing it for about 3 years".
#: People date an event against the day they speak ("Yesterday I met artists in
#: Boston", said on the 4th, is about the 3rd), so a memory dating something may be
#: about a day in a question's period though it was said after it: the time strategy
#: ranks such memories beside the most similar, and the reranker reads it too.
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|"
           "december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec")
_AMOUNT = r"(?:\d{1,2}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple\s+of)"
DATING = (
    r"\b(?:yesterday|today|tonight|tomorrow|(?:last|this|next|past|previous)\s+"
    r"(?:week(?:end)?|month|year|night|spring|summer|autumn|fall|winter|monday|tuesday|"
    rf"wednesday|thursday|friday|saturday|sunday)|{_AMOUNT}\s+(?:days?|weeks?|months?|years?)"
    rf"\s+ago|for\s+(?:about\s+|almost\s+|nearly\s+|over\s+)?{_AMOUNT}\s+"
    r"(?:days?|weeks?|months?|years?)|"
    rf"(?:{_MONTHS})\.?\s+\d{{1,2}}(?!\d)|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})"
    r"\b|(?:19|20)\d{2})\b")
#: ``DATING`` for PostgreSQL's regular expressions, whose word boundary is ``\y``.
DATING_SQL = DATING.replace(r"\b", r"\y")

#: What every text ``DATING`` matches holds besides a digit, case aside: each of its
#: alternatives names a day ("yesterday", "today", "monday", "days ago"), a night, a
#: season, a week, month or year, "tomorrow", "ago", or a digit (a date, a year). A
#: cheap test that rules most texts out before the pattern runs; a new alternative in
#: ``DATING`` needs its word here (``tests/read/test_dating.py`` checks the two agree).
CUES = ("day", "night", "tomorrow", "week", "month", "year", "spring", "summer", "autumn",
        "fall", "winter", "ago")
#: ``CUES`` as ``LIKE`` patterns of a lower-cased text, for ``LIKE ANY``.
CUES_SQL = tuple(f"%{w}%" for w in CUES)
#: The named parameters ``dated_sql`` reads.
DATED_PARAMS = {"dating_cues": list(CUES_SQL), "dating": DATING_SQL}
_DATING = re.compile(DATING, re.I)
_DIGIT = re.compile(r"\d")


def dates_something(text: str) -> bool:
    """Whether ``text`` dates something ("yesterday", "last week", "May 3", "2023")."""
    if _DIGIT.search(text) is None:
        folded = text.casefold()  # re.I's matches, as "ſ" for "s", fold too
        if not any(w in folded for w in CUES):
            return False
    return _DATING.search(text) is not None


def dated_sql(text: str) -> str:
    """``dates_something`` as a PostgreSQL condition on the SQL expression ``text`` (its
    values in ``DATED_PARAMS``): the cues first, then the pattern."""
    return (f"(({text}) ~ '\\d' OR lower({text}) LIKE ANY(%(dating_cues)s::text[])) "
            f"AND ({text}) ~* %(dating)s")
