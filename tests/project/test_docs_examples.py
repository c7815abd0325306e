"""Every ```python block of the README and of the docs site runs, so a recipe cannot rot.

Each page's blocks run in order in one fresh namespace, as a reader pasting them one after
the other would run them: offline (no OpenAI variables, the offline chat model and the
rule extractor), on this session's database (``LANGMEM_DATABASE_URL``, emptied first), in
a temporary working directory. A block is marked by an HTML comment on the line before
its fence (docs/development.md, "Examples that run"):

- ``<!-- example: given store, model -->``: the block uses names the page's prose
  defines (``store`` being a ``PostgresMemoryStore`` ...); they are set up as :data:`GIVEN`
  says before the block runs;
- ``<!-- example: run by tests/<room>/test_x.py -->``: that test runs the block (it needs a
  server the test starts); the test file must read the page;
- ``<!-- example: not run: reason -->``: deliberately not run, with the reason.

A block marked not run never skips: its test checks the mark gives a reason, and its id
(the page and line) names it in every run's list of tests.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langchain_core.messages import BaseMessage

from tests.conftest import TABLES

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON = {"python", "py", "python3"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})(?P<info>[^\n`]*)$")
MARK = re.compile(r"^<!--\s*example:\s*(?P<what>.*?)\s*-->$")

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


@dataclass(frozen=True)
class Block:
    """One fenced python block of a page."""

    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    code: str
    mark: str  # the marker comment's text after "example:", or ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def not_run(self) -> str | None:
        """The reason the page gives for not running the block, if it gives one."""
        found = re.fullmatch(r"not run:\s*(.+)", self.mark)
        return found.group(1) if found else None

    @property
    def run_by(self) -> str | None:
        found = re.fullmatch(r"run by (\S+)(?:\s.*)?", self.mark)
        return found.group(1) if found else None

    @property
    def given(self) -> list[str]:
        found = re.fullmatch(r"given (.+)", self.mark)
        return [n.strip() for n in found.group(1).split(",")] if found else []


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of the page ``path`` whose language is Python (see :func:`parse`)."""
    return parse(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())


def parse(text: str, page: str) -> list[Block]:
    """The fenced blocks of ``text`` whose language is Python, with their markers.

    Raises:
        AssertionError: A fence is left open, or a language looks like Python without
            being one this test runs (``pycon``, ``python-repl`` ...).
    """
    lines = text.splitlines()
    found: list[Block] = []
    n = 0
    while n < len(lines):
        opening = FENCE.match(lines[n])
        if not opening:
            n += 1
            continue
        ticks, indent = opening["ticks"], opening["indent"]
        lang = opening["info"].strip().split(" ")[0].split("{")[0].lower()
        end = next((k for k in range(n + 1, len(lines))
                    if lines[k].strip().startswith(ticks) and not lines[k].strip(ticks[0])),
                   None)
        assert end is not None, f"{page}:{n + 1}: a code fence that never closes"
        if lang in PYTHON:
            body = "\n".join(line.removeprefix(indent) for line in lines[n + 1:end])
            found.append(Block(page, n + 1, body + "\n", _mark(lines, n)))
        else:
            assert not lang.startswith("py"), (
                f"{page}:{n + 1}: ```{lang} is neither run nor a language this test knows; "
                "use ```python, or another language for text that is not Python")
        n = end + 1
    return found


def _mark(lines: list[str], fence: int) -> str:
    before = [line.strip() for line in lines[:fence]]
    while before and not before[-1]:
        before.pop()
    found = MARK.match(before[-1]) if before else None
    return found["what"] if found else ""


ALL = [block for page in PAGES for block in blocks(page)]


# -- the names a page's prose gives its blocks ------------------------------------------


