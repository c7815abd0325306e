"""The ``jobs`` LangGraph graph: listed in langgraph.json, and running the runner."""

from __future__ import annotations

import importlib.util
import json
from contextlib import contextmanager
from pathlib import Path
from uuid import uuid5

import pytest

from graphs.jobs import build_job_graph
from langmem_layer import AccessDeniedError, ConfigurationError, MemorySettings
from langmem_layer.jobs import JobContext
from langmem_layer.server.langgraph_auth import ADMIN_GRAPHS, NAMESPACE_GRAPH, admin_graph
from tests.jobs.test_jobs_runner import JOB, NOW, USERS, Touch, marks, people, runs, touch

__all__ = ["people", "touch"]  # fixtures, imported to be used here

ROOT = Path(__file__).resolve().parents[2]


def test_the_graph_runs_a_job_once_per_period(store, people, touch: Touch, pg_uri) -> None:
    opened = []

    @contextmanager
    def open_context(job, options):
        opened.append(job.name)
        yield JobContext(store, settings=MemorySettings())

    graph = build_job_graph(open_context).compile()
    out = graph.invoke({"job": JOB, "now": NOW.isoformat(), "shard": "0/2"})
    assert (out["status"], out["period"], out["shard"]) == ("done", "2026-11-23", "0/2")
    assert out["users"] == out["counts"]["touched"] > 0
    again = graph.invoke({"job": JOB, "now": NOW.isoformat(), "shard": "0/2"})
    assert again["status"] == "skipped"
    dry = graph.invoke({"job": JOB, "dry_run": True, "user": "user-01"})
    assert (dry["status"], dry["users"]) == ("dry-run", 1)
    assert opened == [JOB] * 3
    with pytest.raises(ConfigurationError, match="Input 'job' names a job"):
        graph.invoke({"job": "nope"})


def test_langgraph_json_lists_the_jobs_graph(pg_uri, store, people, touch: Touch,
                                             monkeypatch) -> None:
    monkeypatch.setenv("LANGMEM_DATABASE_URL", pg_uri)
    config = json.loads((ROOT / "langgraph.json").read_text())
    path, name = config["graphs"]["jobs"].split(":")
    spec = importlib.util.spec_from_file_location("lg_jobs", ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # importing connects to nothing
    graph = getattr(module, name)()
    assert set(graph.get_input_jsonschema()["properties"]) >= {"job", "now", "user", "shard"}
    out = graph.invoke({"job": JOB, "now": NOW.isoformat()})
    assert (out["status"], out["users"]) == ("done", len(USERS))
    assert marks(pg_uri) == dict.fromkeys(USERS, 1)
    assert [r[:3] for r in runs(pg_uri)] == [(JOB, "2026-11-23", "0/1")]


def _served_config(user: str, permissions: list[str]) -> dict:
    # What a LangGraph server with an auth handler puts in a run's configurable.
    return {"configurable": {"langgraph_auth_user_id": user,
                             "langgraph_auth_permissions": permissions}}


def test_an_authenticated_non_admin_run_is_refused_before_anything_opens(
        store, people, touch: Touch) -> None:
    opened = []

    @contextmanager
    def open_context(job, options):
        opened.append(job.name)
        yield JobContext(store, settings=MemorySettings())

    graph = build_job_graph(open_context).compile()
    with pytest.raises(AccessDeniedError, match="admin key") as refused:
        graph.invoke({"job": JOB, "user": "user-01", "force": True},
                     _served_config("dan", []))
    assert refused.value.status == 403
    assert opened == []
    out = graph.invoke({"job": JOB, "dry_run": True, "user": "user-01"},
                       _served_config("ops", ["admin"]))
    assert out["status"] == "dry-run"
    assert opened == [JOB]


def test_every_served_graph_is_classified() -> None:
    # A graph langgraph.json serves is either confined to its caller's user (the memory
    # agent: the auth handler forces the run's user_id) or an admin's alone; a new
    # graph must be placed in one of the two.
    served = set(json.loads((ROOT / "langgraph.json").read_text())["graphs"])
    assert served == {"memory_agent"} | ADMIN_GRAPHS
    for graph in ADMIN_GRAPHS:
        assert admin_graph(graph) == graph
        assert admin_graph(str(uuid5(NAMESPACE_GRAPH, graph))) == graph
    assert admin_graph("memory_agent") is None
    assert admin_graph(None) is None
