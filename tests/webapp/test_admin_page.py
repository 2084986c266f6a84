"""The Mini App's admin view, in a real browser on a real bot: what an admin sees there, and what others don't.

A user has a photo drawn; then, with the bot's one worker held still (SIGSTOP), sends two more: one on the
worker, one waiting. The admin opens the page as Telegram opens it and goes to the admin view: the queue
says whose photos wait and are drawn, and for how long; the workers, that the one is drawing; today, the
drawings made and who they were made for. The admin blocks the user in the chat: the view lists the block,
and its Unblock button lifts it, as /unblock does. A user who is not an admin has no way in, and the API
tells them so in one sentence. (A block while a photo is drawn: tests/flow/test_bot_block.py.)
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.words.catalogue import t
from testkit.bot_harness import private_chat
from testkit.bot_in_process import serving
from testkit.browser import chromium, phone
from testkit.pictures import synthetic_photo
from testkit.redis_server import free_port
from testkit.replies import final_answer
from testkit.webapp import URL, App, drawn_photo
from testkit.worker_harness import held
from weights.store import ModelStore

pytestmark = pytest.mark.slow  # Chromium, on a bot of its own

ADMIN, USER, OTHER = 9201, 9202, 9203
DARK = {"bg_color": "#17212b", "text_color": "#f5f5f5", "button_color": "#5288c1", "secondary_bg_color": "#232e3c"}


@pytest.fixture(scope="module")
def admin_app(tiny_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    port = free_port()
    with serving(tmp_path_factory.mktemp("admin"), tiny_store.home, ANIMEBOT_STYLE="tiny", ANIMEBOT_BACKEND="onnxruntime",
                 ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_ADMINS=str(ADMIN), ANIMEBOT_WORKERS="1",
                 ANIMEBOT_METRICS_PORT=str(port), ANIMEBOT_WEBAPP_URL=URL) as (bot, fake):
        yield App(bot, fake, port)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def said(app: App, uid: int, text: str) -> str:
    chat, user = private_chat(uid)
    before = len(app.fake.messages_to(uid))
    app.fake.text_message(chat, user, text)
    return str(app.fake.wait_for(lambda: app.fake.messages_to(uid)[before:], 60)[0].params["text"])


def test_someone_not_an_admin_gets_one_sentence_and_no_way_in(admin_app: App, browser: Any) -> None:
    from playwright.sync_api import expect

    drawn_photo(admin_app, OTHER, seed=11)
    refused = [admin_app.get("/app/api/admin", OTHER), admin_app.post("/app/api/admin/unblock", OTHER, {"user": USER})]
    assert [(a.status, a.json()) for a in refused] == [(403, {"error": "This page is only for this bot's admins."})] * 2
    assert admin_app.get("/app/api/admin").status == 401  # unsigned: the bare 401 of every call
    page = phone(browser, admin_app, OTHER, DARK)
    try:
        expect(page.locator(".result")).to_have_count(1, timeout=30_000)
        assert page.locator("#open-admin").is_hidden()
    finally:
        page.close()


def test_the_admin_view_shows_the_queue_today_the_workers_and_a_block_it_lifts(admin_app: App, browser: Any,
                                                                            tmp_path: Path) -> None:
    from playwright.sync_api import expect

    app, fake = admin_app, admin_app.fake
    chat, user = private_chat(USER)
    drawn_photo(app, USER, seed=21)
    drawings = app.get("/app/api/admin", ADMIN).json()["today"]["photos"]  # the other test's too, if it ran first
    page = phone(browser, app, ADMIN, DARK)
    try:
        page.locator("#open-admin").click(timeout=30_000)
        expect(page.locator("#title")).to_have_text("Admin")
        expect(page.locator("#admin-queue")).to_have_text("Nothing is waiting or being drawn.")
        expect(page.locator("#admin-today")).to_have_text(f"Photos: {drawings}, clips: 0, HD: 0")
        expect(page.locator("#admin-top li").first).to_have_text(f"{USER}: 1")
        expect(page.locator("#admin-workers li")).to_have_count(1)
        expect(page.locator("#admin-workers li")).to_contain_text("idle")
        expect(page.locator("#admin-blocked")).to_have_text("Nobody is blocked.")

        (pid,) = app.bot.worker_pids().values()
        with held(pid):  # the worker takes one photo and draws nothing; the next waits behind it
            photos = [fake.photo_message(chat, user, synthetic_photo(seed=seed)) for seed in (22, 23)]
            line = page.locator("#admin-lines li")
            expect(line).to_have_count(1, timeout=60_000)  # the view looks again by itself
            expect(line).to_contain_text(f"{USER}: Waiting: 1, drawing: 1, longest wait: ")
            expect(page.locator("#admin-queue")).to_contain_text("Waiting: 1, drawing: 1")
            expect(page.locator("#admin-workers li")).to_contain_text("drawing")
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 360
            page.screenshot(path=str(tmp_path / "queue.png"))
        assert [final_answer(fake, photo) for photo in photos] == ["photo", "photo"]
        expect(page.locator("#admin-queue")).to_have_text("Nothing is waiting or being drawn.")
        expect(page.locator("#admin-workers li")).to_contain_text("idle")
        expect(page.locator("#admin-today")).to_have_text(f"Photos: {drawings + 2}, clips: 0, HD: 0")
        expect(page.locator("#admin-top li").first).to_have_text(f"{USER}: 3")

        assert said(app, ADMIN, f"/block {USER}").startswith(f"Blocked user {USER}")
        bad = app.post("/app/api/admin/unblock", ADMIN, {"user": str(USER)})
        assert (bad.status, bad.json()) == (400, {"error": "That request was not understood; reload the page."})
        row = page.locator("#admin-blocked li")
        expect(row).to_contain_text(str(USER), timeout=30_000)
        page.screenshot(path=str(tmp_path / "blocked.png"))
        row.get_by_role("button", name="Unblock").click()
        expect(page.locator("#admin-blocked")).to_have_text("Nobody is blocked.")
        assert said(app, ADMIN, "/blocked") == "Nobody is blocked."
        assert final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=24))) == "photo"
        expect(page.locator("#admin-top li").first).to_have_text(f"{USER}: 4", timeout=30_000)
    finally:
        page.close()


def test_the_admin_view_reads_right_to_left_in_persian_and_fits_a_phone(admin_app: App, browser: Any,
                                                                       tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = phone(browser, admin_app, ADMIN, DARK, lang="fa")
    try:
        page.locator("#open-admin").click(timeout=30_000)
        expect(page.locator("#title")).to_have_text(t("fa", "page_admin"))
        expect(page.locator("#admin-workers-head")).to_have_text(t("fa", "page_admin_workers"))
        expect(page.locator("#admin-workers li")).to_have_count(1)
        assert page.evaluate("() => document.documentElement.dir") == "rtl"
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 360
        page.screenshot(path=str(tmp_path / "fa.png"))
    finally:
        page.close()
