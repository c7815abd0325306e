"""The maintenance jobs as a LangGraph graph, for Studio and LangGraph server crons.

A thin adapter over ``langmem_layer.jobs.runs.run``: the same recorded,
once-per-period, resumable run as ``langmem-layer jobs run``. Its input names the
job; a LangGraph server cron triggers one, e.g.::

    await client.crons.create("jobs", schedule="0 3 * * *", input={"job": "sweep-ttl"})

Input: ``job`` (required), ``now`` (ISO 8601; default: now), ``user``, ``shard``
(``"i/n"``), ``dry_run``, ``force``, ``options``. Output: the run's ``period``,
``shard``, ``status``, ``users``, ``counts`` and ``error``.

A job acts on every user's memory (and ``now`` ages it, ``force`` repeats a period), so
under a server with authentication a run is an admin's: the server's ``auth`` handler
refuses a non-admin's run before it is created
(``langmem_layer.server.langgraph_auth.build_auth``), and the node itself refuses a run whose
caller the server authenticated without the admin permission, whatever path it took.
"""

# No ``from __future__ import annotations``: the state's TypedDicts are read by
# LangGraph at runtime, also when a server loads this module outside of sys.modules.
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict  # pydantic reads these on Python < 3.12

from langmem_layer.errors import AccessDeniedError, ConfigurationError
from langmem_layer.jobs.registry import JOBS, Job, JobContext
from langmem_layer.jobs.runs import Shard, run

__all__ = ["ADMIN_PERMISSION", "JobInput", "JobOutput", "JobState", "OpenContext",
           "build_job_graph", "require_admin_run"]

#: ``open_context(job, options)``: the context a run of ``job`` works in, closed after.
OpenContext = Callable[[Job, dict[str, Any]], AbstractContextManager[JobContext]]

#: The permission a LangGraph server's auth handler grants an admin key.
ADMIN_PERMISSION = "admin"


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
    """What the run did (see ``langmem_layer.jobs.runs.JobRun``)."""

    job: str
    period: str
    shard: str | None
    status: str
    users: int
    counts: dict[str, int]
    error: str | None


class JobState(JobInput, JobOutput, total=False):
    """Input and output together: the graph's state."""


def require_admin_run(config: Mapping[str, Any] | None) -> None:
    """Refuse a run whose caller a LangGraph server authenticated without admin rights.

    The server writes the authenticated caller into ``configurable``
    (``langgraph_auth_user_id``, ``langgraph_auth_permissions``; clients cannot set
    these keys). A run with no authenticated caller (called in process, or a server
    without an ``auth`` section) is not refused: whoever can call it owns the database.

    Raises:
        AccessDeniedError: 403, the caller is authenticated and not an admin.
    """
    configurable = (config or {}).get("configurable") or {}
    caller = configurable.get("langgraph_auth_user_id")
    if not caller:
        return
    if ADMIN_PERMISSION in (configurable.get("langgraph_auth_permissions") or ()):
        return
    raise AccessDeniedError(403, f"Jobs act on every user's memory: running one takes an "
                            f"admin key, and {caller!r} is not an admin (create one with "
                            "`langmem-layer keys create --user USER --admin`).")


@contextmanager
def _open_from_config(job: Job, options: dict[str, Any]) -> Any:
    from langmem_layer.environment import open_store, settings_from_env

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
            ``langmem_layer.environment``, settings from the environment).
    """
    opener = open_context or _open_from_config

    def run_job(state: JobState, config: RunnableConfig) -> JobOutput:
        require_admin_run(config)  # before anything is read or opened
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
