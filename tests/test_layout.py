"""The package's shape: imports point down (no cycle, type-only imports included) and
modules stay small enough to hold one concept."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "langmem_layer"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Package modules ``path`` imports, at any depth (functions, TYPE_CHECKING blocks)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from pkg import mod`` imports the module; ``from mod import name`` the module.
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = [s for s in subs if s in modules] or [node.module]
        for name in names:
            if name in modules:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    graph = {}
    for name, path in files.items():
        # A package's __init__ is imported with any of its modules: only re-exports
        # from the top-level package are allowed to point anywhere.
        graph[name] = {m for m in _imports(path, modules) if m != name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, set())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node != "langmem_layer" and state.get(node) is None and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_between_modules() -> None:
    graph = _graph()
    # The top-level package re-exports the public API; nothing inside imports it.
    importers = sorted(m for m, deps in graph.items() if "langmem_layer" in deps)
    assert importers == [], f"modules importing the top-level package: {importers}"
    graph.pop("langmem_layer")
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_layers_below_never_import_the_facade() -> None:
    graph = _graph()
    top = {"langmem_layer.layer", "langmem_layer.cli"}
    # Entry points above the façade, as the CLI: serving owns a server's layer for its
    # lifetime, the MCP server one connection's.
    allowed = {"langmem_layer", "langmem_layer.cli", "langmem_layer.layer",
               "langmem_layer.server.served", "langmem_layer.server.mcp"}
    for name, deps in graph.items():
        if name in allowed or name.startswith(("langmem_layer.jobs", "langmem_layer.evals",
                                                     "langmem_layer.calibration")):
            # Jobs build a layer for flow-level jobs; the CLI runs them. The evaluation
            # drives the whole facade, as the CLI does.
            continue
        if name.startswith("langmem_layer.server.http"):
            continue  # the HTTP app sits above the façade, like the CLI
        assert not deps & top, f"{name} imports {sorted(deps & top)}"


def test_modules_hold_one_concept() -> None:
    big = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert big == {}, f"modules over {MAX_LINES} lines (split by concept): {big}"
