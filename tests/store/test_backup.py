"""``langmem-layer backup`` and ``restore``: a round trip gives every user's export back
unchanged, a backup taken while turns are written restores, and nothing is lost on a
refused restore."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import ConfigurationError, MemoryLayer, PostgresMemoryStore
from langmem_layer.cli import main
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.store.backup import backup, restore
from tests.fakes import BagOfWordsEmbeddings

INDEX = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
USERS = ("ann", "ben", "cyd")


def _fill(layer: MemoryLayer) -> None:
    for user in USERS:
        layer.ingest(user, [HumanMessage(f"My name is {user.title()} and I live in Oslo.")],
                     thread_id="t1")
        layer.remember(user, f"{user} keeps a garden of tomatoes.")
        layer.admin.submit(user, [HumanMessage("I work at Initech.")], thread_id="t2")


def _exports(layer: MemoryLayer) -> dict[str, dict]:
    return {user: layer.export(user) for user in USERS}


@pytest.fixture
def filled(bare_uri: str) -> Iterator[MemoryLayer]:
    """Three users' memories, queued turns and messages on a database of the test's own."""
    with PostgresMemoryStore.from_conn_string(bare_uri, index=INDEX, pool_size=2) as store:
        store.setup()
        layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline")
        _fill(layer)
        yield layer
        layer.close()


def test_a_round_trip_gives_every_users_export_back(filled: MemoryLayer, bare_uri: str,
                                                    tmp_path: Path, capsys) -> None:
    before = _exports(filled)
    path = tmp_path / "memory.dump"
    assert main(["--database-url", bare_uri, "backup", str(path)]) == 0
    assert path.stat().st_size > 0
    filled.delete_user("ann")
    filled.remember("ben", "A memory written after the backup.")
    assert main(["--database-url", bare_uri, "restore", str(path)]) == 1  # needs --yes
    assert "--yes" in capsys.readouterr().err
    assert main(["--database-url", bare_uri, "restore", str(path), "--yes"]) == 0
    assert _exports(filled) == before


def test_a_backup_taken_while_turns_are_written_restores(filled: MemoryLayer, bare_uri: str,
                                                         tmp_path: Path) -> None:
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            filled.remember("cyd", f"Busy note number {n} about the garden.")
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        path = backup(bare_uri, tmp_path / "live.dump")
    finally:
        stop.set()
        writer.join()
    restore(bare_uri, path)
    # A consistent snapshot: every memory restored has its vector.
    with psycopg.connect(bare_uri) as conn:
        (orphans,) = conn.execute(
            "SELECT count(*) FROM langmem_items i WHERE i.is_memory AND NOT EXISTS "
            "(SELECT 1 FROM langmem_embeddings e WHERE e.user_id = i.user_id "
            "AND e.prefix = i.prefix AND e.key = i.key)").fetchone()
    assert orphans == 0
    assert filled.recall("ann", "Where do I live?")


def test_a_refused_restore_changes_nothing(filled: MemoryLayer, bare_uri: str,
                                           tmp_path: Path) -> None:
    before = _exports(filled)
    bad = tmp_path / "not-a-backup.dump"
    bad.write_text("this is not a backup")
    with pytest.raises(ConfigurationError, match="the restore failed"):
        restore(bare_uri, bad)
    with pytest.raises(ConfigurationError, match="no backup file"):
        restore(bare_uri, tmp_path / "missing.dump")
    assert _exports(filled) == before
