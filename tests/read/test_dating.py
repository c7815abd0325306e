"""The phrases that date something (``langmem_layer.sql.dating``): the cheap test of its
cues rules out only texts the full pattern does not match, in Python and in PostgreSQL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import psycopg

from langmem_layer.sql.dating import DATED_PARAMS, DATING, dated_sql, dates_something

SLICE = Path(__file__).resolve().parents[1] / "data" / "locomo-slice.json"

#: One text or more for each alternative of the pattern, in odd cases, and near misses.
DATED = [
    "Yesterday I met some artists in Boston", "TODAY was long", "see you tonight",
    "Tomorrow then!", "last weekend we hiked", "this Spring I planted roses",
    "next Monday works", "over the past Winter", "previous night was loud",
    "a few weeks ago", "couple of days ago", "two YEARS ago", "3 months ago",
    "on May 3 we met", "Sept. 12", "the 3rd of June", "21st October", "in 2023",
    "back in 1998", "last ſummer",  # re.I folds "ſ" to "s"
    # how long something has lasted dates its start
    "I've had them for 3 years!", "we've been together for three years",
    "Been playing it for a month now", "doing them for about 3 years now",
]
UNDATED = [
    "I met some artists in Boston", "Ago is not a word alone", "the fall of Rome",
    "a daydream", "Mayday", "may I ask", "the monthly report", "a weekly yearly thing",
    "no numbers here", "", "waited for hours", "for a while now",
]


def _texts() -> list[str]:
    sample = json.loads(SLICE.read_text())[0]["conversation"]
    turns = [t["text"] for key, session in sample.items()
             if key.startswith("session_") and isinstance(session, list) for t in session]
    return [*turns, *DATED, *UNDATED]


def test_the_cues_rule_out_only_texts_the_pattern_does_not_match() -> None:
    full = re.compile(DATING, re.I)
    texts = _texts()
    assert [dates_something(t) for t in texts] == [bool(full.search(t)) for t in texts]
    assert all(dates_something(t) for t in DATED)
    assert not any(dates_something(t) for t in UNDATED)


def test_postgresql_reads_the_cues_and_the_pattern_as_python_does(pg_uri: str) -> None:
    # The condition recall's time strategy computes (langmem_layer.sql.candidates, ``tw``).
    texts = [t for t in _texts() if "ſ" not in t]  # PostgreSQL's ~* does not fold "ſ"
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(
            f"SELECT {dated_sql('t')}"
            " FROM unnest(%(texts)s::text[]) WITH ORDINALITY u(t, n) ORDER BY n",
            {**DATED_PARAMS, "texts": texts}).fetchall()
    assert [r[0] for r in rows] == [dates_something(t) for t in texts]
