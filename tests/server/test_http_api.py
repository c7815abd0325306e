"""The memory REST API against a real uvicorn server on loopback and the real database:
every route, its error statuses, and that no route lets one user reach another's memory."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from langchain_core.messages import HumanMessage

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import create_key
from tests.fakes import BagOfWordsEmbeddings
from tests.http_server import serve

LIMIT = 64 * 1024  # the test server's body limit


class Server:
    def __init__(self, url: str, store: PostgresMemoryStore, pg_uri: str) -> None:
        self.url, self.store, self.pg_uri = url, store, pg_uri
        self.http = httpx.Client(base_url=url, timeout=30)

    def user(self, admin: bool = False) -> tuple[str, dict[str, str]]:
        """A fresh user and the headers of its key."""
        user = f"u-{uuid.uuid4().hex[:10]}"
        return user, {"Authorization": f"Bearer {create_key(self.store, user, admin=admin)}"}

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.pg_uri) as conn:
            return conn.execute(sql, params).fetchall()


@pytest.fixture(scope="module")
def server(pg_uri: str) -> Iterator[Server]:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, pool_size=4) as store:
        app = create_app(store=store, max_body_bytes=LIMIT)
        with serve(app) as url:
            s = Server(url, store, pg_uri)
            yield s
            s.http.close()


def _new(s: Server, headers: dict[str, str], content: str, **extra: Any) -> dict[str, Any]:
    r = s.http.post("/v1/memories", json={"content": content, **extra}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def _problem(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["type"]
    return body


# -- authentication ---------------------------------------------------------------------


def test_no_or_bad_credentials_are_401(server: Server) -> None:
    for headers in ({}, {"Authorization": "Bearer nonsense"},
                    {"Authorization": "Basic dXNlcjpwdw=="},
                    {"Authorization": "Bearer lmk_YWxpY2U_" + "0" * 64}):
        r = server.http.get("/v1/me", headers=headers)
        _problem(r, 401)
        assert r.headers["www-authenticate"] == "Bearer"
    user, headers = server.user()
    assert server.http.get("/v1/me", headers=headers).json() == {"user_id": user,
                                                                 "admin": False}


def test_revoked_key_is_401(server: Server) -> None:
    from langmem_layer.server.keys import revoke_key

    _, headers = server.user()
    assert server.http.get("/v1/me", headers=headers).status_code == 200
    assert revoke_key(server.store, headers["Authorization"].split()[1])
    _problem(server.http.get("/v1/me", headers=headers), 401)


def test_every_route_needs_credentials(server: Server) -> None:
    for method, path in [("GET", "/v1/memories"), ("POST", "/v1/memories"),
                         ("GET", "/v1/memories/x"), ("PATCH", "/v1/memories/x"),
                         ("POST", "/v1/memories/x/correct"), ("POST", "/v1/memories/x/pin"),
                         ("POST", "/v1/memories/x/unpin"), ("DELETE", "/v1/memories/x"),
                         ("GET", "/v1/memories/x/history"), ("GET", "/v1/memories/x/why"),
                         ("GET", "/v1/decisions"),
                         ("GET", "/v1/export"), ("POST", "/v1/import"), ("GET", "/v1/jobs"),
                         ("GET", "/v1/me")]:
        r = server.http.request(method, path, json={})
        assert r.status_code == 401, (method, path, r.text)


# -- the routes -------------------------------------------------------------------------


def test_create_list_get_correct_history(server: Server) -> None:
    user, h = server.user()
    a = _new(server, h, "Allergic to penicillin.", kind="profile_fact")
    b = _new(server, h, "Plans to visit Porto in May.", kind="open_loop", profile="travel")
    assert a["kind"] == "profile_fact" and a["layer"] == "semantic" and a["status"] == "active"
    page = server.http.get("/v1/memories", headers=h).json()
    assert {m["id"] for m in page["items"]} == {a["id"], b["id"]}
    assert page["next_offset"] is None
    assert server.http.get(f"/v1/memories/{a['id']}", headers=h).json() == a

    r = server.http.post(f"/v1/memories/{a['id']}/correct", headers=h,
                         json={"content": "Allergic to amoxicillin."})
    assert r.status_code == 200 and r.json()["content"] == "Allergic to amoxicillin."
    hist = server.http.get(f"/v1/memories/{a['id']}/history", headers=h).json()
    assert hist[-1]["event"] == "content" and hist[-1]["old"] == "Allergic to penicillin."
    # Re-embedded at once: the stored vector is the new text's.
    vec = server.rows("SELECT embedding::text FROM langmem_embeddings WHERE user_id = %s "
                      "AND key = %s", user, a["id"])
    expected = BagOfWordsEmbeddings(64).embed_query("Allergic to amoxicillin.")
    assert json.loads(vec[0][0]) == pytest.approx(expected, abs=1e-6)


def test_filters_search_and_paging(server: Server) -> None:
    _, h = server.user()
    fact = _new(server, h, "Lives in Lisbon near the river.", kind="profile_fact")
    loop = _new(server, h, "Will call the dentist on Friday.", kind="open_loop",
                profile="errands")
    pref = _new(server, h, "Prefers tea over coffee.", kind="preference")
    server.http.delete(f"/v1/memories/{pref['id']}", headers=h)

    def ids(**params: Any) -> list[str]:
        r = server.http.get("/v1/memories", params=params, headers=h)
        assert r.status_code == 200, r.text
        return [m["id"] for m in r.json()["items"]]

    assert set(ids()) == {fact["id"], loop["id"], pref["id"]}
    assert ids(kind="open_loop") == [loop["id"]]
    assert set(ids(kind=["open_loop", "profile_fact"])) == {fact["id"], loop["id"]}
    assert ids(layer="semantic", status="active") == [fact["id"]]
    assert ids(status="archived") == [pref["id"]]
    assert ids(profile="errands") == [loop["id"]]
    assert ids(q="Lisbon river") == [fact["id"]]  # only what matches
    assert ids(q="astronomy") == []
    first = server.http.get("/v1/memories", params={"limit": 2}, headers=h).json()
    assert len(first["items"]) == 2 and first["next_offset"] == 2
    rest = server.http.get("/v1/memories", params={"limit": 2, "offset": 2}, headers=h).json()
    assert len(rest["items"]) == 1 and rest["next_offset"] is None
    assert {m["id"] for m in first["items"] + rest["items"]} == set(ids())
    for bad in ({"kind": "bogus"}, {"limit": 0}, {"offset": -1}, {"status": "gone"}):
        _problem(server.http.get("/v1/memories", params=bad, headers=h), 422)


def test_pin_unpin_policy(server: Server) -> None:
    _, h = server.user()
    m = _new(server, h, "Does not like talking about the divorce.")
    url = f"/v1/memories/{m['id']}"
    assert server.http.post(url + "/pin", headers=h).json()["pinned"] is True
    assert server.http.get(url, headers=h).json()["pinned"] is True
    assert server.http.post(url + "/unpin", headers=h).json()["pinned"] is False
    r = server.http.patch(url, json={"policy": "avoid", "pinned": True}, headers=h)
    assert r.status_code == 200 and (r.json()["policy"], r.json()["pinned"]) == ("avoid", True)
    events = [e["event"] for e in server.http.get(url + "/history", headers=h).json()]
    assert events == ["pinned", "pinned", "pinned", "policy"]
    _problem(server.http.patch(url, json={}, headers=h), 422)  # nothing to change
    _problem(server.http.patch(url, json={"policy": "shout"}, headers=h), 422)
    _problem(server.http.patch(url, json={"color": "red"}, headers=h), 422)


def test_delete_archives_then_hard_deletes_everything(server: Server) -> None:
    user, h = server.user()
    m = _new(server, h, "Secret street 12.")
    url = f"/v1/memories/{m['id']}"
    r = server.http.delete(url, headers=h)
    assert r.json() == {"id": m["id"], "hard": False}
    assert server.http.get(url, headers=h).json()["status"] == "archived"
    assert server.http.delete(url, params={"hard": "true"}, headers=h).json()["hard"] is True
    _problem(server.http.get(url, headers=h), 404)
    for table in ("langmem_items", "langmem_embeddings", "langmem_links"):
        assert server.rows(f"SELECT count(*) FROM {table} WHERE user_id = %s", user) == [(0,)]
    assert server.rows("SELECT count(*) FROM langmem_embedding_cache WHERE user_id = %s",
                       user) == [(0,)]


def test_unknown_ids_are_404_on_every_route(server: Server) -> None:
    _, h = server.user()
    for method, path, body in [
        ("GET", "", None), ("PATCH", "", {"pinned": True}), ("DELETE", "", None),
        ("POST", "/correct", {"content": "x"}), ("POST", "/pin", None),
        ("POST", "/unpin", None), ("GET", "/history", None), ("GET", "/why", None),
    ]:
        r = server.http.request(method, f"/v1/memories/nope{path}", json=body, headers=h)
        assert _problem(r, 404)["detail"] == "No such memory.", (method, path)
    _problem(server.http.delete("/v1/memories/nope", params={"hard": "true"}, headers=h), 404)


def test_validation_errors_are_problems(server: Server) -> None:
    _, h = server.user()
    m = _new(server, h, "Has a cat named Miso.")
    body = _problem(server.http.post(f"/v1/memories/{m['id']}/correct", json={"content": ""},
                                     headers=h), 422)
    assert body["detail"].startswith("Memory content is empty")  # the library's one rule
    body = _problem(server.http.post("/v1/memories", json={"content": "hi"}, headers=h), 422)
    assert "too short" in body["detail"] and "min_content_chars" in body["detail"]
    _problem(server.http.post("/v1/memories", json={"content": 42}, headers=h), 422)
    _problem(server.http.post(f"/v1/memories/{m['id']}/correct", json={"content": "a\x00b"},
                              headers=h), 422)
    _problem(server.http.post("/v1/memories", content=b"{not json",
                              headers={**h, "Content-Type": "application/json"}), 422)
    _problem(server.http.post("/v1/memories", json={"content": "x", "kind": "nope"},
                              headers=h), 422)


def test_decisions(server: Server) -> None:
    user, h = server.user()
    layer = MemoryLayer(server.store, extraction="inline")
    layer.ingest(user, [HumanMessage("I am allergic to penicillin.", id="d1")], thread_id="t1")
    found = server.http.get("/v1/decisions", headers=h).json()
    assert found and found[0]["thread_id"] == "t1" and found[0]["decisions"]
    assert server.http.get("/v1/decisions", params={"thread_id": "other"},
                           headers=h).json() == []
    _problem(server.http.get("/v1/decisions", params={"limit": 0}, headers=h), 422)


def test_why_a_memory_exists(server: Server) -> None:
    user, h = server.user()
    layer = MemoryLayer(server.store, extraction="inline")
    layer.ingest(user, [HumanMessage("I am allergic to penicillin.", id="w1")],
                 thread_id="why-1")
    layer.ingest(user, [HumanMessage("I live in Lisbon.", id="w2")], thread_id="why-2")
    page = server.http.get("/v1/memories", params={"q": "penicillin"}, headers=h).json()
    memory = page["items"][0]
    why = server.http.get(f"/v1/memories/{memory['id']}/why", headers=h).json()
    assert why["memory"]["id"] == memory["id"]
    assert why["source"]["text"] == "I am allergic to penicillin."
    assert why["source"]["thread_id"] == "why-1"
    (admitted,) = why["decisions"]
    assert admitted["accepted"] is True and admitted["op"] == "add"
    assert admitted["thread_id"] == "why-1" and admitted["reason"]
    assert why["history"] == []
    # After a correction its admission is still found (by the text it had), and the
    # correction is in its history.
    server.http.post(f"/v1/memories/{memory['id']}/correct", headers=h,
                     json={"content": "Allergic to amoxicillin."})
    why = server.http.get(f"/v1/memories/{memory['id']}/why", headers=h).json()
    assert [d["log_id"] for d in why["decisions"]] == [admitted["log_id"]]
    assert [(e["event"], e["old"]) for e in why["history"]] == [
        ("content", memory["content"])]
    # Written directly: no source text, no decision.
    direct = _new(server, h, "Has a cat named Miso.")
    why = server.http.get(f"/v1/memories/{direct['id']}/why", headers=h).json()
    assert why["decisions"] == [] and why["source"]["text"] is None


def test_jobs_status_is_for_admins(server: Server) -> None:
    _, h = server.user()
    _problem(server.http.get("/v1/jobs", headers=h), 403)
    _, admin = server.user(admin=True)
    jobs = server.http.get("/v1/jobs", headers=admin).json()
    assert {j["job"] for j in jobs} >= {"extract", "sweep-ttl"}


# -- export and import ------------------------------------------------------------------


def test_export_then_import_json_and_multipart(server: Server) -> None:
    user, h = server.user()
    _new(server, h, "Speaks Portuguese.", kind="profile_fact")
    _new(server, h, "Runs on Sundays.", kind="preference")
    r = server.http.get("/v1/export", headers=h)
    assert r.status_code == 200
    assert r.headers["content-disposition"] == (
        f'attachment; filename="langmem-export-{user}.json"')
    data = r.json()
    assert data["format"] == "langmem_layer.export/1" and len(data["items"]) == 2

    _, h2 = server.user()
    r = server.http.post("/v1/import", json=data, headers=h2)
    assert r.status_code == 200 and r.json() == {"imported": 2}
    _, h3 = server.user()
    r = server.http.post("/v1/import", files={"file": ("e.json", json.dumps(data),
                                                       "application/json")}, headers=h3)
    assert r.status_code == 200 and r.json() == {"imported": 2}
    contents = {m["content"] for m in
                server.http.get("/v1/memories", headers=h3).json()["items"]}
    assert contents == {"Speaks Portuguese.", "Runs on Sundays."}


def test_malformed_imports_are_refused_and_write_nothing(server: Server) -> None:
    user, h = server.user()
    good = {"format": "langmem_layer.export/1", "user_id": "x", "items": [], "links": []}
    bad_item = {**good, "items": [
        {"namespace": ["memories", "x", "work"], "key": "k1", "value": {"content": "a"},
         "is_memory": True, "created_at": "2026-01-01T00:00:00+00:00",
         "updated_at": "2026-01-01T00:00:00+00:00"},
        {"namespace": ["memories", "x", "work"], "key": "k2", "value": "not an object"}]}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"content": b"{nope", "headers": {"Content-Type": "application/json"}},
         "not valid JSON"),
        ({"json": [1, 2]}, "expected a JSON object"),
        ({"json": {"format": "something/else"}}, "Not a langmem_layer export"),
        ({"json": bad_item}, "item 1 (k2) has no value"),
        ({"files": {"file": ("e.json", b"\xff\xfe", "application/json")}}, "not valid JSON"),
        ({"files": {"other": ("e.json", b"{}", "application/json")}}, "no 'file' field"),
    ]
    for kwargs, reason in cases:
        headers = {**h, **kwargs.pop("headers", {})}
        r = server.http.post("/v1/import", headers=headers, **kwargs)
        assert reason in _problem(r, 422)["detail"], (reason, r.text)
    _problem(server.http.post("/v1/import", content=b"x",
                              headers={**h, "Content-Type": "text/plain"}), 415)
    assert server.rows("SELECT count(*) FROM langmem_items WHERE user_id = %s", user) == [(0,)]


def test_body_limit_is_413(server: Server) -> None:
    _, h = server.user()
    big = {"format": "langmem_layer.export/1", "items": [], "pad": "x" * LIMIT}
    _problem(server.http.post("/v1/import", json=big, headers=h), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"format": "langmem_layer.export/1", "pad": "'
        for _ in range(LIMIT // 1024 + 2):
            yield b"x" * 1024
        yield b'"}'

    r = server.http.post("/v1/import", content=chunks(),
                         headers={**h, "Content-Type": "application/json"})
    _problem(r, 413)


# -- isolation and admins ---------------------------------------------------------------


def test_no_route_reaches_another_users_memory(server: Server) -> None:
    alice, ha = server.user()
    _, hb = server.user()
    m = _new(server, ha, "Alice's PIN is 4321.", kind="profile_fact")
    url = f"/v1/memories/{m['id']}"
    before = server.http.get("/v1/export", headers=ha).json()
    for method, path, body in [
        ("GET", "", None), ("PATCH", "", {"pinned": True}), ("PATCH", "", {"policy": "avoid"}),
        ("POST", "/correct", {"content": "hacked"}), ("POST", "/pin", None),
        ("POST", "/unpin", None), ("GET", "/history", None), ("GET", "/why", None),
        ("DELETE", "", None),
    ]:
        r = server.http.request(method, url + path, json=body, headers=hb)
        assert _problem(r, 404)["detail"] == "No such memory.", (method, path)
    _problem(server.http.delete(url, params={"hard": "true"}, headers=hb), 404)
    # Another user's id answers as one that never existed.
    missing = server.http.get("/v1/memories/never-existed", headers=hb)
    assert missing.json() == server.http.get(url, headers=hb).json()
    # Naming Alice is forbidden to Bob, on every route.
    for method, path in [("GET", "/v1/memories"), ("GET", url), ("GET", "/v1/export"),
                         ("GET", "/v1/decisions"), ("DELETE", url)]:
        r = server.http.request(method, path, params={"user_id": alice}, headers=hb)
        _problem(r, 403)
    r = server.http.post("/v1/import", params={"user_id": alice}, json=before, headers=hb)
    _problem(r, 403)
    # Bob's own views hold nothing of Alice's.
    assert server.http.get("/v1/memories", headers=hb).json()["items"] == []
    assert server.http.get("/v1/memories", params={"q": "PIN 4321"},
                           headers=hb).json()["items"] == []
    assert server.http.get("/v1/export", headers=hb).json()["items"] == []
    # Alice's memory is untouched, in the API and in the database.
    assert server.http.get("/v1/export", headers=ha).json() == before
    assert server.rows("SELECT value->>'content', value->>'status', value->>'pinned' "
                       "FROM langmem_items WHERE user_id = %s AND key = %s", alice,
                       m["id"]) == [("Alice's PIN is 4321.", "active", "false")]


def test_admin_acts_on_another_user(server: Server) -> None:
    alice, ha = server.user()
    admin, hadm = server.user(admin=True)
    m = _new(server, ha, "Works at the harbour.")
    me = server.http.get("/v1/me", params={"user_id": alice}, headers=hadm).json()
    assert me == {"user_id": alice, "admin": True}
    assert server.http.get("/v1/me", headers=hadm).json() == {"user_id": admin, "admin": True}
    as_alice = {"user_id": alice}
    r = server.http.get(f"/v1/memories/{m['id']}", params=as_alice, headers=hadm)
    assert r.status_code == 200
    r = server.http.post(f"/v1/memories/{m['id']}/correct", params=as_alice, headers=hadm,
                         json={"content": "Works at the port authority."})
    assert r.json()["content"] == "Works at the port authority."
    assert server.http.get(f"/v1/memories/{m['id']}", headers=ha).json()["content"] == (
        "Works at the port authority.")
    # Without user_id the admin is only itself.
    _problem(server.http.get(f"/v1/memories/{m['id']}", headers=hadm), 404)
    r = server.http.get("/v1/memories", params={"user_id": "a.b"}, headers=hadm)
    _problem(r, 400)


def test_openapi_document(server: Server) -> None:
    doc = server.http.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    paths = doc["paths"]
    assert {"/v1/memories", "/v1/memories/{memory_id}", "/v1/memories/{memory_id}/correct",
            "/v1/memories/{memory_id}/pin", "/v1/memories/{memory_id}/unpin",
            "/v1/memories/{memory_id}/history", "/v1/export", "/v1/import", "/v1/decisions",
            "/v1/jobs", "/v1/me"} <= set(paths)
    assert set(paths["/v1/import"]["post"]["requestBody"]["content"]) == {
        "application/json", "multipart/form-data"}
    assert doc["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
