"""Periods and due times of scheduled jobs, in the configured timezone.

A job's schedule (``"daily"``, ``"weekly"``, ``"monthly"``) cuts time into periods,
labelled ``2026-11-23``, ``2026-W48`` (ISO week) and ``2026-11``. A period's run is
due from its first day at the configured time of day (``jobs_time_of_day``, local to
``jobs_timezone``): a daily job at 03:00 runs for 2026-11-23 from 03:00 that day.

``due_period`` is the latest period whose run is due at a time: a worker that
was down for days runs that one period once when it comes back, not every period it
missed (a lifecycle pass over a user is the same work whichever day it runs for).
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, tzinfo

from langmem_layer.errors import ConfigurationError
from langmem_layer.settings import zone

__all__ = ["ON_DEMAND", "SCHEDULES", "due_period", "next_due", "parse_time_of_day", "period_of",
           "zone"]

#: The schedules a job can declare; None is "on demand".
SCHEDULES = ("daily", "weekly", "monthly")

#: The one period of an on-demand job: a finished run of it is started over by the
#: next, an unfinished one is resumed.
ON_DEMAND = "on-demand"


def parse_time_of_day(text: str) -> time:
    """``"03:00"`` as a ``time``.

    Raises:
        ConfigurationError: Not ``HH:MM``.
    """
    try:
        hours, minutes = (int(part) for part in text.split(":"))
        return time(hours, minutes)
    except ValueError:
        raise ConfigurationError(
            f"A time of day is HH:MM on a 24-hour clock, e.g. '03:00'; got {text!r}.") from None


def _check(schedule: str) -> None:
    if schedule not in SCHEDULES:
        raise ConfigurationError(
            f"Unknown schedule {schedule!r}; use one of {', '.join(SCHEDULES)} (or None).")


def _start(schedule: str, day: date) -> date:
    """The first day of the period holding ``day``."""
    if schedule == "weekly":
        return day - timedelta(days=day.weekday())
    if schedule == "monthly":
        return day.replace(day=1)
    return day


def _label(schedule: str, day: date) -> str:
    if schedule == "weekly":
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    if schedule == "monthly":
        return f"{day.year}-{day.month:02d}"
    return day.isoformat()


def _following(schedule: str, start: date) -> date:
    """The first day of the period after the one starting on ``start``."""
    if schedule == "weekly":
        return start + timedelta(days=7)
    if schedule == "monthly":
        return (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    return start + timedelta(days=1)


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None:
        raise ConfigurationError(
            f"A job's time needs a timezone, e.g. datetime.now(UTC); got {now.isoformat()}.")
    return now


def period_of(schedule: str | None, now: datetime, tz: tzinfo) -> str:
    """The period holding ``now`` (local to ``tz``); an on-demand job's is ``on-demand``.

    Raises:
        ConfigurationError: An unknown schedule, or ``now`` without a timezone.
    """
    now = _aware(now)
    if schedule is None:
        return ON_DEMAND
    _check(schedule)
    return _label(schedule, now.astimezone(tz).date())


def _local_start(schedule: str, now: datetime, tz: tzinfo, at: time) -> date:
    # Shifting by the time of day makes 02:00 on the 23rd still belong to the 22nd's run.
    local = _aware(now).astimezone(tz)
    shifted = local - timedelta(hours=at.hour, minutes=at.minute)
    return _start(schedule, shifted.date())


def due_period(schedule: str, now: datetime, tz: tzinfo, at: time) -> str:
    """The latest period whose run is due at ``now``.

    Raises:
        ConfigurationError: An unknown schedule, or ``now`` without a timezone.
    """
    _check(schedule)
    return _label(schedule, _local_start(schedule, now, tz, at))


def next_due(schedule: str, now: datetime, tz: tzinfo, at: time) -> datetime:
    """When the period after ``due_period`` becomes due (aware, in ``tz``)."""
    _check(schedule)
    day = _following(schedule, _local_start(schedule, now, tz, at))
    return datetime.combine(day, at, tzinfo=tz)
