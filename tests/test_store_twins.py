"""The sync store's I/O is the async store's without ``await``, checked, not hand-kept.

Both stores execute the one job of :mod:`langmem_layer.store.driver`; what differs is how
each does one I/O step. psycopg keeps its sync classes as a generated copy of the async
ones; here the sync methods stay written out (they are short) and this test derives
them from the async ones, so an edit to one that the other lacks fails the suite.
"""

from __future__ import annotations

import ast
import difflib
from pathlib import Path

import pytest

STORE = Path(__file__).resolve().parents[1] / "langmem_layer" / "store"

#: Async names and their sync twins.
RENAMES = {
    "asynccontextmanager": "contextmanager",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncIterator": "Iterator",
    "AsyncConnection": "Connection",
    "AsyncRawCursor": "RawCursor",
    "aembed_documents": "embed_documents",
    "aembed_query": "embed_query",
    "asyncio": "time",  # asyncio.sleep -> time.sleep
}


class _Unasync(ast.NodeTransformer):
    """The async code as its sync twin reads: no ``await``, plain ``with``/``def``."""

    def visit_Await(self, node: ast.Await) -> ast.AST:
        return self.visit(node.value)

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        return self.visit(ast.copy_location(ast.With(
            items=node.items, body=node.body, type_comment=node.type_comment), node))

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self.visit(ast.copy_location(ast.FunctionDef(
            name=node.name, args=node.args, body=node.body, decorator_list=node.decorator_list,
            returns=node.returns, type_comment=node.type_comment, type_params=[]), node))

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(id=RENAMES.get(node.id, node.id), ctx=node.ctx)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        return ast.Attribute(value=self.visit(node.value),
                             attr=RENAMES.get(node.attr, node.attr), ctx=node.ctx)


def _method(module: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    tree = ast.parse((STORE / module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    raise AssertionError(f"{module} has no method {name}")


def _shape(node: ast.AST) -> str:
    return ast.dump(node, annotate_fields=False, include_attributes=False)


@pytest.mark.parametrize("name", ["_io", "_abandon", "_connection", "_open_again", "setup",
                                  "sweep_ttl", "purge_embedding_cache"])
def test_the_sync_store_does_what_the_async_store_does_without_await(name: str) -> None:
    derived = _Unasync().visit(_method("aio.py", name))
    written = _method("sync.py", name)
    diff = "\n".join(difflib.unified_diff(ast.unparse(derived).splitlines(),
                                          ast.unparse(written).splitlines(), "aio.py, unasync",
                                          "sync.py", lineterm="", n=1))
    assert _shape(derived) == _shape(written), (
        f"PostgresMemoryStore.{name} (sync.py) is no longer AsyncPostgresMemoryStore.{name} "
        f"(aio.py) without await: make the same change to both.\n{diff}")


def test_the_check_sees_a_difference() -> None:
    derived = _Unasync().visit(_method("aio.py", "_io"))
    written = _method("sync.py", "_io")
    written.body = written.body[:-1]  # a step the sync twin would have dropped
    assert _shape(derived) != _shape(written)
