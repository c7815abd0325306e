"""Periodic maintenance jobs, registered by name in ``JOBS``.

Run one from code::

    from langmem_layer.jobs import JOBS, JobContext

    with open_store(index=None) as store:
        print(JOBS["sweep-ttl"].run(JobContext(store)).summary())

or, recorded once per period (resumable, sharded), through the runner::

    from langmem_layer.jobs import run
    print(run(JobContext(store), "sweep-ttl").summary())

or from the command line: ``langmem-layer jobs list`` / ``jobs run NAME`` /
``jobs status``; ``langmem-layer worker`` runs the scheduled ones as they fall due.
"""

# Imported for their side effect: each module registers its jobs.
from langmem_layer.jobs import (  # noqa: F401
    consolidate,
    context_vectors,
    flows,
    lifecycle_jobs,
    procedural_profile,
    reextract,
    reflect,
    store_jobs,
    temporal_summaries,
)
from langmem_layer.jobs.registry import JOBS, Job, JobContext, JobOption, JobResult, register
from langmem_layer.jobs.runs import JobRun, Shard, run, run_due
from langmem_layer.jobs.status import JobStatus, status

__all__ = ["JOBS", "Job", "JobContext", "JobOption", "JobResult", "JobRun", "JobStatus", "Shard",
           "register", "run", "run_due", "status"]
