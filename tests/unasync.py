"""Generate the sync store's twin methods (``sync.py``) from the async store's (``aio.py``).

As psycopg's ``tools/async_to_sync.py``: the async code is the source, and the sync
methods that do the same I/O are its copy without ``await``, ``async with``, ``async for``
and ``async def``, with the async names replaced by their sync twins (``RENAMES``). The
copy is made on the text (tokens), so comments and the layout stay as written; a
continuation line aligned to a bracket that moved is aligned again.

    python -m tests.unasync          # rewrite the generated region of sync.py
    python -m tests.unasync --check  # exit 1 with a diff when sync.py is not up to date

Rules beyond the renames:

* a statement of an async method whose first line ends with ``# async only`` is left out
  of the sync twin (the event-loop bookkeeping of ``_drive``);
* ``await asyncio.to_thread(f, ...)`` becomes ``f(...)``;
* where the async docstring says "Async twin of ...", the sync method keeps its own
  docstring (the one sync.py has).

The methods generated are ``TWINS``; the ones both stores have that stay written by hand
are ``HAND_WRITTEN``, with the reason. Everything else in sync.py is outside the region
between ``BEGIN`` and ``END`` and is never touched.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import io
import sys
import textwrap
import tokenize
from collections import defaultdict
from collections.abc import Collection
from pathlib import Path

STORE = Path(__file__).resolve().parents[1] / "langmem_layer" / "store"
AIO = STORE / "aio.py"
SYNC = STORE / "sync.py"
AIO_CLASS = "AsyncPostgresMemoryStore"
SYNC_CLASS = "PostgresMemoryStore"

BEGIN = "    # --- generated from aio.py by tests/unasync.py: do not edit ---\n"
END = "    # --- end of generated code ---\n"

#: Async names and their sync twins.
RENAMES = {
    "AsyncPostgresMemoryStore": "PostgresMemoryStore",
    "asynccontextmanager": "contextmanager",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncIterator": "Iterator",
    "AsyncConnection": "Connection",
    "AsyncRawCursor": "RawCursor",
    "aembed_documents": "embed_documents",
    "aembed_query": "embed_query",
    "ASYNC_HOOKS": "SYNC_HOOKS",
    "asyncio": "time",  # asyncio.sleep -> time.sleep
}

#: The methods of ``PostgresMemoryStore`` generated from ``AsyncPostgresMemoryStore``'s,
#: in the order of aio.py.
TWINS = (
    "_serve",
    "embedded",
    "_connection",
    "_open_again",
    "_abandon",
    "_io",
    "_drive",
    "setup",
    "index_large_users",
    "sweep_ttl",
    "purge_embedding_cache",
)

#: Methods both stores have that stay written by hand in each, and why.
HAND_WRITTEN = {
    "__init__": "a threading lock and stop event, against the async store's loop state",
    "from_conn_string": "the async pool is opened by its context (open=False), the sync "
                        "one as psycopg's ConnectionPool opens; the sync docstring is the "
                        "full one",
    "batch": "the sync store's batch runs the job; the async store's hands abatch to its loop",
    "abatch": "the async store's coalesces calls; the sync store's runs batch in a thread",
    "start_ttl_sweeper": "a thread against a task",
    "stop_ttl_sweeper": "a thread against a task",
}

ASYNC_ONLY = "# async only"


class UnasyncError(Exception):
    """aio.py or sync.py is not in a shape the generator can work with."""


class Unasync(ast.NodeTransformer):
    """The rules on the syntax tree: the async code as its sync twin reads.

    The generator rewrites text, to keep comments and layout; each method it writes is
    checked against this transform of the async one (docstrings aside).
    """

    def __init__(self, drop: Collection[int] = ()) -> None:
        self.drop = drop  # first lines of the statements left out (async_only)

    def visit(self, node: ast.AST) -> ast.AST | None:  # type: ignore[override]
        if isinstance(node, ast.stmt) and node.lineno in self.drop:
            return None
        return super().visit(node)  # type: ignore[no-any-return]

    def visit_Await(self, node: ast.Await) -> ast.AST | None:
        return self.visit(node.value)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST | None:
        return self.visit(ast.copy_location(ast.With(
            items=node.items, body=node.body, type_comment=node.type_comment), node))

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST | None:
        return self.visit(ast.copy_location(ast.For(
            target=node.target, iter=node.iter, body=node.body, orelse=node.orelse,
            type_comment=node.type_comment), node))

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST | None:
        # The same fields (type_params too, from Python 3.12).
        return self.visit(ast.copy_location(ast.FunctionDef(
            **{field: getattr(node, field) for field in node._fields}), node))

    def visit_Call(self, node: ast.Call) -> ast.AST | None:
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr == "to_thread"
                and isinstance(func.value, ast.Name) and func.value.id == "asyncio"):
            node = ast.Call(func=node.args[0], args=node.args[1:], keywords=node.keywords)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST | None:
        return ast.Name(id=RENAMES.get(node.id, node.id), ctx=node.ctx)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST | None:
        return ast.Attribute(value=self.visit(node.value),  # type: ignore[arg-type]
                             attr=RENAMES.get(node.attr, node.attr), ctx=node.ctx)


def shape(node: ast.AST) -> str:
    """``node`` as a string that two equal trees share, docstrings left out."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _docstring(node):
        node = copy.copy(node)
        node.body = node.body[1:]
    return ast.dump(node, annotate_fields=False, include_attributes=False)


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise UnasyncError(f"no class {name}")


