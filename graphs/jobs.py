"""The maintenance jobs graph for ``langgraph.json`` (see ``langmem_layer.jobs.graph``).

Runs use the server's store when it serves ours (``"store"`` in ``langgraph.json``),
else open one from the environment. Only admins may run it under a server with auth.
Nothing heavy happens at import.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langgraph.graph.state import CompiledStateGraph

from langmem_layer import ConfigurationError
from langmem_layer.jobs import Job, JobContext
from langmem_layer.jobs.graph import build_job_graph
from langmem_layer.server import served as serving

__all__ = ["build_job_graph", "make_graph"]


@contextmanager
def _open_served(job: Job, options: dict[str, Any]) -> Iterator[JobContext]:
    served = serving.current()
    yield JobContext(served.sync_store, database_url=served.database_url,
                     settings=served.layer.settings)


def make_graph() -> CompiledStateGraph:
    """Graph factory for ``langgraph.json``."""
    try:
        serving.current()
    except ConfigurationError:  # not under a server serving our store
        return build_job_graph().compile()
    return build_job_graph(_open_served).compile()
