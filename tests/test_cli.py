"""The langmem-layer command against the suite's database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langmem_layer import MemoryLayer
from langmem_layer.cli import main


def test_setup_export_import_sweep(pg_uri: str, store, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    assert main(["--database-url", pg_uri, "setup"]) == 0
    assert "applied migrations: none" in capsys.readouterr().out
    MemoryLayer(store, extraction="inline").remember("u1", "Name is Dana.")
    out = tmp_path / "u1.json"
    assert main(["--database-url", pg_uri, "export", "u1", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [i["value"]["content"] for i in data["items"]] == ["Name is Dana."]
    # Import into another user re-embeds with the default model: use the suite's fake one.
    monkeypatch.setattr("langmem_layer.embeddings.default_index", lambda: store.index_config)
    assert main(["--database-url", pg_uri, "import", "u2", str(out)]) == 0
    assert "imported 1 items" in capsys.readouterr().out
    assert store.search(("memories", "u2", "work"))[0].value["content"] == "Name is Dana."
    assert main(["--database-url", pg_uri, "sweep-ttl"]) == 0
    assert "deleted 0 expired items" in capsys.readouterr().out
    assert main(["--database-url", pg_uri, "purge-embedding-cache"]) == 0
    assert "deleted 0 stale cached embeddings" in capsys.readouterr().out


def test_worker_once_extracts_queued_turns(pg_uri: str, store, capsys, monkeypatch) -> None:
    from langchain_core.messages import HumanMessage

    from langmem_layer import MemorySettings

    queued = MemoryLayer(store, settings=MemorySettings(extract_every_n_turns=1000))
    queued.submit("u1", [HumanMessage("I live in Lisbon.", id="w1")], thread_id="t")
    monkeypatch.setattr("langmem_layer.embeddings.default_index", lambda: store.index_config)
    assert main(["--database-url", pg_uri, "worker", "--once"]) == 0
    assert "extracted 1 turns, 0 failed" in capsys.readouterr().out
    assert [r.record.content for r in queued.list("u1")] == ["Lives in Lisbon."]
