"""Property-based isolation probes: no read surface ever returns another user's data.

Each Hypothesis example builds a small world of two or three users with adversarial
ids (SQL metacharacters, LIKE wildcards, backslashes, quotes, unicode, ids of up to
1,000 characters) and adversarial namespace labels, who hold identical and overlapping
texts plus one secret each, and then probes every read surface for every user:
``recall``, ``context_block``, ``BaseStore.search`` / ``get`` / ``list_namespaces``,
``list``, ``get``, ``export``, ``decisions``, ``history``, ``recent_history``. A probe
fails on any key, namespace or secret of another user. Blank users and labels must be
refused with the library's own error.

Settings: ``derandomize=True`` (and so no example database): CI runs the same
examples every time, so a failure reproduces on the next run and the test is never
flaky; ``deadline=None``: an example writes to PostgreSQL and its time varies with
the machine's load. Set ``LANGMEM_PROBES_EXPLORE=1`` to draw fresh examples instead
(kept in ``.hypothesis/`` under the checkout); a shrunk failure found that way goes
into :data:`REGRESSIONS` / an ``@example``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.base import GetOp

from langmem_layer import MemoryLayer, PostgresMemoryStore
from langmem_layer.errors import InvalidNamespaceError, LangmemError, MissingUserError
from langmem_layer.extract.rules import RuleExtractor
from tests.fakes import Clock

EXAMPLES = int(os.environ.get("LANGMEM_PROBE_EXAMPLES", "45"))
#: Probes the module must run in all (asserted at the end).
MIN_PROBES = 10_000

ADVERSARIAL_IDS = [
    "alice", "alice ", " alice", "ALICE", "alic", "alice2", "a%", "%", "%%", "_", "a_ice",
    "a\\", "\\", "\\%", "\\_", "'", "''", '"', "`", "a' OR '1'='1", "'; DROP TABLE x; --",
    "%s", "%(user_id)s", "$1", "?", "*", "memories", "identity", "work", "-", "a\tb",
    "ü", "Ünïcödé", "用户", "ユーザー", "🙂", "\u202eecila", "e\u0301", "é", "\u00a0x",
    "null", "NULL", "None", "0", "[]", "{}", "a:b", "a/b", "a,b", "a;b", "a b",
]
ADVERSARIAL_LABELS = [
    "notes", "work", "personal", "identity", "%", "_", "\\", "'", '"', "*", "a%b", "a_b",
    "'; --", "ü", "用户", "🙂", "memories", "x" * 200,
]
#: Labels and users the store must refuse, not store under a blank name.
BLANK = ["", " ", "  ", "\t", "\n", " \t\n "]

_SAFE = st.characters(blacklist_characters=".\x00", blacklist_categories=("Cs",))
user_ids = st.one_of(
    st.sampled_from(ADVERSARIAL_IDS),
    st.text(_SAFE, min_size=1, max_size=24).filter(lambda s: s.strip() != ""),
    st.tuples(st.sampled_from(["%_'\\ü", "a", "用"]), st.integers(200, 1000)).map(
        lambda t: (t[0] * t[1])[: t[1]]),
)
labels = st.one_of(
    st.sampled_from(ADVERSARIAL_LABELS),
    st.text(_SAFE, min_size=1, max_size=12).filter(lambda s: s.strip() != ""),
)
COMMON = [
    "I prefer green tea in the morning.",
    "Visited Lisbon in May with Ana.",
    "Works at Acme Corp on databases.",
    "Allergic to penicillin and to cats.",
]


@dataclass
class Ledger:
    """Who owns each key and secret written so far (keys and secrets never repeat)."""

    owner: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    probes: int = 0
    worlds: int = 0
    serial: Iterator[int] = field(default_factory=count)

    def secret(self, user: str) -> str:
        token = f"zq{next(self.serial):06d}x"
        self.secrets[token] = user
        return token

    def foreign_keys(self, user: str, keys: Any) -> list[str]:
        return [k for k in keys if self.owner.get(k, user) != user]

    def foreign_secrets(self, user: str, text: str) -> list[str]:
        return [s for s in re.findall(r"zq\d{6}x", text) if self.secrets.get(s, user) != user]


LEDGER = Ledger()


@pytest.fixture(scope="module")
def world(pg_uri: str) -> Iterator[tuple[MemoryLayer, PostgresMemoryStore]]:
    from tests.conftest import _truncate
    from tests.fakes import BagOfWordsEmbeddings

    _truncate(pg_uri)
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, clock=Clock()) as store:
        layer = MemoryLayer(store, extractor=RuleExtractor(), extraction="inline",
                            clock=store._clock)
        yield layer, store


def probe_settings(examples: int) -> settings:
    """Hypothesis settings of a probe test: ``examples`` worlds, reproducible unless
    ``LANGMEM_PROBES_EXPLORE`` asks for new ones (kept in ``.hypothesis``)."""
    if os.environ.get("LANGMEM_PROBES_EXPLORE"):
        explore: dict[str, Any] = {
            "derandomize": False, "database": DirectoryBasedExampleDatabase(".hypothesis")}
    else:
        explore = {"derandomize": True, "database": None}
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                    **explore)


#: The strategies of a generated world: two or three users, their labels, and the texts
#: they hold in common.
WORLDS = {
    "users": st.lists(user_ids, min_size=2, max_size=3, unique=True),
    "user_labels": st.lists(labels, min_size=3, max_size=3),
    "common": st.lists(st.sampled_from(COMMON), min_size=2, max_size=2, unique=True),
}


def _build(layer: MemoryLayer, store: PostgresMemoryStore, users: list[str],
           user_labels: list[str], common: list[str]) -> dict[str, dict[str, Any]]:
    """Write each user's world; returns per user: keys, labels, secret."""
    made: dict[str, dict[str, Any]] = {}
    for user, label in zip(users, user_labels, strict=True):
        secret = LEDGER.secret(user)
        keys = []
        for text in common:  # identical texts for every user
            keys.append(layer.remember(user, text, thread_id="t").key)
        keys.append(layer.remember(user, f"My secret code is {secret} for Lisbon.").key)
        key = f"k{next(LEDGER.serial)}"
        store.put(("memories", user, label), key, {"text": f"{common[0]} {secret}"})
        keys.append(key)
        layer.ingest(user, [HumanMessage(f"I prefer {secret} tea.", id=f"m{key}")],
                     thread_id="t")
        layer.threads.record_turn(user, [HumanMessage(f"Tell Ana about {secret}.", id=f"h{key}"),
                                 AIMessage(f"Noted {secret}.")], thread_id="t")
        for k in keys:
            LEDGER.owner[k] = user
        made[user] = {"keys": keys, "label": label, "secret": secret}
    return made


