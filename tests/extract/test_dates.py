"""resolve_date / find_date: every supported form against a fixed Wednesday afternoon."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from langmem_layer.extract.dates import find_date, resolve_date

# Wednesday 2026-11-18 15:00 UTC.
NOW = datetime(2026, 11, 18, 15, 0, tzinfo=UTC)


def at(year: int, month: int, day: int, hour: int = 9, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("today", at(2026, 11, 18)),
        ("I'm busy Today.", at(2026, 11, 18)),
        ("tonight", at(2026, 11, 18, 20)),
        ("tomorrow", at(2026, 11, 19)),
        ("TOMORROW!", at(2026, 11, 19)),
        ("see you tmrw", at(2026, 11, 19)),
        ("the day after tomorrow", at(2026, 11, 20)),
        ("day after tomorrow", at(2026, 11, 20)),
        ("yesterday", at(2026, 11, 17)),
        ("the day before yesterday", at(2026, 11, 16)),
        # Plain weekday: next occurrence strictly after today.
        ("on Friday", at(2026, 11, 20)),
        ("this friday", at(2026, 11, 20)),
        ("Monday", at(2026, 11, 23)),
        ("wednesday", at(2026, 11, 25)),
        ("this coming Thursday", at(2026, 11, 19)),
        # "next <weekday>": that day of next calendar week (weeks start on Monday).
        ("next Friday", at(2026, 11, 27)),
        ("next monday", at(2026, 11, 23)),
        ("next Wednesday", at(2026, 11, 25)),
        ("next Sunday", at(2026, 11, 29)),
        ("last Friday", at(2026, 11, 13)),
        ("last Tuesday", at(2026, 11, 17)),
        ("last Wednesday", at(2026, 11, 11)),
        ("in 3 days", at(2026, 11, 21)),
        ("in a day", at(2026, 11, 19)),
        ("in two weeks", at(2026, 12, 2)),
        ("in 1 week", at(2026, 11, 25)),
        ("2 days ago", at(2026, 11, 16)),
        ("three weeks ago", at(2026, 10, 28)),
        ("next week", at(2026, 11, 25)),
        ("last week", at(2026, 11, 11)),
        ("2026-12-03", at(2026, 12, 3)),
        ("the deadline is on 2026-12-03.", at(2026, 12, 3)),
        ("2026-12-03 17:30", at(2026, 12, 3, 17, 30)),
        ("2026-12-03T08:05", at(2026, 12, 3, 8, 5)),
        ("December 3", at(2026, 12, 3)),
        ("dec 3rd", at(2026, 12, 3)),
        ("Sept. 9", at(2027, 9, 9)),
        ("3 December", at(2026, 12, 3)),
        ("the 3rd of December", at(2026, 12, 3)),
        ("December 3, 2027", at(2027, 12, 3)),
        # Month-day already past this year: next year's.
        ("March 1", at(2027, 3, 1)),
        ("1 March", at(2027, 3, 1)),
        # Today's own month-day is today, not next year.
        ("November 18", at(2026, 11, 18)),
        ("February 29", at(2028, 2, 29)),
    ],
)
def test_date_forms(text: str, expected: datetime) -> None:
    assert resolve_date(text, NOW) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tomorrow at 3pm", at(2026, 11, 19, 15)),
        ("tomorrow at 3:30 p.m.", at(2026, 11, 19, 15, 30)),
        ("Friday 10am", at(2026, 11, 20, 10)),
        ("at 12am on Friday", at(2026, 11, 20, 0)),
        ("at 12pm on Friday", at(2026, 11, 20, 12)),
        ("on Friday at 17:45", at(2026, 11, 20, 17, 45)),
        ("tomorrow at noon", at(2026, 11, 19, 12)),
        ("tonight at 11pm", at(2026, 11, 18, 23)),
        ("on 2026-12-03 at 4 PM", at(2026, 12, 3, 16)),
    ],
)
def test_explicit_time_of_day(text: str, expected: datetime) -> None:
    match = find_date(text, NOW)
    assert match is not None and match.explicit_time
    assert match.when == expected


def test_time_without_date_is_its_next_occurrence() -> None:
    assert resolve_date("a call at 5pm", NOW) == at(2026, 11, 18, 17)
    # 3pm is not ahead of 15:00, so it is tomorrow's.
    assert resolve_date("a call at 3pm", NOW) == at(2026, 11, 19, 15)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hi, how are you?",
        "I may go",  # "may" without a day is not a month
        "meet me at 3",  # a bare hour is not a time
        "I work at Acme",
        "February 30",
        "2026-13-40",
        "the weekend",
        "mondays are hard",  # plural weekday: a habit, not a date
    ],
)
def test_no_date(text: str) -> None:
    assert resolve_date(text, NOW) is None


def test_resolution_uses_now_not_the_wall_clock() -> None:
    long_ago = datetime(2001, 1, 3, 12, tzinfo=UTC)  # a Wednesday
    assert resolve_date("tomorrow", long_ago) == datetime(2001, 1, 4, 9, tzinfo=UTC)
    assert resolve_date("next Friday", long_ago) == datetime(2001, 1, 12, 9, tzinfo=UTC)
    assert resolve_date("in 2 weeks", long_ago) == datetime(2001, 1, 17, 9, tzinfo=UTC)


def test_timezone_of_now_is_kept() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    # 00:30 on Thursday in Berlin is still Wednesday in UTC: "tomorrow" is Friday there.
    now = datetime(2026, 11, 19, 0, 30, tzinfo=berlin)
    due = resolve_date("tomorrow at 3pm", now)
    assert due == datetime(2026, 11, 20, 15, tzinfo=berlin)
    assert due is not None and due.utcoffset() == timedelta(hours=1)
    fixed = timezone(timedelta(hours=-5))
    assert resolve_date("today", datetime(2026, 11, 18, 23, tzinfo=fixed)) == datetime(
        2026, 11, 18, 9, tzinfo=fixed
    )


def test_naive_now_is_taken_as_utc() -> None:
    assert resolve_date("tomorrow", datetime(2026, 11, 18, 15)) == at(2026, 11, 19)


def test_find_date_reports_span_and_form() -> None:
    text = "I have an interview the day after tomorrow, I think"
    match = find_date(text, NOW)
    assert match is not None
    assert text[match.start : match.end] == "the day after tomorrow"
    assert match.form == "after_tomorrow" and not match.explicit_time and not match.is_absolute
    iso = find_date("due 2026-12-03", NOW)
    assert iso is not None and iso.is_absolute


def test_first_phrase_wins() -> None:
    assert resolve_date("Friday, or maybe tomorrow", NOW) == at(2026, 11, 20)
