"""What a new user meets: searches they can trust on every surface, a command line
that takes what they type, and data that stays where they put it.

* A superseded memory never ranks above the memory that replaced it (REST, CLI,
  ``recall``, the tools); a query that matches nothing returns nothing.
* ``remember USER -`` and ``--file`` read a long or multi-line text; ``--limit -5`` is
  refused in the command line's words; ``list --all`` shows each memory's status;
  ``get`` says ``profile`` as the REST API does.
* A read-only command pointed at a directory without a database creates nothing; the
  default data directory does not depend on the working directory.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import DatabaseNotFoundError, Kind, MemoryLayer, PostgresMemoryStore
from langmem_layer.cli import main
from langmem_layer.environment import data_dir, database_url
from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.facade.tools import create_memory_tools
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import create_key
from langmem_layer.store.embedded import default_data_dir
from tests.fakes import BagOfWordsEmbeddings, Clock
from tests.http_server import serve

ROOT = Path(__file__).resolve().parents[2]


def _moved_jobs(layer: MemoryLayer, user: str) -> None:
    """The user works at Acme Robotics, then says they work at Globex now."""
    layer.ingest(user, [HumanMessage("I work at Acme Robotics and I live in Lisbon.")],
                 thread_id="t1")
    layer.ingest(user, [HumanMessage("Actually, I work at Globex now, not Acme Robotics.")],
                 thread_id="t1")


@pytest.fixture
def layer(store: PostgresMemoryStore, clock: Clock) -> MemoryLayer:
    return MemoryLayer(store, extractor=RuleExtractor(), extraction="inline", clock=clock)


def test_a_superseded_memory_ranks_below_its_replacement_in_a_search(
        layer: MemoryLayer) -> None:
    _moved_jobs(layer, "sup")
    found = layer.admin.browse("sup", query="where do I work")  # every status: the panel's view
    contents = [r.content for r in found]
    assert contents.index("Works at Globex.") < contents.index("Works at Acme Robotics.")
    assert found[contents.index("Works at Acme Robotics.")].status.value == "contradicted"
    # recall, the tools and the CLI search see the current memory only.
    assert [r.content for r in layer.recall("sup", "where do I work", matching=True)] == [
        "Works at Globex."]


def test_a_query_that_matches_nothing_finds_nothing(layer: MemoryLayer) -> None:
    _moved_jobs(layer, "zq")
    layer.remember("zq", "Remind me to call the dentist tomorrow.", kind=Kind.OPEN_LOOP,
                   due_at=layer.now())  # due now: the block takes it whatever the question
    assert layer.admin.browse("zq", query="zebra quantum bicycle") == []
    assert layer.recall("zq", "zebra quantum bicycle", matching=True) == []
    recall = next(t for t in create_memory_tools(layer) if t.name == "recall")
    said = recall.invoke({"query": "zebra quantum bicycle"},
                         {"configurable": {"user_id": "zq"}})
    assert said == "No memories found."
    # The block's retrieval still brings the due reminder unasked.
    assert any("dentist" in r.content for r in layer.recall("zq", "zebra quantum bicycle"))


@pytest.fixture(scope="module")
def http(pg_uri: str) -> Iterator[tuple[httpx.Client, PostgresMemoryStore]]:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, pool_size=4) as store, \
            serve(create_app(store=store, agent=False)) as url, \
            httpx.Client(base_url=url, timeout=30) as client:
        yield client, store


def test_rest_search_puts_history_after_what_is_current(http) -> None:
    client, store = http
    user = f"rest-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {create_key(store, user)}"}
    _moved_jobs(MemoryLayer(store, extractor=RuleExtractor(), extraction="inline"), user)
    page = client.get("/v1/memories", params={"q": "where do I work"}, headers=headers).json()
    contents = [m["content"] for m in page["items"]]
    assert contents.index("Works at Globex.") < contents.index("Works at Acme Robotics.")
    page = client.get("/v1/memories", params={"q": "zebra quantum bicycle"},
                      headers=headers).json()
    assert page["items"] == []


def _cli(pg_uri: str, *args: str, stdin: str | None = None,
         capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["--database-url", pg_uri, *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_remember_reads_standard_input_and_a_file(store, pg_uri: str, tmp_path: Path,
                                                  capsys, monkeypatch) -> None:
    note = "Line one of a long note.\nLine two: the garden gate sticks.\n"
    code, said = _cli(pg_uri, "remember", "cli-in", "-", "--no-embeddings", stdin=note,
                      capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, said
    (tmp_path / "note.txt").write_text("From a file: the shed key is under the pot.")
    code, said = _cli(pg_uri, "remember", "cli-in", "--file", str(tmp_path / "note.txt"),
                      "--no-embeddings", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 0, said
    code, said = _cli(pg_uri, "list", "cli-in", "--json", capsys=capsys,
                      monkeypatch=monkeypatch)
    contents = {row["content"] for row in json.loads(said)}
    assert note.strip() in contents and "From a file: the shed key is under the pot." in contents
    assert {row["profile"] for row in json.loads(said)} == {"work"}  # as REST names it
    code, said = _cli(pg_uri, "remember", "cli-in", capsys=capsys, monkeypatch=monkeypatch)
    assert code == 1 and "TEXT" in said


def test_limit_is_checked_in_the_command_lines_words(store, pg_uri: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--database-url", pg_uri, "list", "carol", "--limit", "-5"])
    err = capsys.readouterr().err
    assert "at least 1" in err and "None" not in err


def test_list_all_shows_each_status(layer: MemoryLayer, pg_uri: str, capsys) -> None:
    _moved_jobs(layer, "cli-all")
    assert main(["--database-url", pg_uri, "list", "cli-all", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("contradicted" in line and "Acme" in line for line in lines)
    assert any(" active " in line and "Globex" in line for line in lines)


def test_get_says_profile(layer: MemoryLayer, pg_uri: str, capsys) -> None:
    found = layer.remember("cli-get", "Keeps bees in the garden.")
    assert main(["--database-url", pg_uri, "get", "cli-get", found.key]) == 0
    out = capsys.readouterr().out
    assert "profile" in out and "scope" not in out


def test_a_read_only_command_creates_no_database(tmp_path: Path) -> None:
    typo = tmp_path / "nonexistent" / "x"
    for command in (["list", "carol"], ["get", "carol", "id"], ["search", "carol", "q"],
                    ["export", "carol"], ["jobs", "status"], ["keys", "list", "--user", "c"]):
        done = subprocess.run(
            [sys.executable, "-m", "langmem_layer.cli", "--data-dir", str(typo), *command],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert done.returncode == 1, done.stderr
        assert f"There is no memory database in {typo}" in done.stderr
        assert "Traceback" not in done.stderr
        assert not (tmp_path / "nonexistent").exists()
    with pytest.raises(DatabaseNotFoundError):
        database_url(data_dir=typo, create=False)
    assert not (tmp_path / "nonexistent").exists()


def test_the_default_data_directory_is_the_users_not_the_working_directorys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("LANGMEM_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert data_dir() == default_data_dir()
    assert default_data_dir().is_absolute()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert data_dir() == default_data_dir()  # the same memory from any directory
    # A database an earlier version made in the working directory is still used, said.
    (tmp_path / "elsewhere" / ".langmem").mkdir()
    (tmp_path / "elsewhere" / ".langmem" / "PG_VERSION").write_text("18\n")
    assert data_dir() == tmp_path / "elsewhere" / ".langmem"
    monkeypatch.setenv("LANGMEM_DATA_DIR", "relative/dir")
    assert data_dir() == tmp_path / "elsewhere" / "relative" / "dir"  # always absolute


def test_recalled_reads_like_the_memory(layer: MemoryLayer) -> None:
    found = layer.remember("rc", "Keeps bees in the garden.")
    assert found.content == found.record.content == "Keeps bees in the garden."
    assert found.kind == found.record.kind and found.profile == "work"
    assert found.status.value == "active"


@pytest.mark.parametrize("said, kept", [
    ("I play the cello on Sundays.", "Plays the cello on Sundays."),
    ("I go running every morning.", "Goes running every morning."),
    ("I do yoga twice a week.", "Does yoga twice a week."),
])
def test_the_offline_extractor_catches_hobbies_and_routines(layer: MemoryLayer, said: str,
                                                           kept: str) -> None:
    result = layer.ingest("hobby", [HumanMessage(said)])
    assert [layer.get("hobby", k).content for k in result.written] == [kept]


@pytest.mark.parametrize("said", ["I went running yesterday.", "I play a role in this.",
                                  "I called her every day last week."])
def test_routines_need_a_routine(layer: MemoryLayer, said: str) -> None:
    assert layer.ingest("hobby-no", [HumanMessage(said)]).written == []


class LoadingEmbeddings(BagOfWordsEmbeddings):
    """A local model stand-in that records when it was loaded."""

    loaded = False

    def load(self) -> None:
        self.loaded = True


def test_the_app_loads_the_embedding_model_before_it_serves(pg_uri: str) -> None:
    from fastapi.testclient import TestClient

    embed = LoadingEmbeddings(dims=64)
    index = {"embed": embed, "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index) as store:
        app = create_app(store=store, agent=False)
        assert not embed.loaded
        with TestClient(app) as client:
            assert embed.loaded  # before the first request
            assert client.get("/healthz").status_code == 200


def test_a_named_speaker_is_the_subject_of_what_they_said(layer: MemoryLayer) -> None:
    result = layer.ingest("chat", [
        HumanMessage("I live in Lisbon.", name="Caroline", id="c1"),
        HumanMessage("I work at Initech.", name="Melanie", id="m1")])
    subjects = {layer.get("chat", k).content: layer.get("chat", k).record.subject
                for k in result.written}
    assert subjects == {"Lives in Lisbon.": "Caroline", "Works at Initech.": "Melanie"}
    plain = layer.ingest("chat2", [HumanMessage("I live in Porto.")])
    assert layer.get("chat2", plain.written[0]).record.subject == "user"