def _probe(layer: MemoryLayer, store: PostgresMemoryStore, made: dict[str, dict[str, Any]],
           common: list[str]) -> int:
    n = 0

    def clean(user: str, what: str, keys: Any = (), text: str = "") -> None:
        nonlocal n
        n += 1
        leaked = LEDGER.foreign_keys(user, keys) + LEDGER.foreign_secrets(user, text)
        assert not leaked, f"{what} for {user!r} returned another user's {leaked}"

    secrets = [m["secret"] for m in made.values()]
    for user, mine in made.items():
        others = [m for u, m in made.items() if u != user]
        # The expensive surfaces (the whole read path) with a text every user holds,
        # another user's secret and LIKE wildcards; the store's search with all of them.
        for q in (others[0]["secret"], "Lisbon % _ \\ '"):
            got = layer.recall(user, q)
            clean(user, f"recall({q!r})", [r.key for r in got],
                  " ".join(r.record.content for r in got))
            assert all(r.namespace[1] == user for r in got)
            clean(user, f"context_block({q!r})", text=repr(layer.context_block(user, q)))
        for q in (*common, *secrets, "%", "_"):
            items = store.search(("memories", user), query=q, limit=50)
            assert all(i.namespace[1] == user for i in items)
            clean(user, f"search({q!r})", [i.key for i in items], repr([i.value for i in items]))
        spaces = store.list_namespaces(prefix=("memories", user))
        assert all(ns[1] == user for ns in spaces)
        clean(user, "list_namespaces", text=repr(spaces))
        listed = layer.list(user)
        clean(user, "list", [r.key for r in listed], repr([r.record.content for r in listed]))
        exported = layer.export(user)
        assert exported["user_id"] == user
        assert all(i["namespace"][1] == user for i in exported["items"])
        clean(user, "export", [i["key"] for i in exported["items"]], repr(exported))
        clean(user, "decisions", text=repr(layer.admin.decisions(user)))
        clean(user, "recent_history", text=repr(layer.threads.recent_history(user)))
        clean(user, "history", text=repr(layer.admin.history(user, mine["keys"][0])))
        for other in others:
            # Each of the other user's keys, asked for under this user's namespaces
            # (theirs, and the scopes this user has): one get each, in one batch.
            gets = [GetOp(("memories", user, scope), key)
                    for scope in {other["label"], mine["label"], other["label"] + "%",
                                  *ADVERSARIAL_LABELS}
                    for key in other["keys"]]
            found = store.batch(gets)
            n += len(gets)
            assert found == [None] * len(gets), [g for g, f in zip(gets, found, strict=True) if f]
            n += 2
            with pytest.raises(LangmemError):
                layer.get(user, other["keys"][0])
            try:
                entries = layer.admin.history(user, other["keys"][0])
            except LangmemError:
                entries = []
            assert entries == []
    return n


