"""Query understanding for recall: the references and the time window of a question.

``understand`` reads a question (the user's last message) and returns what the
retrieval can use besides its words and its embedding:

* ``refs``: the entities it names, normalised exactly like the ``refs`` the write path
  stores (``langmem_layer.refs.extract_refs``), for the exact-reference strategy;
* ``window``: the period it is about, when it names one, for the time strategy.
  Memories only exist in the past, so a date without a year means its most recent
  occurrence on or before ``now``.

Time phrases understood (case-insensitive; the most specific phrase in the question
wins — an absolute date beats a month, which beats a year, which beats a relative
phrase):

=========================================  ============================================
Phrase                                     Period
=========================================  ============================================
``October 13, 2023`` / ``13 October 2023``  that day (``8th December, 2023``, ``Dec 1,2023``,
/ ``2023-10-13``                           ``Aug 15th`` — no year: the latest past one)
``May 2023`` / ``in May`` / ``last May``   that month (no year: the latest month of that
                                           name that has begun by ``now``)
``summer 2021`` / ``in the spring``        that season (northern hemisphere months)
``in 2022``                                that year
``yesterday`` / ``today`` / ``N days       that day, as ``
ago``` / ``last Friday`` / ``N weeks ago``  dates.find_date` resolves it
``last week`` / ``this week``              the seven days around that day
``last month`` / ``this month`` / ``N      that calendar month
months ago``
``last year`` / ``this year`` / ``N        that calendar year
years ago``
=========================================  ============================================

Every period is widened by ``slack_days`` on both sides (people talk about an event
days after it happened, and plan it days before): the window is a preference given
to memories that occurred in it, never a filter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from langmem_layer.extract.dates import find_date
from langmem_layer.refs import extract_refs
from langmem_layer.sanitize import clean

__all__ = ["MAX_QUERY_CHARS", "QueryInfo", "TimeWindow", "asks_upcoming", "bounded", "is_broad",
           "time_window", "understand", "without_refs"]

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11),
            "winter": (12, 2)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
_NUM = r"\d{1,2}|" + "|".join(_NUMBERS)

_ISO = re.compile(r"\b(?P<year>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b")
_MONTH_DAY = re.compile(rf"\b(?P<month>{_MON})\.?\s+{_DAY}(?!\d)(?:\s*,?\s*{_YEAR})?\b(?!:)", re.I)
_DAY_MONTH = re.compile(rf"\b{_DAY}\s+(?:of\s+)?(?P<month>{_MON})\b\.?(?:\s*,?\s*{_YEAR})?", re.I)
_MONTH_YEAR = re.compile(rf"\b(?P<month>{_MON})\.?\s*,?\s+{_YEAR}\b", re.I)
# A bare season needs a cue or a year, or "fall" the verb would be autumn.
_SEASON = re.compile(r"(?:\b(?P<cue>in|during|last|this|over|since|past)\s+(?:the\s+)?)?"
                     r"\b(?P<season>spring|summer|autumn|fall|winter)\b"
                     rf"(?:\s+(?:of\s+)?{_YEAR}\b)?", re.I)
# A bare month needs a cue, or "may" the verb would be a month.
_MONTH = re.compile(rf"\b(?:in|during|last|this|early|mid|late|since|of|before|after)\s+"
                    rf"(?:the\s+(?:beginning|start|end|middle)\s+of\s+)?(?P<month>{_MON})\b",
                    re.I)
_YEAR_ONLY = re.compile(rf"(?<![\d/:-])\b{_YEAR}\b(?![\d/:-])")
_REL_PERIOD = re.compile(rf"\b(?:(?P<rel>last|this|past|previous)\s+(?P<unit>month|year)"
                         rf"|(?P<n>{_NUM})\s+(?P<unit2>months?|years?)\s+ago)\b", re.I)
_REL_WEEK = re.compile(r"\b(?P<rel>last|this|past|previous)\s+week(?:end)?\b", re.I)
#: find_date forms that name a past or present day unambiguously.
_DAY_FORMS = frozenset({"word", "before_yesterday", "n_ago", "rel_weekday", "iso"})


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A period a question is about, already widened by the slack.

    Attributes:
        start: First moment of the window (inclusive).
        end: Last moment of the window (exclusive).
        phrase: The words of the question that named it.
        granularity: ``"day"``, ``"week"``, ``"month"``, ``"season"`` or ``"year"``.
    """

    start: datetime
    end: datetime
    phrase: str
    granularity: str

    def __contains__(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


# "What do you know about me?": a question about the user as a whole, which no one
# memory resembles; recall answers it with the user's core facts.
_BROAD = re.compile(
    r"\b(?:what|how\s+much|anything)\s+(?:else\s+)?(?:do|did|can|have)\s+you\s+(?:know|"
    r"remember|recall|learned|learnt|stored|got)\s+(?:so\s+far\s+)?(?:about|of|on)\s+"
    r"(?:me|myself)\b|\btell\s+me\s+(?:\w+\s+){0,3}about\s+(?:me|myself)\b|"
    r"\bwho\s+am\s+I\b|\bwhat\s+have\s+I\s+told\s+you(?:\s+about\s+(?:me|myself))?\s*\??$|"
    r"\bdo\s+you\s+(?:know|remember)\s+(?:me|who\s+I\s+am|anything\s+about\s+me)\b|"
    r"\bsummari[sz]e\s+what\s+you\s+know\b", re.IGNORECASE)


# "Any trips coming up?": a question about what lies ahead, answered by the open loops
# due in the coming weeks, not only those due today.
_UPCOMING = re.compile(
    r"\b(?:coming\s+up|upcoming|ahead\s+of\s+me|on\s+my\s+(?:schedule|calendar|agenda|"
    r"plate)|(?:any|my)\s+(?:plans|trips?|appointments?|deadlines?)\b|what{_A}?s\s+next|"
    r"planned|scheduled)".replace("{_A}", "['’]"), re.IGNORECASE)


def asks_upcoming(text: str | None) -> bool:
    """Whether ``text`` asks what is coming up ("any trips coming up?", "my plans")."""
    return bool(text and _UPCOMING.search(text))


def is_broad(text: str | None) -> bool:
    """Whether ``text`` asks about the user as a whole ("what do you know about me?")."""
    return bool(text and _BROAD.search(text))


@dataclass(frozen=True, slots=True)
class QueryInfo:
    """What recall can use from a question besides its text and embedding."""

    text: str
    refs: tuple[str, ...]
    window: TimeWindow | None


#: The characters of a message recall searches with: its beginning and its end (where
#: a question usually is). Embedding models read ~256-512 tokens anyway; beyond this a
#: message only costs time (reference and date scans, full-text terms).
MAX_QUERY_CHARS = 2_000


def bounded(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """``text``, or for a longer one its first and last ``limit // 2`` characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} … {text[-half:]}"


def understand(text: str | None, now: datetime, *, slack_days: float = 7.0,
               refs: bool = True, window: bool = True) -> QueryInfo:
    """References and time window of a question.

    Args:
        text: The question (may be ``None`` or empty).
        now: When it is asked; relative phrases and year-less dates resolve against it.
        slack_days: Days added on both sides of the period named.
        refs: Extract references.
        window: Look for a time window.
    """
    # PostgreSQL cannot store U+0000 (langmem_layer.sanitize); a turn of any length is
    # searched with a bounded text, so it is answered in the same time as a question.
    text = bounded(clean(text or ""))
    return QueryInfo(
        text=text,
        refs=tuple(extract_refs(text)) if refs and text else (),
        window=time_window(text, now, slack_days=slack_days) if window and text else None,
    )


def without_refs(text: str, refs: Sequence[str]) -> str:
    """``text`` without the references ``refs`` it names (and their possessive ``'s``).

    What recall embeds when ``embed_query_refs`` is off: the reference and keyword
    strategies match the names exactly, and in an embedding a name pulls toward every
    text that mentions it ("Hey Nate!") rather than toward what the question asks about
    it. ``text`` itself when nothing would be left but punctuation.
    """
    out = text
    for ref in sorted(refs, key=len, reverse=True):
        words = r"\s+".join(re.escape(w) for w in ref.split())
        out = re.sub(rf"(?<!\w){words}(?:['’]s)?(?!\w)", " ", out, flags=re.I)
    out = re.sub(r"\s+", " ", out).strip()
    return out if re.search(r"\w", out) else text


def _utc(d: date) -> datetime:
    return datetime.combine(d, time(0, 0), tzinfo=UTC)


def _month_range(year: int, month: int) -> tuple[date, date]:
    first = date(year, month, 1)
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    return first, nxt


def _latest_month(month: int, today: date) -> int:
    """The year of the latest month named ``month`` that has begun by ``today``."""
    return today.year if month <= today.month else today.year - 1


def _safe(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _latest_day(month: int, day: int, today: date) -> date | None:
    for year in (today.year, today.year - 1, today.year - 2, today.year - 4):
        d = _safe(year, month, day)
        if d is not None and d <= today:
            return d
    return None


def _count(raw: str) -> int:
    raw = raw.lower()
    return _NUMBERS[raw] if raw in _NUMBERS else int(raw)


def _absolute_day(text: str, today: date) -> tuple[date, str] | None:
    m = _ISO.search(text)
    if m:
        d = _safe(int(m["year"]), int(m["m"]), int(m["d"]))
        if d is not None:
            return d, m.group()
    best: tuple[date, str, int] | None = None
    for pattern in (_MONTH_DAY, _DAY_MONTH):
        for m in pattern.finditer(text):
            month, day = _MONTHS[m["month"].lower()], int(m["day"])
            if not 1 <= day <= 31:
                continue
            d = _safe(int(m["year"]), month, day) if m["year"] else _latest_day(month, day, today)
            if d is not None and (best is None or m.start() < best[2]):
                best = (d, m.group(), m.start())
            break
    return (best[0], best[1]) if best else None


def time_window(text: str, now: datetime, *, slack_days: float = 7.0) -> TimeWindow | None:
    """The period ``text`` names, widened by ``slack_days`` on both sides; ``None`` if none.

    Args:
        text: A question such as ``"What did we decide in May 2023?"``.
        now: When it is asked (naive values are taken as UTC).
        slack_days: Widening on both sides of the named period.
    """
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    today = now.astimezone(UTC).date()
    slack = timedelta(days=slack_days)

    def window(lo: date, hi: date, phrase: str, granularity: str) -> TimeWindow:
        return TimeWindow(_utc(lo) - slack, _utc(hi) + slack, phrase.strip(), granularity)

    found = _absolute_day(text, today)
    if found is not None:
        day, phrase = found
        return window(day, day + timedelta(days=1), phrase, "day")
    m = _MONTH_YEAR.search(text)
    if m:
        lo, hi = _month_range(int(m["year"]), _MONTHS[m["month"].lower()])
        return window(lo, hi, m.group(), "month")
    m = next((m for m in _SEASON.finditer(text) if m["cue"] or m["year"]), None)
    if m:
        first, last = _SEASONS[m["season"].lower()]
        if m["year"]:
            year = int(m["year"])
        else:  # the latest such season that has begun
            year = today.year if date(today.year, first, 1) <= today else today.year - 1
        lo = date(year, first, 1)
        end_year = year + 1 if last < first else year
        hi = _month_range(end_year, last)[1]
        return window(lo, hi, m.group(), "season")
    m = _MONTH.search(text)
    if m:
        month = _MONTHS[m["month"].lower()]
        lo, hi = _month_range(_latest_month(month, today), month)
        return window(lo, hi, m.group(), "month")
    m = _YEAR_ONLY.search(text)
    if m:
        year = int(m["year"])
        return window(date(year, 1, 1), date(year + 1, 1, 1), m.group(), "year")
    m = _REL_PERIOD.search(text)
    if m:
        unit = (m["unit"] or m["unit2"] or "").lower().rstrip("s")
        back = (0 if m["rel"].lower() == "this" else 1) if m["rel"] else _count(m["n"])
        if unit == "month":
            month_index = today.year * 12 + today.month - 1 - back
            lo, hi = _month_range(month_index // 12, month_index % 12 + 1)
        else:
            lo, hi = date(today.year - back, 1, 1), date(today.year - back + 1, 1, 1)
        return window(lo, hi, m.group(), unit)
    m = _REL_WEEK.search(text)
    if m:
        center = today - timedelta(days=0 if m["rel"].lower() == "this" else 7)
        return window(center - timedelta(days=3), center + timedelta(days=4), m.group(), "week")
    match = find_date(text, now)
    if match is not None and match.form in _DAY_FORMS:
        rel = text[match.start : match.end].lower()
        if match.form == "rel_weekday" and not rel.startswith("last"):
            return None
        day = match.when.astimezone(UTC).date()
        if day > today:
            return None
        return window(day, day + timedelta(days=1), text[match.start : match.end], "day")
    return None
