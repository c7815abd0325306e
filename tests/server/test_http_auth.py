"""Who a request acts as: API keys, the caller's own hook, the loopback-only dev mode and
admins acting on other users; the app opening its own store; the serve command."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Request

from langmem_layer import MissingUserError, PostgresMemoryStore
from langmem_layer.cli import main
from langmem_layer.server.http.app import create_app
from langmem_layer.server.http.security import current_principal
from langmem_layer.server.keys import Principal, create_key
from tests.http_server import serve


def _request(app: FastAPI, client: tuple[str, int] | None = ("127.0.0.1", 50000),
             headers: dict[str, str] | None = None) -> Request:
    return Request({
        "type": "http", "app": app, "client": client, "method": "GET", "path": "/v1/me",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    })


async def _who(app: FastAPI, user_id: str | None = None, **kw: Any) -> Principal:
    return await current_principal(_request(app, **kw), user_id=user_id, _credentials=None)


async def _refused(app: FastAPI, status: int, user_id: str | None = None,
                   **kw: Any) -> HTTPException:
    with pytest.raises(HTTPException) as caught:
        await _who(app, user_id, **kw)
    assert caught.value.status_code == status
    if status == 401:
        assert caught.value.headers == {"WWW-Authenticate": "Bearer"}
    return caught.value


def _app(store: PostgresMemoryStore, **kw: Any) -> FastAPI:
    app = create_app(store=store, **kw)
    app.state.langmem.store = store  # as the lifespan sets it when the app starts
    return app


async def test_dev_mode_serves_loopback_only(store: PostgresMemoryStore) -> None:
    app = _app(store, dev_user="demo")
    assert await _who(app) == Principal("demo")
    assert await _who(app, client=("::1", 1)) == Principal("demo")
    assert await _who(app, client=("127.0.0.2", 1)) == Principal("demo")
    for client in [("10.0.0.5", 1), ("192.168.1.20", 1), ("2001:db8::1", 1), None,
                   ("testclient", 1)]:
        error = await _refused(app, 401, client=client)
        assert "loopback only" in str(error.detail)
    # Through a proxy on this machine the request is not the proxy's own.
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
        await _refused(app, 401, headers={header: "203.0.113.9"})
    # Credentials that are sent are checked, never replaced by the dev user.
    await _refused(app, 401, headers={"Authorization": "Bearer wrong"})
    token = create_key(store, "alice")
    assert await _who(app, client=("10.0.0.5", 1),
                      headers={"Authorization": f"Bearer {token}"}) == Principal("alice")
    # The dev user is no admin.
    await _refused(app, 403, user_id="someone-else")


async def test_without_dev_mode_loopback_needs_a_key(store: PostgresMemoryStore) -> None:
    error = await _refused(_app(store), 401)
    assert "Missing credentials" in str(error.detail)


async def test_the_callers_own_hook(store: PostgresMemoryStore) -> None:
    def sync_hook(request: Request) -> Principal | None:
        header = request.headers.get("authorization", "")
        return Principal("jwt-user") if header == "Bearer good.jwt.token" else None

    async def async_hook(request: Request) -> Principal | None:
        return sync_hook(request)

    token = create_key(store, "keyed")
    for hook in (sync_hook, async_hook):
        app = _app(store, authenticate=hook)
        jwt = {"Authorization": "Bearer good.jwt.token"}
        assert await _who(app, headers=jwt) == Principal("jwt-user")
        await _refused(app, 401, headers={"Authorization": "Bearer bad.jwt.token"})
        await _refused(app, 401)
        # API keys still work next to the hook.
        assert await _who(app, headers={"Authorization": f"Bearer {token}"}) == (
            Principal("keyed"))


async def test_admin_may_name_another_user(store: PostgresMemoryStore) -> None:
    app = _app(store)
    user = {"Authorization": f"Bearer {create_key(store, 'plain')}"}
    admin = {"Authorization": f"Bearer {create_key(store, 'root', admin=True)}"}
    assert await _who(app, "plain", headers=user) == Principal("plain")  # oneself: fine
    await _refused(app, 403, "other", headers=user)
    assert await _who(app, "other", headers=admin) == Principal("other", admin=True)
    assert await _who(app, headers=admin) == Principal("root", admin=True)


def test_bad_dev_user_is_refused() -> None:
    with pytest.raises(MissingUserError):
        create_app(dev_user="a.b")


def test_live_dev_mode_and_own_store(pg_uri: str, store: PostgresMemoryStore,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The app opens its own store on the URL at startup, and closes it at shutdown."""
    monkeypatch.setattr("langmem_layer.store.embedding.default_embedder.default_index",
                        lambda: store.index_config)
    app = create_app(database_url=pg_uri, dev_user="demo", pool_size=2)
    with serve(app) as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{url}/v1/me").json() == {"user_id": "demo", "admin": False}
        r = httpx.post(f"{url}/v1/memories", json={"content": "Demo likes jazz."})
        assert r.status_code == 201
        assert [m["content"] for m in httpx.get(f"{url}/v1/memories").json()["items"]] == [
            "Demo likes jazz."]
        opened = app.state.langmem.store
    assert app.state.langmem.store is None and app.state.langmem.layer is None
    assert opened.conn.closed  # the pool the app opened is closed


def test_serve_command(pg_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, Any] = {}
    monkeypatch.setattr("langmem_layer.server.http.serve.run",
                        lambda app, **kw: ran.update(app=app, **kw))
    assert main(["--database-url", pg_uri, "serve", "--port", "8123", "--dev-user", "demo"]) == 0
    assert (ran["host"], ran["port"]) == ("127.0.0.1", 8123)
    assert ran["app"].state.langmem.dev_user == "demo"
    assert main(["--database-url", pg_uri, "serve", "--no-agent"]) == 0
    assert main(["serve", "--dev-user", "a.b"]) == 1
