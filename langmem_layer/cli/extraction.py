"""The extraction worker from the shell: ``langmem-layer worker``, the process a
deployment runs beside its app (or several, sharing the queue and the job schedule).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from langmem_layer.cli.commands import (
    PROG,
    Command,
    Failure,
    always,
    iso_time,
    positive,
    shard,
)
from langmem_layer.jobs import JOBS, Job, JobContext
from langmem_layer.jobs.runs import run_due

__all__ = ["COMMANDS"]


def _work_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true",
                        help="one pass: ready entries, then the jobs due")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between polls")
    parser.add_argument("--jobs", type=_job_names, default=None, metavar="NAME,...",
                        help="run only these scheduled jobs (default: every scheduled job)")
    parser.add_argument("--no-jobs", action="store_true",
                        help="only extract; run no scheduled job")
    parser.add_argument("--shard", type=shard, default=None, metavar="I/N",
                        help="pin this worker to one shard of users for per-user jobs")
    parser.add_argument("--shards", type=positive, default=1, metavar="N",
                        help="split per-user jobs into N shards that the workers share, "
                        "each taking the next free one (every worker: the same N)")
    parser.add_argument("--now", type=iso_time, default=None,
                        help="run the pass as if at this ISO 8601 time (with --once)")
    parser.add_argument("--metrics-port", type=positive, default=None, metavar="PORT",
                        help="serve Prometheus metrics on this port (the HTTP app's "
                        "names: backlog, jobs, turns extracted and failed)")
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="the interface the metrics listen on (default: loopback)")


def _job_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _job_failed(job: Job, error: Exception) -> None:
    # The worker goes on: the failed run keeps its cursor and is resumed next pass.
    print(f"{PROG}: job {job.name} failed: {type(error).__name__}: {error}",
          file=sys.stderr, flush=True)


def _work(args: argparse.Namespace, ctx: JobContext | None) -> int:
    """Run the ``extract`` job and the scheduled jobs that are due, then poll; Ctrl-C
    stops after the current pass.

    Every worker runs the schedule: a period's run is claimed by one of them (see
    ``langmem_layer.jobs.runs``), the others skip it.
    """
    assert ctx is not None
    metrics = _worker_metrics(args)
    try:
        while True:
            result = JOBS["extract"].run(ctx)
            if metrics is not None:
                from langmem_layer.server.metrics import collect_sync

                metrics.extracted.inc(result.counts.get("extracted", 0))
                metrics.failed.inc(result.failed)
                collect_sync(metrics, ctx.store)
            if result.counts["extracted"] or result.failed:
                print(result.summary(), flush=True)
            if not args.no_jobs:
                for run in run_due(ctx, now=args.now, jobs=args.jobs, shard=args.shard,
                                   shards=args.shards, on_error=_job_failed):
                    print(run.summary(), flush=True)
            if args.once:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def _worker_metrics(args: argparse.Namespace) -> Any:
    """With ``--metrics-port``: the worker's Prometheus metrics, served on loopback (or
    ``--metrics-host``) at ``/metrics``; None without."""
    if args.metrics_port is None:
        return None
    try:
        from prometheus_client import start_http_server

        from langmem_layer.server.metrics import Metrics
    except ImportError as e:
        raise Failure("--metrics-port needs the server extra: "
                      f"pip install 'langmem-layer[server]' ({e})") from None
    metrics = Metrics()
    start_http_server(args.metrics_port, addr=args.metrics_host, registry=metrics.registry)
    print(f"metrics at http://{args.metrics_host}:{args.metrics_port}/metrics", flush=True)
    return metrics


#: The worker command, merged into ``langmem_layer.cli.main.COMMANDS``.
COMMANDS: dict[str, Command] = {
    "worker": Command("extract queued turns and run the scheduled jobs as they fall due "
                      "(until interrupted)", _work_arguments, _work, always),
}
