"""The façade's shape: sync/async twins that cannot drift, one flow runner, imports down."""

from __future__ import annotations

import ast
import asyncio
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import langmem_layer
from langmem_layer import MemoryLayer
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.facade.admin import Admin
from langmem_layer.facade.agents import Agents
from langmem_layer.facade.memory_layer import _Moved
from langmem_layer.facade.threads import Threads
from langmem_layer.facade.trust_part import Trust
from langmem_layer.flow import Call, Concurrently, Flow, Runner, StoreCall

PACKAGE = Path(langmem_layer.__file__).parent

#: The façade's own operations, each with an ``a``-prefixed async twin: one screen.
FACADE = {
    "remember", "recall", "ingest", "context_block", "get", "list", "correct", "forget",
    "export", "import_", "delete_user", "drain", "close", "run",
}
#: The parts' operations (``memory.threads``, ``.admin``, ``.trust``, ``.agents``).
PARTS = {
    Threads: {"load_thread", "record_turn", "recent_history", "clear_history",
              "sweep_sessions"},
    Admin: {"browse", "set_surface", "history", "decisions", "submit", "process_pending"},
    Trust: {"feedback", "agent_trust", "record_outcome"},
    Agents: {"import_langmem", "retrieve_knowledge", "beside_knowledge"},
}


def _twins() -> list[tuple[str, Any, Any]]:
    found = []
    for cls in (MemoryLayer, *PARTS):
        for name in sorted(dir(cls)):
            static = inspect.getattr_static(cls, name, None)
            if (not name.startswith("_") and callable(static)
                    and not isinstance(static, type) and hasattr(cls, "a" + name)
                    and not isinstance(inspect.getattr_static(cls, "a" + name), _Moved)):
                found.append((f"{cls.__name__}.{name}", getattr(cls, name),
                              getattr(cls, "a" + name)))
    return found


def test_every_operation_has_an_async_twin() -> None:
    names = {name for name, _, _ in _twins()}
    assert {f"MemoryLayer.{n}" for n in FACADE} <= names
    for cls, ops in PARTS.items():
        assert {f"{cls.__name__}.{n}" for n in ops} <= names


def test_the_facade_is_one_screen_of_method_pairs() -> None:
    methods = {n for n in dir(MemoryLayer) if not n.startswith("_")
               and callable(inspect.getattr_static(MemoryLayer, n))
               and not isinstance(inspect.getattr_static(MemoryLayer, n), _Moved)}
    pairs = {n for n in methods if "a" + n in methods}
    assert pairs == FACADE
    # Besides the pairs: wiring and the prebuilt agents, and the layer's clock.
    assert methods - pairs - {"a" + n for n in pairs} == {
        "wire", "react_hooks", "middleware", "tools", "now"}


@pytest.mark.parametrize("old, part", sorted({
    "browse": "admin", "adecisions": "admin", "load_thread": "threads",
    "feedback": "trust", "as_retriever": "agents"}.items()))
def test_an_old_name_still_works_and_says_the_new_one(old: str, part: str, store) -> None:
    layer = MemoryLayer(store)
    with pytest.warns(DeprecationWarning, match=rf"use memory\.{part}\.{old}"):
        moved = getattr(layer, old)
    assert moved == getattr(getattr(layer, part), old)


@pytest.mark.parametrize(("name", "sync", "twin"), _twins(), ids=[t[0] for t in _twins()])
def test_async_twin_has_the_same_signature_and_a_docstring(name: str, sync: Any, twin: Any
                                                           ) -> None:
    assert not inspect.iscoroutinefunction(sync)
    assert inspect.iscoroutinefunction(twin)
    ours, theirs = inspect.signature(sync), inspect.signature(twin)
    assert list(ours.parameters) == list(theirs.parameters)
    for p, q in zip(ours.parameters.values(), theirs.parameters.values(), strict=True):
        assert (p.kind, p.default) == (q.kind, q.default), p.name
        # Sync vs async handlers and work, by design.
        if (name.rsplit(".", 1)[-1], p.name) not in {("run", "extra"),
                                                     ("beside_knowledge", "work")}:
            assert p.annotation == q.annotation, p.name
    assert ours.return_annotation == theirs.return_annotation
    assert sync.__doc__ and sync.__doc__.strip()
    short = name.rsplit(".", 1)[-1]
    assert twin.__doc__ and twin.__doc__.startswith(f"Async twin of ``{short}``")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("module", ["flow.py", "worker.py", "working/sessions.py"])
def test_modules_below_the_facade_do_not_import_it(module: str) -> None:
    assert not {m for m in _imports(PACKAGE / module) if m.startswith("langmem_layer.facade")}


@pytest.mark.parametrize("module", ["facade/nodes.py", "facade/params.py"])
def test_what_the_facade_hands_out_does_not_import_its_class(module: str) -> None:
    assert not {m for m in _imports(PACKAGE / module)
                if m.startswith("langmem_layer.facade.memory_layer")}


