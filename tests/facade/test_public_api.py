"""The package's public surface stays complete, sorted and light to import."""

import inspect
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import langmem_layer
from langmem_layer import MemoryLayer, errors

ROOT = Path(__file__).resolve().parents[2]

# Types of the standard library and of the framework the API extends (a LangGraph
# ``StateGraph`` in, the same out); callers already import these from their owners.
FOREIGN_MODULES = ("builtins", "typing", "collections", "datetime", "types", "langgraph",
                   "langchain_core")


def _ruff_order(name: str) -> tuple[int, str]:
    # ruff's RUF022 ("isort-style"): CONSTANTS, then Classes, then functions.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_complete() -> None:
    names = langmem_layer.__all__
    assert list(names) == sorted(names, key=_ruff_order)
    assert len(set(names)) == len(names)
    assert all(hasattr(langmem_layer, n) for n in names)
    public_imports = {
        n for n, v in vars(langmem_layer).items()
        if not n.startswith("_") and (inspect.isclass(v) or inspect.isfunction(v))
    }
    assert public_imports <= set(names), public_imports - set(names)


def test_public_callables_have_docstrings() -> None:
    for name in langmem_layer.__all__:
        obj = getattr(langmem_layer, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name


def test_every_error_is_exported() -> None:
    defined = {
        name for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, errors.LangmemError)
        and obj.__module__ == errors.__name__
    }
    assert defined == set(errors.__all__)
    assert defined <= set(langmem_layer.__all__), defined - set(langmem_layer.__all__)
    assert all(getattr(langmem_layer, n) is getattr(errors, n) for n in defined)


def _classes(annotation: object) -> typing.Iterator[type]:
    if isinstance(annotation, type):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _classes(arg)


def _exported_by_its_module(cls: type) -> bool:
    """Whether ``cls`` is in the ``__all__`` of the public module that defines it."""
    module = sys.modules.get(cls.__module__)
    public = not any(part.startswith("_") for part in cls.__module__.split("."))
    return public and cls.__name__ in getattr(module, "__all__", ())


def _type_checking_names(module: Any) -> dict[str, Any]:
    """The names a module imports under ``if TYPE_CHECKING:`` (annotations only, so the
    module need not import them at run time), imported here to resolve its hints."""
    import ast
    import importlib

    names: dict[str, Any] = {}
    tree = ast.parse(inspect.getsource(module))
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    source = importlib.import_module(stmt.module)
                    for alias in stmt.names:
                        names[alias.asname or alias.name] = getattr(source, alias.name)
    return names


def _hints(function: Any) -> dict[str, Any]:
    module = sys.modules[function.__module__]
    return typing.get_type_hints(function, globalns={**_type_checking_names(module),
                                                     **vars(module)})


def test_layer_methods_return_only_documented_types() -> None:
    exported = {id(getattr(langmem_layer, n)) for n in langmem_layer.__all__}
    methods = [(n, m) for n, m in inspect.getmembers(MemoryLayer, inspect.isfunction)
               if not n.startswith("_")]
    assert len(methods) > 30
    for name, method in methods:
        returned = _hints(method).get("return")
        for cls in _classes(returned):
            if id(cls) in exported or _exported_by_its_module(cls):
                continue
            assert cls.__module__.split(".")[0] in FOREIGN_MODULES, (
                f"MemoryLayer.{name} returns {cls.__module__}.{cls.__qualname__}, which "
                "neither langmem_layer.__all__ nor its own module's __all__ exports")


def test_the_top_level_is_what_a_recipe_needs() -> None:
    # The README's recipes import only from here; everything else from its module.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    imported = {name.strip() for group in re.findall(
        r"from langmem_layer import \(?([\w, \n]+?)\)?\n", readme)
        for name in group.replace("\n", ",").split(",") if name.strip()}
    assert imported and imported <= set(langmem_layer.__all__), imported - set(
        langmem_layer.__all__)
    errors_ = {n for n in langmem_layer.__all__ if n.endswith("Error")}
    assert len(set(langmem_layer.__all__) - errors_) <= 25, sorted(
        set(langmem_layer.__all__) - errors_)


def test_import_loads_no_model_and_opens_no_database() -> None:
    code = ("import sys, langmem_layer; "
            "assert 'torch' not in sys.modules, 'torch'; "
            "assert 'sentence_transformers' not in sys.modules, 'sentence_transformers'; "
            "import gc, psycopg, psycopg_pool; "
            "live = [o for o in gc.get_objects() "
            "if isinstance(o, (psycopg.Connection, psycopg_pool.ConnectionPool))]; "
            "assert not live, live")
    _python(code)


def _python(code: str) -> None:
    """Run ``code`` in a fresh interpreter (nothing imported yet); it must succeed."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_layer_that_remembers_and_recalls_needs_no_graph_runtime() -> None:
    # LangGraph's graph package, LangChain's runnables and retrievers, and the agent
    # middleware bring LangSmith's tracing types: most of a second of start-up that the
    # command line's `search` (a store, a MemoryLayer, a recall) must not pay. They load
    # when a graph, a node, a retriever or an agent hook is asked for.
    code = ("import sys; from langmem_layer import MemoryLayer, PostgresMemoryStore; "
            "import langmem_layer.cli.main; "
            "heavy = [m for m in ('langgraph.graph', 'langchain_core.runnables.base', "
            "'langchain_core.retrievers', 'langchain.agents', 'langsmith.run_trees') "
            "if m in sys.modules]; assert not heavy, heavy; "
            "from langmem_layer import MemoryState, wire; "
            "assert 'langgraph.graph' in sys.modules")
    _python(code)