def _refuses_blank(layer: MemoryLayer, store: PostgresMemoryStore, user: str, blank: str
                   ) -> int:
    with pytest.raises(InvalidNamespaceError):
        store.put(("memories", user, blank), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.put(("memories", blank, "notes"), "k", {"text": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.search(("memories", blank))
    with pytest.raises(MissingUserError):
        layer.recall(blank, "tea")
    return 4


#: Worlds kept as explicit regression cases (shrunk failures go here too).
REGRESSIONS: list[tuple[list[str], list[str]]] = [
    (["a%", "ab"], ["notes", "notes"]),       # LIKE wildcard in a user id vs a real id
    (["a_c", "abc"], ["_", "b"]),             # `_` in an id and in a label
    (["a\\", "a\\\\"], ["\\", "%"]),          # backslash, the LIKE escape character
    (["alice", "alice "], ["work", "work"]),  # trailing space is another user
    (["'; DROP TABLE x; --", "'"], ["'", "'; --"]),
    (["ü", "u\u0308"], ["ü", "ü"]),           # composed vs decomposed: two users
]


@pytest.mark.parametrize(("users", "user_labels"), REGRESSIONS)
def test_regression_worlds(world: tuple[MemoryLayer, PostgresMemoryStore], users: list[str],
                           user_labels: list[str]) -> None:
    layer, store = world
    made = _build(layer, store, users, user_labels, COMMON[:2])
    LEDGER.probes += _probe(layer, store, made, COMMON[:2])


def test_no_read_surface_returns_another_users_data(
    world: tuple[MemoryLayer, PostgresMemoryStore],
) -> None:
    layer, store = world
    before = LEDGER.probes

    @probe_settings(EXAMPLES)
    @given(**WORLDS, blank=st.sampled_from(BLANK))
    @example(users=["a%", "a_", "a"], user_labels=["%", "_", "a"], common=COMMON[:2],
             blank=" ")
    def probe_world(users: list[str], user_labels: list[str], common: list[str],
                    blank: str) -> None:
        made = _build(layer, store, users, user_labels[: len(users)], common)
        LEDGER.probes += _probe(layer, store, made, common)
        LEDGER.probes += _refuses_blank(layer, store, users[0], blank)
        LEDGER.worlds += 1

    probe_world()
    probes = LEDGER.probes - before
    print(f"isolation probes: {probes} over {LEDGER.worlds} generated worlds "
          f"(+{len(REGRESSIONS)} regression worlds), {len(LEDGER.owner)} keys, "
          f"{len(LEDGER.secrets)} secrets; leaks: 0")
    assert probes >= MIN_PROBES