def _store(names: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    from langmem_layer.environment import open_store

    store = stack.enter_context(open_store())  # LANGMEM_DATABASE_URL, the default model
    store.setup()
    return store


def _model(names: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    from langmem_layer.offline_chat import OfflineChatModel

    return OfflineChatModel()


def _memory(names: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    from langmem_layer import MemoryLayer

    memory = MemoryLayer(_given("store", names, stack))
    stack.callback(memory.close)
    return memory


def _builder(names: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    # The README's first recipe's graph: one agent node, before memory is wired in.
    from langgraph.graph import END, START, StateGraph

    from langmem_layer import MemoryState, memory_prompt

    model = _given("model", names, stack)
    prompt = memory_prompt("You are a helpful assistant.")

    def agent(state: MemoryState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(prompt(state))]}

    builder = StateGraph(MemoryState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


def _embeddings(names: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    from langmem_layer.store.embedding.default_embedder import LocalEmbeddings

    return LocalEmbeddings()  # the offline default; the model loads once per process


def _authenticate(names: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    from langmem_layer.server.keys import Principal

    def authenticate() -> Principal:  # an app's own auth dependency
        return Principal(user_id="alice", admin=False)

    return authenticate


#: What each name a block may be given is, in the words of the page that gives it.
GIVEN: dict[str, Callable[[dict[str, Any], contextlib.ExitStack], Any]] = {
    "store": _store,  # a PostgresMemoryStore, set up
    "model": _model,  # any chat model: the offline one
    "memory": _memory,  # a MemoryLayer on that store
    "builder": _builder,  # a StateGraph(MemoryState) with an "agent" node
    "embeddings": _embeddings,  # any LangChain Embeddings: the local model
    "authenticate": _authenticate,  # a FastAPI dependency returning the principal
}


def _given(name: str, names: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    # A name the page already set up (an earlier block's given) is reused, as a reader
    # who kept the session open would reuse it.
    key = f"__given_{name}"
    if key not in names:
        names[key] = GIVEN[name](names, stack)
    return names[key]


# -- the inventory: every block is run here, run by a named test, or marked not run --------


def problems(found: list[Block]) -> list[str]:
    """What is wrong with the blocks' markers, or with a block as Python."""
    wrong = []
    for block in found:
        if block.mark and not (block.not_run or block.run_by or block.given):
            wrong.append(f"{block.where}: unknown marker {block.mark!r}; use 'given NAME, "
                         "...', 'run by tests/FILE.py' or 'not run: REASON'")
        if set(block.given) - set(GIVEN):
            wrong.append(f"{block.where}: given {sorted(set(block.given) - set(GIVEN))}, which "
                         f"this test cannot set up (it knows {sorted(GIVEN)})")
        try:  # even a block not run is Python (top-level await as in an asyncio REPL)
            compile(block.code, block.where, "exec",
                    flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        except SyntaxError as e:
            wrong.append(f"{block.where}: not Python: {e}")
    return wrong


def test_every_python_block_is_run_or_marked_with_a_reason() -> None:
    assert len(PAGES) > 10 and len(ALL) >= 10, [b.where for b in ALL]
    assert problems(ALL) == []
    here = [b for b in ALL if not (b.not_run or b.run_by)]
    assert len(here) > len(ALL) / 2, "most examples run here"


def test_a_block_left_unclear_fails_the_inventory() -> None:
    page = "\n".join([
        "<!-- example: skip -->", "```python", "x = 1", "```", "",
        "<!-- example: given store, a_database -->", "", "```python", "y = 2", "```",
        "```python", "def broken(:", "```",
        "<!-- example: not run: needs a GPU -->", "```py", "z = 3", "```",
        "```bash", "echo not python", "```"])
    found = parse(page, "page.md")
    assert [(b.line, b.mark) for b in found] == [
        (2, "skip"), (8, "given store, a_database"), (11, ""), (15, "not run: needs a GPU")]
    assert found[3].not_run == "needs a GPU" and found[1].given == ["store", "a_database"]
    wrong = problems(found)
    assert len(wrong) == 3, wrong
    assert wrong[0].startswith("page.md:2: unknown marker 'skip'")
    assert wrong[1].startswith("page.md:8: given ['a_database']")
    assert wrong[2].startswith("page.md:11: not Python")
    with pytest.raises(AssertionError, match=r"page\.md:1: ```pycon is neither run"):
        parse("```pycon\n>>> 1\n```\n", "page.md")
    with pytest.raises(AssertionError, match="never closes"):
        parse("text\n```python\nx = 1\n", "page.md")


@pytest.mark.parametrize("block", [b for b in ALL if b.run_by], ids=lambda b: b.where)
def test_a_block_run_elsewhere_is_read_by_that_test(block: Block) -> None:
    test = ROOT / str(block.run_by)
    assert test.is_file() and test.name.startswith("test_"), f"{block.where}: no {test}"
    source = test.read_text(encoding="utf-8")
    assert Path(block.page).name in source and "```python" in source, (
        f"{block.where}: {block.run_by} does not read {block.page}'s python blocks")


NOT_RUN = [b for b in ALL if b.not_run]
if NOT_RUN:  # (an empty parametrisation would show as a skip of its own)

    @pytest.mark.parametrize("block", NOT_RUN, ids=lambda b: b.where)
    def test_a_block_marked_not_run_says_why(block: Block) -> None:
        reason = block.not_run or ""
        assert len(reason) >= 10, f"{block.where}: a block left out says why ({reason!r})"


# -- each page's blocks, in order, in one namespace ----------------------------------------


@pytest.fixture
def offline_env(pg_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The environment a reader runs the examples in, on this session's emptied database
    (emptied again after: the pages' users and vectors stay out of other tests)."""
    _empty(pg_uri)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LANGMEM_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGMEM_DATABASE_URL", pg_uri)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # nothing a block writes lands in the checkout
    yield pg_uri
    _empty(pg_uri)


def _empty(uri: str) -> None:
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLES}")


def run_page(page: list[Block]) -> None:
    """Run the page's blocks that are not marked otherwise, in order, in one namespace."""
    names: dict[str, Any] = {"__name__": "__docs__"}
    with contextlib.ExitStack() as stack:
        for block in page:
            if block.not_run or block.run_by:
                continue
            for name in block.given:
                names[name] = _given(name, names, stack)
            code = compile(block.code, block.where, "exec",
                           flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                result = eval(code, names)
                if inspect.iscoroutine(result):
                    asyncio.run(result)


PAGES_RUN = sorted({b.page for b in ALL if not (b.not_run or b.run_by)})


@pytest.mark.parametrize("page", PAGES_RUN)
def test_the_page_runs_as_written(page: str, offline_env: str) -> None:
    run_page([b for b in ALL if b.page == page])
    # The blocks used the database they were given, never an embedded server of their own.
    assert not (Path.cwd() / ".langmem").exists(), "a block started an embedded server"
