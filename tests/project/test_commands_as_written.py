"""The commands the README, the docs and the demo give a user run as written: each make
target exists, each `langmem-layer ...` line parses, and the browser lookup says what to
do."""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path

import pytest

from langmem_layer.cli.main import _parser
from tests.browser import MISSING, chromium_path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
#: The README and every page of the docs site.
DOCS = "\n".join([README, *(p.read_text(encoding="utf-8")
                            for p in sorted((ROOT / "docs").glob("*.md")))])
# Usage synopses (`[--user U]`, `NAME`, `<key>`, `a|b`) are notation, not commands.
NOTATION = re.compile(r"[\[\]<>|…]|\.\.\.|\b[A-Z]{2,}(?:_[A-Z]+)*\b")


COMMAND_WORDS = {word for name in __import__("langmem_layer.cli.main", fromlist=["x"]
                                              ).COMMANDS for word in name.split()}


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", text, re.M))


def _shell_blocks(text: str) -> list[str]:
    """The bodies of fenced code blocks that are shell (no language, or a shell's)."""
    blocks, body, lang = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if body is None:
                body, lang = [], line[3:].strip()
            else:
                if lang in ("", "sh", "bash", "console", "shell"):
                    blocks.append("\n".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return blocks


def _cli_lines(text: str) -> list[str]:
    """``langmem-layer ...`` command lines of shell code blocks and inline code."""
    found: list[str] = []
    for block in _shell_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip().removeprefix("$ ")
            line = re.sub(r"^(\S+=\S+\s+)+", "", line)  # VAR=value prefixes
            if re.match(r"^(\S*/)?langmem-layer\s", line):
                found.append(line)
    for code in re.findall(r"`((?:\S*/)?langmem-layer [^`]+)`", text):
        if set(code.split()[1:]) - COMMAND_WORDS:  # not just a command's name
            found.append(code)
    return [line for line in found if not NOTATION.search(line.split(" ", 1)[1])]


def _parses(line: str) -> None:
    argv = shlex.split(line)[1:]
    try:
        _parser().parse_args(argv)
    except SystemExit as e:
        if e.code:  # --help exits 0
            raise AssertionError(f"does not parse: {line!r}") from e


def test_every_readme_command_line_parses() -> None:
    lines = _cli_lines(DOCS)
    assert len(lines) > 10, lines
    assert any("keys create --user" in line for line in lines)
    for line in lines:
        _parses(line)


def test_the_readme_make_targets_exist() -> None:
    targets = _make_targets()
    used = set(re.findall(r"^make ([a-z][\w-]*)", DOCS, re.M))
    used |= set(re.findall(r"`make ([a-z][\w-]*)", DOCS))
    assert {"demo", "test", "serve", "dev"} <= used
    assert used <= targets, used - targets


def test_the_demos_hints_are_commands_that_exist() -> None:
    from examples.demo import STUDIO_AND_PANEL

    hints = STUDIO_AND_PANEL.format(data_dir=".langmem")
    assert set(re.findall(r"\bmake ([a-z][\w-]*)", hints)) <= _make_targets()
    cli = re.findall(r"(\.venv/bin/langmem-layer [^\n(]+)", hints)
    assert cli, hints
    for line in cli:
        _parses(line.strip())


def test_the_browser_is_found_or_named(tmp_path: Path) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert chromium_path({"CHROMIUM": str(fake)}) == str(fake)
    assert chromium_path({}, path=str(tmp_path)) == str(fake)
    with pytest.raises(AssertionError) as missing:
        chromium_path({}, path=str(tmp_path / "empty"))
    assert str(missing.value) == MISSING and "\n" not in MISSING
    with pytest.raises(AssertionError, match="not an executable file"):
        chromium_path({"CHROMIUM": str(tmp_path / "nope")})
    # The suite's own browser is there (make test saw to it).
    assert os.access(chromium_path(), os.X_OK)
