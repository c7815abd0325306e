"""The README's and the docs' figures come from the recorded results.

A measured figure (a latency, a rate, a ratio against a baseline or a quiet run, a
percentile, a retrieval score, a share of the history) is on a page only as part of a
benchmark's recorded section, ``docs/results/<name>.md``, which `make bench` writes and
the page includes (``--8<-- "results/NAME.md"``). Typed by hand it is from a one-off run
nobody can check, so this test fails on it: it scans README.md and docs/*.md (not
docs/benchmarks.md, which the runner assembles, nor docs/results/) outside fragment
includes and code blocks of a programming or shell language. A block without a language
or marked ``text`` is pasted output and is scanned.

Settings and limits are not measurements: a number after "default", "target", "limit",
"at most"/"at least" or inside a setting's parentheses has no unit this test looks for
or is skipped by :func:`_is_setting`; what is left and not a measurement is in
:data:`ALLOWED`, each with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_NUM = r"\d[\d,]*(?:\.\d+)?"
#: What a measured figure looks like.
PATTERNS: dict[str, re.Pattern[str]] = {
    "latency": re.compile(rf"(?<![\w.]){_NUM}\s?(?:ms|µs|us)\b"),
    "rate": re.compile(rf"(?<![\w.]){_NUM}\s?(?:[A-Za-z]+)?/s\b"),
    "ratio": re.compile(r"(?<![\w.])\d+(?:\.\d+)?[x×](?![\w×])"),
    "percentile": re.compile(rf"\bp(?:50|90|95|99)\b[^\d\n|]{{0,15}}(?<!\w){_NUM}"),
    "retrieval score": re.compile(
        r"\b(?:recall|precision|R|hit)@\d+\b[^\d\n|]{0,15}\d?\.\d+|"
        r"\b(?:precision|recall|evidence in block)\b[^\d\n|]{0,6}[01]\.\d{2,}"),
    "score": re.compile(r"(?<![\w.])[01]\.\d{3,}\b"),
    "share": re.compile(rf"(?<![\w.]){_NUM}\s?% (?:of (?:the |a |its )?(?:history|conversation|"
                        rf"tokens|job|all)|HOT)"),
    "duration": re.compile(rf"\b(?:in|took|takes) (?:about |~)?{_NUM}\s?(?:s|min|minutes)\b"),
    "quiet ratio": re.compile(rf"{_NUM}\s?[x×]? (?:its )?quiet"),
}

#: Words before a number that make it a setting, a target or a limit, not a measurement.
_SETTING = re.compile(r"(?:default|targets?|limit|at most|at least|no more than|up to|"
                      r"budget|setting|≤|<=|>=|≥|--[a-z-]+=?)"
                      r"\s*(?:p\d\d\s*)?(?:of|is|=|:)?\s*$", re.IGNORECASE)
_BOUND = re.compile(r"≤|<=|>=|≥|target")

#: (page, the text as it stands, why it is not a measurement). Each entry must still
#: match, so a stale one fails too.
ALLOWED: list[tuple[str, str, str]] = [
    ("docs/langgraph-server.md", "routers lazily (0.165)",
     "a FastAPI version number, not a score"),
]

#: Code blocks in these languages are code or commands, not pasted output.
CODE_LANGUAGES = {"python", "py", "bash", "sh", "shell", "console", "yaml", "yml", "toml",
                  "json", "sql", "ini", "dockerfile", "mermaid", "js", "javascript",
                  "html", "css", "diff", "make", "text-commands"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def _is_setting(line: str, start: int, end: int) -> bool:
    return (bool(_SETTING.search(line[max(0, start - 30):start].rstrip("( ")))
            or line[end:end + 8].lstrip(" (").startswith("target"))


def scan(text: str) -> list[tuple[int, str, str]]:
    """(line number, kind, the figure) of each measured figure typed into ``text``."""
    found: list[tuple[int, str, str]] = []
    fence: str | None = None
    skip_block = False
    in_comment = False
    for number, raw in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(raw)
        if fence is None and opened:
            fence, skip_block = opened.group(2), opened.group(3).lower() in CODE_LANGUAGES
            continue
        if fence is not None:
            if raw.strip().startswith(fence) and raw.strip().strip(fence[0]) == "":
                fence = None
                continue
            if skip_block:
                continue
        line = raw
        if in_comment or "<!--" in line:
            in_comment = "-->" not in line.split("<!--")[-1]
            continue
        if line.lstrip().startswith("--8<--"):
            continue  # a recorded section, included
        if fence is None:
            line = _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)
        for kind, pattern in PATTERNS.items():
            for match in pattern.finditer(line):
                setting = _is_setting(line, match.start(), match.end())
                if not (setting or _BOUND.search(match.group(0))):
                    found.append((number, kind, match.group(0)))
    return found


def pages() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "benchmarks.md")
    return [ROOT / "README.md", *docs]


def offenders(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    rel = path.relative_to(ROOT).as_posix()
    allowed = [a for page, a, _ in ALLOWED if page == rel]
    out = []
    for number, kind, figure in scan(text):
        if any(figure in a and a in lines[number - 1] for a in allowed):
            continue
        out.append(f"{rel}:{number}: {kind} {figure!r}")
    return out


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.name)
def test_no_page_quotes_a_figure_typed_by_hand(path: Path) -> None:
    found = offenders(path)
    assert not found, ("figures typed by hand; include the benchmark's recorded section "
                       "(--8<-- \"results/NAME.md\") or say it without the number:\n"
                       + "\n".join(found))


def test_every_allowed_entry_still_matches_and_gives_a_reason() -> None:
    for page, text, reason in ALLOWED:
        assert len(reason) > 20, (page, text)
        content = (ROOT / page).read_text(encoding="utf-8")
        assert text in content, f"{page}: allowed text no longer there: {text!r}"
        assert scan(text), f"{page}: allowed text has no figure the scan flags: {text!r}"


@pytest.mark.parametrize("sample", [
    "At 50 concurrent users a turn took 380 ms (p50).",
    "The nightly run did 25,536 memories/s.",
    "HTTP / in-process 1.27×, ours / LangGraph 1.46x.",
    "read path p95 9.7 ms",
    "the read path's p95 at 1.35x its quiet figure",
    "recall@10 0.721 on LoCoMo",
    "evidence in block 0.824 at 4.6 % of the history",
    "147 req/s, 0 errors",
    "2233 probes, leaks: 0, in 51 s on the loaded machine",
    "consolidation precision 0.974",
])
def test_a_typed_figure_is_flagged(sample: str) -> None:
    assert scan(sample), sample


@pytest.mark.parametrize("sample", [
    "The block stays under `block_target_tokens` (1,000) and holds at most 40 memories.",
    "`recall()` returns `recall_limit` (10) memories unless given a limit.",
    "The target is p95 <= 15 ms; the runner waits up to 120 s by default.",
    "`jobs_pause_ms` (the runner waits that long after each user's commit; default 0)",
    "Run `benchmarks/http_bench.py --users 50 --duration 30` on a quiet machine.",
    "The similarity floor is 0.10 (`decay_flag_below`, 0.15).",
])
def test_a_setting_is_not_flagged(sample: str) -> None:
    assert scan(sample) == [], sample


def test_included_sections_and_code_are_not_scanned() -> None:
    page = ("Before.\n\n--8<-- \"results/http_bench.md\"\n\n```python\nx = 1  # 380 ms\n```\n\n"
            "```text\nagent/invoke p50 380 ms\n```\n")
    assert scan(page) == [(10, "latency", "380 ms"), (10, "percentile", "p50 380")]