def methods(source: str, class_name: str) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods of ``class_name`` in ``source``, by name."""
    return {node.name: node for node in _class(ast.parse(source), class_name).body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def _docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Expr | None:
    first = node.body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return first
    return None


def async_only(source: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """The statements of ``node`` whose first line ends with ``# async only``."""
    lines = source.splitlines()
    return [stmt for stmt in ast.walk(node) if isinstance(stmt, ast.stmt) and stmt is not node
            and lines[stmt.lineno - 1].rstrip().endswith(ASYNC_ONLY)]


def _unasync_tokens(text: str) -> str:
    """``text`` (indented source) without async/await, the renames applied."""
    lines = text.splitlines(keepends=True)
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
              if t.type not in (tokenize.ENCODING, tokenize.ENDMARKER)]
    edits: dict[int, list[tuple[int, int, str]]] = defaultdict(list)

    def delete_to_next(i: int) -> None:
        # The token and the space after it, up to the next token on its line.
        tok, nxt = tokens[i], tokens[i + 1]
        if nxt.start[0] != tok.start[0]:
            raise UnasyncError(f"line {tok.start[0]}: {tok.string} ends a line")
        edits[tok.start[0]].append((tok.start[1], nxt.start[1], ""))

    skip = 0
    for i, tok in enumerate(tokens):
        if skip:
            skip -= 1
            continue
        if tok.type != tokenize.NAME:
            continue
        if tok.string == "async" and tokens[i + 1].string in ("def", "with", "for"):
            delete_to_next(i)
        elif tok.string == "await":
            shape = [t.string for t in tokens[i + 1:i + 7]]
            if shape[:4] == ["asyncio", ".", "to_thread", "("] and shape[5] in (",", ")"):
                # await asyncio.to_thread(f, a) -> f(a); await asyncio.to_thread(f) -> f()
                func, after = tokens[i + 5], tokens[i + 6]
                if func.type != tokenize.NAME or func.start[0] != tok.start[0]:
                    raise UnasyncError(f"line {tok.start[0]}: to_thread of a non-name")
                edits[tok.start[0]].append((tok.start[1], func.start[1], ""))
                if after.string == ",":
                    end = tokens[i + 7].start[1] if tokens[i + 7].start[0] == after.start[0] \
                        else after.end[1]
                    edits[after.start[0]].append((after.start[1], end, "("))
                    skip = 6
                else:
                    edits[after.start[0]].append((after.start[1], after.start[1], "("))
                    skip = 5
            else:
                delete_to_next(i)
        elif tok.string in ("async", "await"):
            raise UnasyncError(f"line {tok.start[0]}: {tok.string} not handled")
        elif tok.string in RENAMES:
            edits[tok.start[0]].append((tok.start[1], tok.end[1], RENAMES[tok.string]))

    shift: dict[int, int] = defaultdict(int)

    def new_col(row: int, col: int) -> int:
        return col + shift[row] + sum(len(new) - (end - start)
                                      for start, end, new in edits[row] if end <= col)

    # A continuation line aligned just after an open bracket follows the bracket.
    brackets: list[tuple[int, int]] = []
    last_row = 0
    for tok in tokens:
        row, col = tok.start
        if row != last_row and tok.type not in (tokenize.DEDENT, tokenize.INDENT):
            last_row = row
            if brackets and col == brackets[-1][1] + 1:
                shift[row] = new_col(*brackets[-1]) + 1 - col
        if tok.type == tokenize.OP and tok.string in ("(", "[", "{"):
            brackets.append(tok.start)
        elif tok.type == tokenize.OP and tok.string in (")", "]", "}"):
            brackets.pop()

    out = []
    for row, line in enumerate(lines, start=1):
        for start, end, new in sorted(edits[row], reverse=True):
            line = line[:start] + new + line[end:]
        if shift[row] > 0:
            line = " " * shift[row] + line
        elif shift[row] < 0:
            if line[:-shift[row]].strip():
                raise UnasyncError(f"line {row}: cannot move {line!r} left")
            line = line[-shift[row]:]
        out.append(line)
    return "".join(out)


