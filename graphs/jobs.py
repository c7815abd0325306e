"""The maintenance jobs as a LangGraph graph, for Studio and LangGraph server crons.

A thin adapter over :func:`langmem_layer.jobs.runner.run`: the same recorded,
once-per-period, resumable run as ``langmem-layer jobs run``. Its input names the
job; a LangGraph server cron triggers one, e.g.::

    await client.crons.create("jobs", schedule="0 3 * * *", input={"job": "sweep-ttl"})

Input: ``job`` (required), ``now`` (ISO 8601; default: now), ``user``, ``shard``
(``"i/n"``), ``dry_run``, ``force``, ``options``. Output: the run's ``period``,
``shard``, ``status``, ``users``, ``counts`` and ``error``. Nothing heavy happens at
import; under a server serving our store each run uses its store, elsewhere each run
opens one (with an embedding model only if the job needs one).
"""

# No ``from __future__ import annotations``: the state's TypedDicts are read by
# LangGraph at runtime, also when a server loads this file outside of sys.modules.
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict  # pydantic reads these on Python < 3.12

from langmem_layer import ConfigurationError
from langmem_layer.jobs import JOBS, Job, JobContext
from langmem_layer.jobs.runner import Shard, run

#: ``open_context(job, options)``: the context a run of ``job`` works in, closed after.
OpenContext = Callable[[Job, dict[str, Any]], AbstractContextManager[JobContext]]


class JobInput(TypedDict, total=False):
    """What to run (only ``job`` is required)."""

    job: str
    now: str | None
    user: str | None
    shard: str | None
    dry_run: bool
    force: bool
    options: dict[str, Any]


class JobOutput(TypedDict, total=False):
    """What the run did (see :class:`langmem_layer.jobs.runner.JobRun`)."""

    job: str
    period: str
    shard: str | None
    status: str
    users: int
    counts: dict[str, int]
    error: str | None


class JobState(JobInput, JobOutput, total=False):
    """Input and output together: the graph's state."""


@contextmanager
def _open_from_config(job: Job, options: dict[str, Any]) -> Any:
    from langmem_layer.config import open_store, settings_from_env

    with open_store(index="default" if job.embeds(options) else None) as store:
        yield JobContext(store, settings=settings_from_env())


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(
            f"now is an ISO 8601 time such as '2026-11-23T03:00:00+00:00'; got {text!r}."
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def build_job_graph(open_context: OpenContext | None = None) -> StateGraph:
    """A one-node graph running the job its input names.

    Args:
        open_context: Opens the context for a run (default: the store of
            ``langmem_layer.config``, settings from the environment).
    """
    opener = open_context or _open_from_config

    def run_job(state: JobState) -> JobOutput:
        name = state.get("job")
        if not name or name not in JOBS:
            raise ConfigurationError(
                f"Input 'job' names a job; got {name!r}. Jobs: {', '.join(sorted(JOBS))}.")
        job = JOBS[name]
        options = dict(state.get("options") or {})
        shard = state.get("shard")
        with opener(job, options) as ctx:
            done = run(ctx, job, now=_time(state.get("now")), user=state.get("user"),
                       shard=Shard.parse(shard) if shard else None,
                       dry_run=bool(state.get("dry_run")), force=bool(state.get("force")),
                       options=options)
        return {"job": done.job, "period": done.period, "shard": done.shard,
                "status": done.status, "users": done.users, "counts": done.counts,
                "error": done.error}

    builder = StateGraph(JobState, input_schema=JobInput, output_schema=JobOutput)
    builder.add_node("run_job", run_job)
    builder.add_edge(START, "run_job")
    builder.add_edge("run_job", END)
    return builder


@contextmanager
def _open_served(job: Job, options: dict[str, Any]) -> Any:
    from langmem_layer import serving

    served = serving.current()
    yield JobContext(served.sync_store, database_url=served.database_url,
                     settings=served.layer.settings)


def make_graph() -> CompiledStateGraph:
    """Graph factory for ``langgraph.json``: runs use the server's store when it serves
    ours (``"store"`` in ``langgraph.json``), else open one from the environment."""
    from langmem_layer import serving

    try:
        serving.current()
    except ConfigurationError:  # not under a server serving our store
        return build_job_graph().compile()
    return build_job_graph(_open_served).compile()
