"""API keys: created once, stored hashed, bound to their user, revocable, erased with it."""

from __future__ import annotations

import base64
import hashlib

import psycopg
import pytest

from langmem_layer import (
    AsyncPostgresMemoryStore,
    MemoryLayer,
    MissingUserError,
    PostgresMemoryStore,
)
from langmem_layer.cli import main
from langmem_layer.server.keys import (
    Principal,
    acreate_key,
    alist_keys,
    arevoke_key,
    averify_key,
    create_key,
    list_keys,
    revoke_key,
    token_user,
    verify_key,
)


def test_create_verify_revoke(store: PostgresMemoryStore, pg_uri: str) -> None:
    token = create_key(store, "alice")
    admin = create_key(store, "root", admin=True)
    assert token.startswith("lmk_") and token_user(token) == "alice"
    assert verify_key(store, token) == Principal("alice", admin=False)
    assert verify_key(store, admin) == Principal("root", admin=True)
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute("SELECT user_id, key_hash FROM langmem_api_keys "
                            "ORDER BY user_id").fetchall()
    # Only the hash is stored: the database never holds a usable key.
    assert rows == [("alice", hashlib.sha256(token.encode()).hexdigest()),
                    ("root", hashlib.sha256(admin.encode()).hexdigest())]
    assert [k.admin for k in list_keys(store, "alice")] == [False]
    assert list_keys(store, "alice")[0].key_id == rows[0][1][:12]
    assert revoke_key(store, token) is True
    assert verify_key(store, token) is None
    assert revoke_key(store, token) is False
    assert verify_key(store, admin) == Principal("root", admin=True)


def test_a_key_names_its_user_and_cannot_be_moved(store: PostgresMemoryStore) -> None:
    token = create_key(store, "alice")
    create_key(store, "mallory")
    secret = token.rpartition("_")[2]
    other = base64.urlsafe_b64encode(b"mallory").decode().rstrip("=")
    # Alice's secret under Mallory's name is not Mallory's key, nor Alice's.
    assert verify_key(store, f"lmk_{other}_{secret}") is None
    assert verify_key(store, token[:-1] + ("0" if token[-1] != "0" else "1")) is None


@pytest.mark.parametrize("token", [
    None, 42, "", "Bearer x", "lmk_", "lmk__" + "0" * 64, "lmk_YWxpY2U_short",
    "lmk_YWxpY2U_" + "g" * 64, "lmk_!!!_" + "0" * 64, "lmk_YS5i_" + "0" * 64,  # "a.b"
    "lmk_" + "A" * 2000, "lmk_" + "A" * 9000 + "_" + "0" * 64,
])
def test_malformed_tokens_are_refused_without_error(store: PostgresMemoryStore,
                                                    token: object) -> None:
    assert verify_key(store, token) is None
    assert revoke_key(store, token) is False  # type: ignore[arg-type]


def test_user_ids_with_any_characters(store: PostgresMemoryStore) -> None:
    # Long ids too: every key handed out must verify (a 1,000-character id of 3-byte
    # characters makes a 4,069-character token).
    for user in ("ålice 🙂", "a_b-c", "x" * 300, "a/b?c=d", "用" * 1000, "🙂" * 1500):
        token = create_key(store, user)
        assert token_user(token) == user
        assert verify_key(store, token) == Principal(user)


def test_bad_user_is_refused(store: PostgresMemoryStore) -> None:
    with pytest.raises(MissingUserError):
        create_key(store, "")
    with pytest.raises(MissingUserError):
        create_key(store, "a.b")
    # Too long to fit in a key: refused with the reason, rather than a key that never
    # verifies.
    with pytest.raises(MissingUserError, match=r"too long for an API key|longer than"):
        create_key(store, "x" * 7000)


async def test_async_twins(astore: AsyncPostgresMemoryStore) -> None:
    token = await acreate_key(astore, "bob", admin=True)
    assert await averify_key(astore, token) == Principal("bob", admin=True)
    assert [k.admin for k in await alist_keys(astore, "bob")] == [True]
    assert await arevoke_key(astore, token) is True
    assert await averify_key(astore, token) is None
    assert await averify_key(astore, "nonsense") is None
    assert await arevoke_key(astore, "nonsense") is False


def test_delete_user_erases_keys(store: PostgresMemoryStore) -> None:
    token = create_key(store, "carol")
    keep = create_key(store, "dave")
    deleted = MemoryLayer(store, extraction="inline").delete_user("carol")
    assert deleted.counts["langmem_api_keys"] == 1
    assert verify_key(store, token) is None
    assert verify_key(store, keep) == Principal("dave")


def test_keys_cli(pg_uri: str, store: PostgresMemoryStore,
                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--database-url", pg_uri, "keys", "create", "--user", "erin"]) == 0
    token = capsys.readouterr().out.strip()
    assert verify_key(store, token) == Principal("erin")
    assert main(["--database-url", pg_uri, "keys", "create", "--user", "erin", "--admin"]) == 0
    admin = capsys.readouterr().out.strip()
    assert verify_key(store, admin) == Principal("erin", admin=True)
    assert main(["--database-url", pg_uri, "keys", "list", "--user", "erin"]) == 0
    listed = capsys.readouterr().out
    assert len(listed.splitlines()) == 2 and "admin" in listed and "user" in listed
    assert token not in listed and token.rpartition("_")[2] not in listed
    assert main(["--database-url", pg_uri, "keys", "revoke", token]) == 0
    assert "key revoked" in capsys.readouterr().out
    assert verify_key(store, token) is None
    assert main(["--database-url", pg_uri, "keys", "revoke", token]) == 1
    assert "no such key" in capsys.readouterr().err
    assert main(["--database-url", pg_uri, "keys", "create", "--user", "a.b"]) == 1
    assert "must not contain" in capsys.readouterr().err