def unasync_method(aio: str, node: ast.FunctionDef | ast.AsyncFunctionDef,
                   sync_docstring: str | None = None) -> str:
    """The sync twin of the async method ``node`` of source ``aio``, as text.

    ``sync_docstring`` is the sync method's docstring statement as written (its lines),
    used where the async one says "Async twin of".
    """
    lines = aio.splitlines(keepends=True)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    offset = first - 1
    text = lines[offset:node.end_lineno]
    # Line replacements, last first so earlier line numbers hold.
    dropped = async_only(aio, node)
    replace = [(stmt.lineno, stmt.end_lineno or stmt.lineno, list[str]())
               for stmt in dropped]
    doc = _docstring(node)
    if doc is not None and "Async twin of" in doc.value.value:  # type: ignore[attr-defined]
        if sync_docstring is None:
            raise UnasyncError(
                f"{AIO_CLASS}.{node.name}'s docstring points to its sync twin, which has "
                f"no docstring of its own in sync.py to keep: write one there")
        replace.append((doc.lineno, doc.end_lineno or doc.lineno,
                        sync_docstring.splitlines(keepends=True)))
    for start, end, new in sorted(replace, key=lambda r: r[0], reverse=True):
        text[start - 1 - offset:end - offset] = new
    written = _unasync_tokens("".join(text))
    # The text as the tree says it should read (a bug here is the generator's).
    expected = Unasync({stmt.lineno for stmt in dropped}).visit(copy.deepcopy(node))
    got = ast.parse(textwrap.dedent(written)).body[0]
    if expected is None or shape(got) != shape(expected):
        raise UnasyncError(f"the text written for {node.name} is not its syntax tree "
                           f"without async:\n{written}")
    return written


def _region(sync: str) -> tuple[str, str, str]:
    """sync.py as (before the region, the region, after it); the markers are outside."""
    if sync.count(BEGIN) != 1 or sync.count(END) != 1:
        raise UnasyncError(f"sync.py needs exactly one line {BEGIN.strip()!r} and one "
                           f"line {END.strip()!r}, in the class, in that order")
    head, rest = sync.split(BEGIN)
    region, tail = rest.split(END)
    return head + BEGIN, region, END + tail


def _docstring_text(sync: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    doc = _docstring(node)
    if doc is None:
        return None
    lines = sync.splitlines(keepends=True)
    return "".join(lines[doc.lineno - 1:doc.end_lineno])


def generate(aio: str, sync: str) -> str:
    """sync.py with its generated region made from ``aio`` (the rest as in ``sync``)."""
    head, _, tail = _region(sync)
    async_methods = methods(aio, AIO_CLASS)
    sync_methods = methods(sync, SYNC_CLASS)
    missing = [name for name in TWINS if name not in async_methods]
    if missing:
        raise UnasyncError(f"{AIO_CLASS} has no method {', '.join(missing)}")
    twins = sorted((async_methods[name] for name in TWINS), key=lambda n: n.lineno)
    parts = []
    for node in twins:
        own = sync_methods.get(node.name)
        parts.append(unasync_method(
            aio, node, None if own is None else _docstring_text(sync, own)))
    region = "\n" + "\n".join(parts) + "\n"
    generated = head + region + tail
    for name, node in methods(generated, SYNC_CLASS).items():
        left = {type(n).__name__ for n in ast.walk(node) if isinstance(
            n, ast.Await | ast.AsyncWith | ast.AsyncFor | ast.AsyncFunctionDef)}
        if name in TWINS and left:
            raise UnasyncError(f"the generated {name} still has {', '.join(sorted(left))}")
    return generated


def check(aio: str | None = None, sync: str | None = None) -> str:
    """The unified diff from sync.py as it is to sync.py as generated; "" when equal."""
    aio = AIO.read_text() if aio is None else aio
    sync = SYNC.read_text() if sync is None else sync
    expected = generate(aio, sync)
    return "".join(difflib.unified_diff(
        sync.splitlines(keepends=True), expected.splitlines(keepends=True),
        "langmem_layer/store/sync.py", "langmem_layer/store/sync.py (generated from aio.py)"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.unasync",
        description=textwrap.dedent("""\
            Write the generated methods of langmem_layer/store/sync.py from
            langmem_layer/store/aio.py."""))
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 with a diff when sync.py differs")
    args = parser.parse_args(argv)
    try:
        diff = check()
    except (UnasyncError, SyntaxError, tokenize.TokenError) as e:
        print(f"unasync: {e}", file=sys.stderr)
        return 2
    if args.check:
        if diff:
            sys.stdout.write(diff)
            print("sync.py is not what aio.py generates: run `python -m tests.unasync`",
                  file=sys.stderr)
            return 1
        return 0
    if diff:
        SYNC.write_text(generate(AIO.read_text(), SYNC.read_text()))
        print("rewrote langmem_layer/store/sync.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
