"""Resolve date phrases ("tomorrow", "next Friday", "December 3") against a reference time.

Used by the rule extractor to put a ``due_at`` on dated plans and by retrieval to
turn temporal questions into dates. Everything is computed from the ``now`` passed
in (the turn's time), never from the wall clock, so results are reproducible.

Supported forms (case-insensitive, first phrase in the text wins):

================================  ==============================================
Phrase                            Resolves to (the date part)
================================  ==============================================
``today`` / ``tonight``           today (``tonight`` defaults to 20:00, not 09:00)
``tomorrow``                      today + 1
``day after tomorrow``            today + 2
``yesterday``                     today - 1
``day before yesterday``          today - 2
``Friday`` / ``this Friday``      the next Friday strictly after today
``next Friday``                   the Friday of next calendar week (weeks start on
                                  Monday); on Wednesday 2026-11-18, ``Friday`` is
                                  11-20 and ``next Friday`` is 11-27, while
                                  ``Monday`` and ``next Monday`` are both 11-23
``last Friday``                   the most recent Friday strictly before today
``in N days`` / ``in N weeks``    today + N days / weeks (N: digits, ``a``/``an``,
                                  or ``one`` ... ``twelve``)
``N days ago`` / ``N weeks ago``  today - N days / weeks
``next week`` / ``last week``     today + 7 / today - 7
``this weekend`` / ``next         the coming Saturday (today on a weekend) / the
weekend``                         Saturday of next calendar week
``next month``                    the first day of next month
``2026-12-03``                    that date (an ISO time ``2026-12-03 17:00`` or
                                  ``2026-12-03T17:00`` is honoured)
``December 3`` / ``3 December``   the next such date on or after today (``Dec 3rd``,
                                  ``3rd of December`` and an explicit year work too)
================================  ==============================================

The time of day is 09:00 in ``now``'s timezone (UTC when ``now`` is naive) unless
the text gives one: ``at 3pm``, ``3:30 p.m.``, ``at 15:00``, ``at noon``,
``at midnight``. A bare hour without am/pm (``at 3``) is not read as a time because
it is as often an address or a count. A time with no date phrase
(``I have a call at 3pm``) resolves to its next occurrence: today if still ahead
of ``now``, otherwise tomorrow.

Not supported: ``the weekend`` (too often a habit), ``in N months``, parts of the day
(``tomorrow morning`` resolves to tomorrow 09:00), numeric dates other than ISO
(``12/3`` is ambiguous between locales).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

__all__ = ["DateMatch", "find_date", "resolve_date"]

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip

_DEFAULT_TIME = time(9, 0)
_TONIGHT_TIME = time(20, 0)

_WD = "|".join(_WEEKDAYS)
# Longest month names first so "sept" is not cut to "sep" and "march" not to "mar".
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_NUM = r"\d{1,3}|" + "|".join(_NUMBER_WORDS)
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<year>\d{4}))?"

# Each form is tried at every position; the leftmost match wins, then the longest,
# which is what makes "day after tomorrow" beat the "tomorrow" inside it.
_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("iso", r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})(?:[T ](?P<hh>\d{2}):(?P<mm>\d{2}))?\b"),
        ("month_day", rf"\b(?P<month>{_MON})\.?\s+{_DAY}\b{_YEAR}"),
        ("day_month", rf"\b{_DAY}\s+(?:of\s+)?(?P<month>{_MON})\b{_YEAR}"),
        ("after_tomorrow", r"\b(?:the\s+)?day\s+after\s+tomorrow\b"),
        ("before_yesterday", r"\b(?:the\s+)?day\s+before\s+yesterday\b"),
        ("in_n", rf"\bin\s+(?P<n>{_NUM})\s+(?P<unit>days?|weeks?)\b"),
        ("n_ago", rf"\b(?P<n>{_NUM})\s+(?P<unit>days?|weeks?)\s+ago\b"),
        ("rel_week", r"\b(?P<rel>next|last)\s+week\b"),
        ("rel_weekend", r"\b(?P<rel>this|next|coming)\s+weekend\b"),
        ("rel_month", r"\bnext\s+month\b"),
        ("rel_weekday", rf"\b(?P<rel>next|last|this|coming)\s+(?P<wd>{_WD})\b"),
        ("weekday", rf"\b(?P<wd>{_WD})\b"),
        ("word", r"\b(?P<word>today|tonight|tomorrow|tmrw|yesterday)\b"),
    )
)

_TIME = re.compile(
    r"\b(?:at\s+)?(?P<h>[01]?\d)(?::(?P<m>[0-5]\d))?\s*(?P<ap>[ap])\.?m\b\.?"
    r"|\bat\s+(?P<h24>[01]?\d|2[0-3]):(?P<m24>[0-5]\d)\b"
    r"|\bat\s+(?P<word>noon|midday|midnight)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class DateMatch:
    """A date phrase found in a text.

    Attributes:
        when: The resolved moment, timezone-aware.
        start: Offset of the date phrase in the text.
        end: Offset just past the date phrase.
        form: Which form matched (``"iso"``, ``"weekday"``, ``"time"``, ...).
        explicit_time: Whether the text gave a time of day.
    """

    when: datetime
    start: int
    end: int
    form: str
    explicit_time: bool

    @property
    def is_absolute(self) -> bool:
        """True for an ISO date, whose text already says the date unambiguously."""
        return self.form == "iso"


def resolve_date(text: str, now: datetime) -> datetime | None:
    """Resolve the first date phrase in ``text`` against ``now``.

    Args:
        text: Free text such as ``"I have an interview on Friday at 3pm"``.
        now: The reference time (the turn's time). Naive values are taken as UTC.

    Returns:
        The moment meant, in ``now``'s timezone, or ``None`` when the text has no
        date or time phrase (or names an impossible date such as ``February 30``).
    """
    match = find_date(text, now)
    return None if match is None else match.when


def find_date(text: str, now: datetime) -> DateMatch | None:
    """Like ``resolve_date``, but also report where the phrase is and how it matched.

    Args:
        text: Free text to search.
        now: The reference time. Naive values are taken as UTC.

    Returns:
        The match, or ``None`` when there is no resolvable date or time phrase.
    """
    tz: tzinfo = now.tzinfo if now.tzinfo is not None else UTC
    local_now = now.replace(tzinfo=tz)
    today = local_now.date()

    best: tuple[str, re.Match[str]] | None = None
    for name, pattern in _FORMS:
        for m in pattern.finditer(text):
            if best is None or (m.start(), -m.end()) < (best[1].start(), -best[1].end()):
                best = (name, m)
            break  # later matches of the same form start further right

    clock = _find_time(text)
    if best is None:
        if clock is None:
            return None
        moment, start, end = clock
        when = datetime.combine(today, moment, tzinfo=tz)
        if when <= local_now:
            when += timedelta(days=1)
        return DateMatch(when, start, end, "time", explicit_time=True)

    name, m = best
    day = _resolve_day(name, m, today)
    if day is None:
        return None
    if name == "iso" and m.group("hh") is not None:
        hh, mm = int(m.group("hh")), int(m.group("mm"))
        if hh > 23 or mm > 59:
            return None
        moment, explicit = time(hh, mm), True
    elif clock is not None:
        moment, explicit = clock[0], True
    elif name == "word" and m.group("word").lower() == "tonight":
        moment, explicit = _TONIGHT_TIME, False
    else:
        moment, explicit = _DEFAULT_TIME, False
    when = datetime.combine(day, moment, tzinfo=tz)
    return DateMatch(when, m.start(), m.end(), name, explicit_time=explicit)


def _find_time(text: str) -> tuple[time, int, int] | None:
    m = _TIME.search(text)
    if m is None:
        return None
    if m.group("word"):
        word = m.group("word").lower()
        return (time(0, 0) if word == "midnight" else time(12, 0)), m.start(), m.end()
    if m.group("h24") is not None:
        return time(int(m.group("h24")), int(m.group("m24"))), m.start(), m.end()
    hour = int(m.group("h"))
    if not 1 <= hour <= 12:
        return None
    hour %= 12
    if m.group("ap").lower() == "p":
        hour += 12
    return time(hour, int(m.group("m") or 0)), m.start(), m.end()


def _count(raw: str) -> int:
    raw = raw.lower()
    return _NUMBER_WORDS[raw] if raw in _NUMBER_WORDS else int(raw)


def _resolve_day(name: str, m: re.Match[str], today: date) -> date | None:
    if name == "iso":
        return _safe_date(int(m.group("y")), int(m.group("m")), int(m.group("d")))
    if name in ("month_day", "day_month"):
        month, day = _MONTHS[m.group("month").lower()], int(m.group("day"))
        if m.group("year"):
            return _safe_date(int(m.group("year")), month, day)
        # Next occurrence on or after today; try two years so Feb 29 still resolves.
        for year in (today.year, today.year + 1, today.year + 4 - today.year % 4):
            candidate = _safe_date(year, month, day)
            if candidate is not None and candidate >= today:
                return candidate
        return None
    if name == "after_tomorrow":
        return today + timedelta(days=2)
    if name == "before_yesterday":
        return today - timedelta(days=2)
    if name in ("in_n", "n_ago"):
        days = _count(m.group("n")) * (7 if m.group("unit").lower().startswith("week") else 1)
        return today + timedelta(days=days if name == "in_n" else -days)
    if name == "rel_week":
        return today + timedelta(days=7 if m.group("rel").lower() == "next" else -7)
    if name == "rel_weekend":
        if m.group("rel").lower() == "next":
            return today + timedelta(days=7 - today.weekday() + 5)
        return today + timedelta(days=max(0, 5 - today.weekday()))
    if name == "rel_month":
        return date(today.year + today.month // 12, today.month % 12 + 1, 1)
    if name in ("rel_weekday", "weekday"):
        target = _WEEKDAYS.index(m.group("wd").lower())
        rel = m.group("rel").lower() if name == "rel_weekday" else "this"
        if rel == "next":
            next_monday = today + timedelta(days=7 - today.weekday())
            return next_monday + timedelta(days=target)
        if rel == "last":
            return today - timedelta(days=(today.weekday() - target - 1) % 7 + 1)
        return today + timedelta(days=(target - today.weekday() - 1) % 7 + 1)
    word = m.group("word").lower()
    offsets = {"today": 0, "tonight": 0, "tomorrow": 1, "tmrw": 1, "yesterday": -1}
    return today + timedelta(days=offsets[word])


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None