# -- the runner ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ping(Call):
    text: str


class Batches:
    """A store that records batches and fails the ones holding "boom"."""

    def __init__(self) -> None:
        self.batches: list[list[Any]] = []

    def batch(self, ops: list[Any]) -> list[Any]:
        self.batches.append(ops)
        if "boom" in ops:
            raise ValueError("boom")
        return [f"done {op}" for op in ops]

    async def abatch(self, ops: list[Any]) -> list[Any]:
        return self.batch(ops)


def _flow() -> Flow[list[str]]:
    seen: list[str] = []
    (reply,) = yield StoreCall(["a"])
    seen.append(reply)
    try:
        yield StoreCall(["boom"])
    except ValueError as e:  # a failed request is raised at its yield
        seen.append(f"caught {e}")
    seen.append((yield Ping("registered")))
    seen.append((yield Ping("again")))
    return seen


def test_runner_runs_one_flow_both_ways_with_registered_and_per_run_handlers() -> None:
    store = Batches()
    runner = Runner(store, RuleExtractor())

    async def apong(request: Ping) -> str:
        return f"apong {request.text}"

    runner.handle(Ping, lambda r: f"pong {r.text}", apong)
    assert runner.run(_flow()) == ["done a", "caught boom", "pong registered", "pong again"]
    assert asyncio.run(runner.arun(_flow())) == [
        "done a", "caught boom", "apong registered", "apong again"]

    async def extra(request: Ping) -> str:
        return f"extra {request.text}"

    assert runner.run(_flow(), extra={Ping: lambda r: "x"})[2:] == ["x", "x"]
    assert asyncio.run(runner.arun(_flow(), extra={Ping: extra}))[2:] == [
        "extra registered", "extra again"]


def _steps(name: str, n: int, log: list[str]) -> Flow[str]:
    for i in range(n):
        yield StoreCall([f"{name}{i}"])
        log.append(f"{name}{i}")
    return name


def test_flows_side_by_side_all_run_and_answer_in_order() -> None:
    def flow(log: list[str], boom: bool = False) -> Flow[Any]:
        flows: list[Flow[Any]] = [_steps("a", 2, log), _steps("b", 1, log)]
        if boom:
            flows.insert(1, _boom())
        try:
            return (yield Concurrently(flows))
        except ValueError as e:  # raised once every flow has ended
            return f"caught {e}"

    def _boom() -> Flow[None]:
        yield StoreCall(["boom"])

    for run in (lambda f: Runner(Batches(), RuleExtractor()).run(f),
                lambda f: asyncio.run(Runner(Batches(), RuleExtractor()).arun(f))):
        log: list[str] = []
        assert run(flow(log)) == ["a", "b"]
        log.clear()
        assert run(flow(log, boom=True)) == "caught boom"
        assert sorted(log) == ["a0", "a1", "b0"]  # the others still ran to their end


def test_flows_side_by_side_can_answer_with_each_failure_in_place() -> None:
    def boom(text: str) -> Flow[None]:
        yield StoreCall([text])
        raise ValueError(text)

    def flow() -> Flow[list[Any]]:
        return (yield Concurrently([boom("x"), _steps("a", 1, []), boom("y")],
                                   return_exceptions=True))

    for run in (lambda f: Runner(Batches(), RuleExtractor()).run(f),
                lambda f: asyncio.run(Runner(Batches(), RuleExtractor()).arun(f))):
        x, a, y = run(flow())
        assert (repr(x), a, repr(y)) == ("ValueError('x')", "a", "ValueError('y')")


async def test_async_flows_side_by_side_overlap_at_most_at_once() -> None:
    running, peak = [0], [0]

    class Slow(Batches):
        async def abatch(self, ops: list[Any]) -> list[Any]:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            await asyncio.sleep(0)  # the others' calls come in meanwhile
            running[0] -= 1
            return self.batch(ops)

    def flow() -> Flow[list[str]]:
        return (yield Concurrently([_steps(f"f{i}", 3, []) for i in range(5)], at_once=3))

    assert await Runner(Slow(), RuleExtractor()).arun(flow()) == [f"f{i}" for i in range(5)]
    assert peak[0] == 3


def test_a_request_without_handler_fails_inside_the_flow() -> None:
    def flow() -> Flow[str]:
        try:
            yield Ping("nobody")
        except TypeError as e:
            return str(e)
        return "answered"

    assert "No handler" in Runner(Batches(), RuleExtractor()).run(flow())


def test_an_unhandled_request_error_ends_the_flow() -> None:
    def flow() -> Flow[None]:
        yield StoreCall(["boom"])

    with pytest.raises(ValueError, match="boom"):
        Runner(Batches(), RuleExtractor()).run(flow())
