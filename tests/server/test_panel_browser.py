"""The memory panel in a real browser: headless Chromium (driven by Playwright) against
a real uvicorn server on loopback and the real database.

Each action taken in the page is checked in the database through the library. The
browser must start: a machine without a Chromium (``tests/browser.py``) fails these
tests with one line saying what to install. The screenshots the tests take are the docs'
pictures of the panel: each run rewrites ``docs/images/panel-*.png`` (the page at a fixed
viewport, users with fixed names, the app's time a clock the tests move), byte for byte
the same while the panel does not change.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright

from langmem_layer import Kind, MemoryLayer, MemoryNotFoundError, Policy, PostgresMemoryStore
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import create_key
from tests.browser import chromium_path
from tests.fakes import BagOfWordsEmbeddings, Clock
from tests.http_server import serve

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output" / "panel"
#: Where the screenshots go: docs/http.md shows them.
IMAGES = ROOT / "docs" / "images"
#: The same dates and words in the pictures on any machine.
PICTURE: dict[str, Any] = {"locale": "en-US", "timezone_id": "UTC"}
# Generous: the machine is shared; these are waits for the page, not timed assertions.
expect.set_options(timeout=20_000)


class Panel:
    """The running app, its store, and one user with a key."""

    def __init__(self, url: str, dev_url: str, dev_user: str,
                 store: PostgresMemoryStore, clock: Clock) -> None:
        self.url, self.dev_url, self.dev_user, self.store = url, dev_url, dev_user, store
        self.clock = clock
        self.layer = MemoryLayer(store, extraction="inline", clock=clock)

    def user(self, name: str | None = None) -> tuple[str, str]:
        """A user and a key; ``name`` for a screenshot (used once per session)."""
        user = name or f"p-{uuid.uuid4().hex[:8]}"
        return user, create_key(self.store, user)

    def remember(self, user: str, content: str, **kw: Any) -> str:
        self.clock.advance(minutes=1)  # one memory a minute: the same order on every run
        return self.layer.remember(user, content, **kw).key


@pytest.fixture(scope="module")
def panel(pg_uri: str) -> Iterator[Panel]:
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    # The app's "now" is a clock the tests move, so the dates in the pictures are the
    # same on every run.
    clock = Clock()
    with PostgresMemoryStore.from_conn_string(pg_uri, index=index, pool_size=4,
                                              clock=clock) as store:
        dev_user = f"dev-{uuid.uuid4().hex[:8]}"
        layer = {"clock": clock}
        with serve(create_app(store=store, layer_options=layer)) as url, \
                serve(create_app(store=store, dev_user=dev_user, layer_options=layer)) as dev_url:
            yield Panel(url, dev_url, dev_user, store, clock)


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    # No skip: a browser that cannot start fails the module.
    b = playwright.chromium.launch(executable_path=chromium_path(), headless=True,
                                   args=["--no-sandbox", "--disable-dev-shm-usage"])
    yield b
    b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900},
                                  accept_downloads=True, **PICTURE)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert errors == [], f"JavaScript errors in the panel: {errors}"


def _screenshot(page: Page, name: str) -> None:
    # The viewport only, one image pixel per CSS pixel: small enough to commit.
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / name), scale="css", animations="disabled",
                    caret="hide")


def _login(page: Page, url: str, key: str, user: str) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.goto(url + "/panel")
    field = page.get_by_label("API key")
    expect(field).to_be_focused()
    field.fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text(f"Signed in as {user}")


def _card(page: Page, memory_id: str) -> Any:
    return page.locator(f'article[data-id="{memory_id}"]')


def _seed(p: Panel, name: str | None = None) -> tuple[str, str, dict[str, str]]:
    """Alice (``name`` if given), her key, and her memories by name; Bob holds a secret
    of his own."""
    alice, key = p.user(name)
    soon = p.clock() + timedelta(days=3)
    ids = {
        "allergy": p.remember(alice, "Allergic to penicillin.", kind=Kind.PROFILE_FACT,
                              confidence=0.95),
        "tea": p.remember(alice, "Prefers green tea over coffee.", kind=Kind.PREFERENCE),
        "city": p.remember(alice, "Lives in Lisbon near the river.", kind=Kind.PROFILE_FACT),
        "dentist": p.remember(alice, "Call the dentist to move the appointment.",
                              kind=Kind.OPEN_LOOP, due_at=soon),
        "porto": p.remember(alice, "Visited Porto for a conference in May.",
                            kind=Kind.EPISODIC_EVENT),
        "divorce": p.remember(alice, "Went through a divorce last year.",
                              kind=Kind.PROFILE_FACT),
        "old": p.remember(alice, "Used to work at the harbour office.",
                          kind=Kind.EPISODIC_EVENT),
    }
    bob, _ = p.user()
    p.remember(bob, "Bob's bank PIN is 4321.", kind=Kind.PROFILE_FACT)
    return alice, key, ids


def test_login_groups_loops_and_isolation(panel: Panel, page: Page) -> None:
    alice, key, ids = _seed(panel, "maria")
    page.goto(panel.url + "/panel")
    # A wrong key is refused in words, and nothing is shown.
    page.get_by_label("API key").fill("lmk_bm9ib2R5_" + "0" * 64)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#status")).to_contain_text("refused")
    expect(page.locator("#main")).to_be_hidden()

    _login(page, panel.url, key, alice)
    expect(page.locator("article.memory")).to_have_count(len(ids))
    semantic = page.locator('section.layer[data-layer="semantic"]')
    expect(semantic.locator('section.kind[data-kind="profile_fact"] article')).to_have_count(3)
    expect(page.locator('section.layer[data-layer="episodic"] section.kind'
                        '[data-kind="open_loop"]')).to_contain_text("Call the dentist")
    card = _card(page, ids["allergy"])
    expect(card).to_contain_text("active")
    expect(card).to_contain_text("95%")
    loops = page.locator("#loop-list li")
    expect(loops).to_have_count(1)
    expect(loops.first.locator("time")).to_have_attribute("datetime", _is_iso())
    expect(page.locator("body")).not_to_contain_text("Bob's bank PIN")

    # A search shows what matches, not every memory reordered.
    page.get_by_label("Search memories").fill("Lisbon river")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#status")).to_have_text("1 memory matches “Lisbon river”.")
    expect(page.locator("article.memory")).to_have_count(1)
    expect(page.locator("article.memory").first).to_have_attribute("data-id", ids["city"])
    page.get_by_label("Search memories").fill("penicillin dentist")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#status")).to_have_text(
        "2 memories match “penicillin dentist”, best match first in each group.")
    expect(page.locator("article.memory")).to_have_count(2)
    for name in ("allergy", "dentist"):
        expect(_card(page, ids[name])).to_be_visible()
    page.get_by_label("Search memories").fill("PIN 4321")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#status")).to_have_text("No memory matches “PIN 4321”.")
    expect(page.locator("article.memory")).to_have_count(0)
    expect(page.locator("#groups")).to_have_text("Nothing matches.")
    expect(page.locator("body")).not_to_contain_text("Bob's bank PIN")
    page.get_by_role("button", name="Clear").click()
    expect(page.locator("article.memory")).to_have_count(len(ids))

    _screenshot(page, "panel-memories.png")


def _is_iso() -> Any:
    import re

    return re.compile(r"^\d{4}-\d\d-\d\dT")


def test_correct_pin_policy_delete_in_the_page(panel: Panel, page: Page) -> None:
    alice, key, ids = _seed(panel, "sam")
    _login(page, panel.url, key, alice)

    # Each change a minute after the last (the app's clock): the list, newest change
    # first, is in the same order on every run.
    # Correct in place: re-embedded, the old text in its history.
    panel.clock.advance(minutes=1)
    page.get_by_role("button", name="Correct: Allergic to penicillin.").click()
    box = _card(page, ids["allergy"]).get_by_label("Corrected text")
    expect(box).to_be_focused()
    box.fill("Allergic to amoxicillin.")
    page.get_by_role("button", name="Save correction").click()
    expect(page.locator("#status")).to_have_text("Corrected.")
    expect(_card(page, ids["allergy"]).locator(".content")).to_have_text(
        "Allergic to amoxicillin.")
    record = panel.layer.get(alice, ids["allergy"]).record
    assert record.content == "Allergic to amoxicillin."
    assert [(h.event, h.old) for h in record.history][-1] == (
        "content", "Allergic to penicillin.")

    # Pin, then the button says Unpin.
    panel.clock.advance(minutes=1)
    page.get_by_role("button", name="Pin: Prefers green tea over coffee.").click()
    unpin = page.get_by_role("button", name="Unpin: Prefers green tea over coffee.")
    expect(unpin).to_have_attribute("aria-pressed", "true")
    assert panel.layer.get(alice, ids["tea"]).record.pinned is True

    # The surface policy.
    panel.clock.advance(minutes=1)
    page.get_by_label("Surface policy: Went through a divorce last year.").select_option(
        "avoid")
    expect(page.locator("#status")).to_have_text("Surface policy: avoid.")
    assert panel.layer.get(alice, ids["divorce"]).record.policy == Policy.AVOID

    # Archive: kept, never recalled; the card says so.
    panel.clock.advance(minutes=1)
    page.get_by_role("button", name="Archive: Used to work at the harbour office.").click()
    expect(_card(page, ids["old"])).to_have_attribute("data-status", "archived")
    assert panel.layer.get(alice, ids["old"]).record.status == "archived"

    # Hard delete is behind a confirmation: cancelling keeps it.
    delete = page.get_by_role("button", name="Delete permanently: Visited Porto for a "
                              "conference in May.")
    delete.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("cannot be undone")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(delete).to_be_focused()
    assert panel.layer.get(alice, ids["porto"]).record.content.startswith("Visited Porto")
    delete.click()
    dialog.get_by_role("button", name="Delete permanently").click()
    expect(page.locator("#status")).to_have_text("Deleted permanently.")
    expect(_card(page, ids["porto"])).to_have_count(0)
    with pytest.raises(MemoryNotFoundError):
        panel.layer.get(alice, ids["porto"])
    _screenshot(page, "panel-edited.png")
    # Nothing else was touched.
    assert {r.key for r in panel.layer.admin.browse(alice, limit=50)} == set(ids.values()) - {
        ids["porto"]}


def test_why_a_memory_exists(panel: Panel, page: Page) -> None:
    alice, key = panel.user()
    panel.layer.ingest(alice, [HumanMessage("I am allergic to penicillin.", id="w1")],
                       thread_id="why-thread")
    (memory,) = panel.layer.admin.browse(alice, limit=5)
    _login(page, panel.url, key, alice)
    card = _card(page, memory.key)
    card.get_by_role("button", name="Why is this remembered").click()
    why = card.locator(".why")
    expect(why.locator(".source-text")).to_have_text("I am allergic to penicillin.")
    expect(why).to_contain_text("thread why-thread")
    expect(why.locator(".decision").first).to_contain_text("admitted")
    expect(card.get_by_role("button", name="Why is this remembered")).to_have_attribute(
        "aria-expanded", "true")


def test_export_download_and_import_upload(panel: Panel, page: Page,
                                           tmp_path: Path) -> None:
    alice, key, ids = _seed(panel)
    _login(page, panel.url, key, alice)
    with page.expect_download() as info:
        page.get_by_role("button", name="Export all my memory").click()
    download = info.value
    assert download.suggested_filename == f"langmem-export-{alice}.json"
    saved = OUTPUT / "export.json"
    download.save_as(saved)
    data = json.loads(saved.read_text())
    assert data["format"] == "langmem_layer.export/1"
    assert {i["key"] for i in data["items"]} == set(ids.values())
    assert "Bob's bank PIN" not in saved.read_text()

    # Import another person's export file into an empty account.
    carol, carol_key = panel.user()
    page.get_by_role("button", name="Sign out").click()
    _login(page, panel.url, carol_key, carol)
    expect(page.locator("#groups")).to_contain_text("No memories yet.")
    page.get_by_label("Import memory from a JSON export file").set_input_files(saved)
    expect(page.locator("#status")).to_have_text(f"Imported {len(ids)} items.")
    expect(page.locator("article.memory")).to_have_count(len(ids))
    assert sorted(r.record.content for r in panel.layer.admin.browse(carol, limit=50)) == sorted(
        r.record.content for r in panel.layer.admin.browse(alice, limit=50))

    # A malformed file is refused with the reason, and nothing is written.
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something/else"}')
    page.get_by_label("Import memory from a JSON export file").set_input_files(bad)
    expect(page.locator("#status")).to_contain_text("Not a langmem_layer export")
    assert len(panel.layer.admin.browse(carol, limit=50)) == len(ids)


def test_phone_width_keyboard_and_dev_mode(panel: Panel, browser: Browser) -> None:
    alice, key, _ = _seed(panel, "jon")
    context = browser.new_context(viewport={"width": 390, "height": 844},
                                  device_scale_factor=2, is_mobile=True, has_touch=True,
                                  **PICTURE)
    try:
        page = context.new_page()
        page.goto(panel.url + "/panel")
        # Keyboard only: the key field has focus; Enter signs in.
        expect(page.get_by_label("API key")).to_be_focused()
        page.keyboard.type(key)
        page.keyboard.press("Enter")
        expect(page.locator("#who")).to_have_text(f"Signed in as {alice}")
        expect(page.locator("article.memory")).to_have_count(7)
        # Nothing wider than the phone.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        _screenshot(page, "panel-phone.png")
        # Tab reaches the controls, each with a visible focus ring.
        page.locator("#q").focus()
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.id")
        assert focused == "status-filter"
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        assert outline == "solid"
        # Signing out forgets the key.
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_label("API key")).to_be_visible()
        assert page.evaluate("sessionStorage.length") == 0
    finally:
        context.close()

    # Dev mode on loopback: no key asked.
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        dev_user = panel.dev_user
        panel.remember(dev_user, "Demo memory.", kind=Kind.PREFERENCE)
        page.goto(panel.dev_url + "/panel")
        expect(page.locator("#who")).to_have_text(f"Signed in as {dev_user} (dev mode)")
        expect(page.locator("#login")).to_be_hidden()
        expect(page.locator("article.memory")).to_have_count(1)
    finally:
        context.close()


def test_panel_files_are_served_with_a_strict_policy(panel: Panel) -> None:
    import httpx

    for path, media in [("/panel", "text/html"), ("/panel/panel.js", "text/javascript"),
                        ("/panel/panel.css", "text/css")]:
        r = httpx.get(panel.url + path)
        assert r.status_code == 200 and r.headers["content-type"].startswith(media)
        assert "default-src 'self'" in r.headers["content-security-policy"]
    assert httpx.get(panel.url + "/panel/../app.py").status_code == 404
    assert httpx.get(panel.url + "/panel/panel.py").status_code == 404


def test_panel_files_are_package_data() -> None:
    import tomllib
    from fnmatch import fnmatch

    from langmem_layer.server.http.panel import ASSETS

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    globs = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"][
        "langmem_layer.server.http"]
    for name in ASSETS:
        assert any(fnmatch(f"static/{name}", g) for g in globs), name
