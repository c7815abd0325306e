"""What every benchmark shares: one percentile, one header and footer naming the machine,
the load average, the commit and the command, and the check that the machine is quiet;
and the set-up several make alike: a data directory, a fresh database in it, a corpus
of synthetic memories with their vectors precomputed.

A figure taken while the machine does other work measures the waiting, not the code: a
benchmark starts with ``header``, which waits (bounded) for the 1-minute load average
to fall below 1 and otherwise marks the run NOISY, and ends with ``footer``, which
prints the load average again. Compare against an anchor measured in the same run.
"""

from __future__ import annotations

import atexit
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from workload import CachedEmbeddings, HashEmbedder

__all__ = ["MAX_LOAD", "Log", "add_noise_option", "commit", "footer", "fresh_database",
           "hashed_corpus", "header", "load_average", "machine", "ms_ratio", "percentile",
           "quiet", "scratch_dir", "summary"]

ROOT = Path(__file__).resolve().parents[1]
#: The 1-minute load average above which a figure is noise on this 2-core machine.
MAX_LOAD = 1.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, NaN when there are none.

    One definition for every benchmark: NumPy's default (linear interpolation between
    the two nearest ranks), so "p95" is the same statistic in every script.
    """
    if len(values) == 0:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=float), q))


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50, p95, p99 and max of ``values`` (see ``percentile``)."""
    return {"p50": percentile(values, 50), "p95": percentile(values, 95),
            "p99": percentile(values, 99),
            "max": max(values) if len(values) else float("nan")}


def load_average() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages."""
    one, five, fifteen = os.getloadavg()
    return one, five, fifteen


def _load_text() -> str:
    return " ".join(f"{x:.2f}" for x in load_average())


def commit() -> str:
    """The checkout's short commit, ``+dirty`` when it has uncommitted changes (the
    results page and the fragments ``make bench`` rewrites after each benchmark,
    ``docs/benchmarks.md`` and ``docs/results/``, do not count: they are the suite's
    output, not what it measures)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                  ":(exclude)docs/benchmarks.md", ":(exclude)docs/results")
    return head + ("+dirty" if changed else "")


def machine() -> str:
    """Cores, memory and Python of this machine."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = "? GiB"
    return (f"{os.cpu_count()} cores, {memory}, Python {platform.python_version()}, "
            f"{platform.system()} {platform.machine()}")


def cpu() -> str:
    """The CPU's model and whether it computes in bfloat16 natively (Intel AMX, AVX-512
    BF16), from ``/proc/cpuinfo``: figures from CPUs that differ here are not comparable
    (one 2-core machine of a kind embeds twice as fast as another)."""
    name, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and name == (platform.processor() or
                                                           "unknown CPU"):
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        return f"{name} (flags unknown)"
    amx = "yes" if "amx_tile" in flags else "no"
    bf16 = "yes" if "avx512_bf16" in flags else "no"
    return f"{name}; AMX: {amx}; AVX-512 BF16: {bf16}"


def quiet(max_load: float = MAX_LOAD, wait_seconds: float = 600.0,
          poll_seconds: float = 10.0) -> bool:
    """Wait, at most ``wait_seconds``, for the 1-minute load average to fall below
    ``max_load``; whether it did."""
    deadline = time.monotonic() + wait_seconds
    while load_average()[0] >= max_load:
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_seconds)
    return True


def header(name: str, *, argv: Sequence[str] | None = None, wait_seconds: float = 600.0,
           allow_noisy: bool = False) -> bool:
    """Print the run's header (date, commit, machine, load average, command); wait for a
    quiet machine first. Returns whether the machine was quiet.

    Raises:
        SystemExit: The machine stayed busy and ``allow_noisy`` is False: nothing is
            measured (a figure taken then would be noise).
    """
    # A run that accepts noise does not wait for a quiet machine either.
    calm = quiet(wait_seconds=0.0 if allow_noisy else wait_seconds)
    command = " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv))
    print(f"{name}  {datetime.now(UTC).isoformat(timespec='seconds')}  commit {commit()}")
    print(f"  machine: {machine()}")
    print(f"  CPU: {cpu()}")
    print(f"  load average before: {_load_text()}"
          + ("" if calm else f"  NOISY: the 1-minute load is above {MAX_LOAD:g}"))
    print(f"  command: {command}", flush=True)
    atexit.register(footer)
    if not calm and not allow_noisy:
        raise SystemExit(f"{name}: the machine is busy (load average {_load_text()}); "
                         "nothing measured. Run it when nothing else runs, or pass "
                         "--allow-noisy to mark the figures NOISY.")
    return calm


def footer() -> None:
    """The load average after the run (a figure whose run ends busy is suspect too)."""
    one = load_average()[0]
    flag = "" if one < MAX_LOAD else "  (busy at the end: read the figures with care)"
    print(f"  load average after: {_load_text()}{flag}", flush=True)


class Log:
    """Progress lines on stderr, stamped with the time since the start."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the log was created."""
        return time.perf_counter() - self.t0

    def __call__(self, msg: str) -> None:
        print(f"[{self.elapsed():7.1f}s] {msg}", file=sys.stderr, flush=True)


def ms_ratio(ours: float, theirs: float) -> str:
    """``ours / theirs`` as ``1.23x`` (NaN-safe)."""
    if not theirs or math.isnan(ours) or math.isnan(theirs):
        return "n/a"
    return f"{ours / theirs:.2f}x"


def add_noise_option(parser: Any) -> None:
    """``--allow-noisy``: measure on a busy machine anyway, the figures marked NOISY."""
    parser.add_argument("--allow-noisy", action="store_true",
                        help="measure even when the 1-minute load average is above "
                        f"{MAX_LOAD:g} (the header marks the run NOISY)")


# -- set-up several benchmarks share -----------------------------------------------------


@contextmanager
def scratch_dir(given: str | None, prefix: str) -> Iterator[Path]:
    """The embedded server's directory: ``given`` (kept), else a temporary one named
    from ``prefix``, removed on exit."""
    data_dir = Path(given or tempfile.mkdtemp(prefix=prefix))
    try:
        yield data_dir
    finally:
        if not given:
            shutil.rmtree(data_dir, ignore_errors=True)


def fresh_database(data_dir: str | Path, name: str) -> str:
    """The URI of database ``name`` of the embedded server in ``data_dir``, dropped (if
    there) and created empty."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from langmem_layer.store.embedded import embedded_uri

    base = embedded_uri(data_dir)
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    return make_conninfo(base, dbname=name)


def hashed_corpus(seed: int, texts: int, queries: int, *, batch: int = 5000
                  ) -> tuple[list[str], list[str], HashEmbedder, CachedEmbeddings]:
    """``texts`` distinct synthetic memories and ``queries`` questions unlike any of them
    (``workload.TextGen(seed)``), the hash embedder, and embeddings that serve every one
    of their vectors precomputed (computed ``batch`` at a time), so no timed call embeds.
    """
    from workload import CachedEmbeddings, HashEmbedder, TextGen, embed_all

    gen = TextGen(seed=seed)
    memories = gen.unique(texts)
    questions = gen.unique(queries, exclude=set(memories))
    embedder = HashEmbedder()
    vectors = embed_all(embedder, memories + questions, "embed", batch=batch)
    embeddings = CachedEmbeddings(dict(zip(memories + questions, vectors, strict=True)),
                                  embedder, embedder.name)
    return memories, questions, embedder, embeddings
