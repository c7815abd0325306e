"""Periodic maintenance jobs, registered by name in :data:`JOBS`.

Run one from code::

    from langmem_layer.jobs import JOBS, JobContext

    with open_store(index=None) as store:
        print(JOBS["sweep-ttl"].run(JobContext(store)).summary())

or from the command line: ``langmem-layer jobs list`` / ``langmem-layer jobs run NAME``.
"""

# Imported for their side effect: each module registers its jobs.
from langmem_layer.jobs import flows, lifecycle, maintenance, reextract  # noqa: F401
from langmem_layer.jobs.registry import JOBS, Job, JobContext, JobOption, JobResult, register

__all__ = ["JOBS", "Job", "JobContext", "JobOption", "JobResult", "register"]
