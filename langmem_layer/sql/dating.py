"""Phrases that date something, for the time strategy's SQL and the reranker alike.

One pattern in one place: ``DATING`` for Python's ``re`` (``langmem_layer.read.rerank``)
and ``DATING_SQL``, the same for PostgreSQL's ``~*`` (``langmem_layer.sql.recall``).
"""

from __future__ import annotations

__all__ = ["DATING", "DATING_SQL"]

#: A text dating something: "yesterday", "last week", "two years ago", "May 3", "2023" (the
#: phrases ``langmem_layer.read.query.time_window`` reads; a Python pattern, case aside).
#: People date an event against the day they speak ("Yesterday I met artists in
#: Boston", said on the 4th, is about the 3rd), so a memory dating something may be
#: about a day in a question's period though it was said after it: the time strategy
#: ranks such memories beside the most similar, and the reranker reads it too.
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|"
           "december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec")
DATING = (
    r"\b(?:yesterday|today|tonight|tomorrow|(?:last|this|next|past|previous)\s+"
    r"(?:week(?:end)?|month|year|night|spring|summer|autumn|fall|winter|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|(?:\d{1,2}|a|an|one|two|three|four|five|"
    r"six|seven|eight|nine|ten|few|couple\s+of)\s+(?:days?|weeks?|months?|years?)\s+ago|"
    rf"(?:{_MONTHS})\.?\s+\d{{1,2}}(?!\d)|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})"
    r"\b|(?:19|20)\d{2})\b")
#: ``DATING`` for PostgreSQL's regular expressions, whose word boundary is ``\y``.
DATING_SQL = DATING.replace(r"\b", r"\y")
