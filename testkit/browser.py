"""Headless Chromium for the tests that look at a page: Debian's browser, driven by Playwright.

Playwright's own browser download cannot work without internet; the system's Chromium
(``apt-get install chromium``) is launched by its path instead. Without either, the tests
that need it skip, saying which is missing.
"""
from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from testkit.fake_telegram import TOKEN
from testkit.webapp import App, init_data


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


PAGE_DIR = Path(__file__).resolve().parents[1] / "bot" / "webapp" / "page"


def colour_page(browser: Any) -> Any:
    """A blank page with the Mini App's colour maths (``page/colour.js``, an ES module) loaded on its own, its
    functions (``oklab``, ``keptColours``, ``mix``) on ``window`` for ``page.evaluate``."""
    page = browser.new_page()
    def serve(route: Any) -> None:
        if route.request.url.endswith("/colour.js"):
            route.fulfill(path=str(PAGE_DIR / "colour.js"), content_type="text/javascript")
        else:
            route.fulfill(body="<html></html>", content_type="text/html")

    page.route("**/*", serve)
    page.goto("http://page.invalid/")
    loader = 'import * as colour from "/colour.js"; Object.assign(window, colour, {colourReady: true});'
    page.add_script_tag(content=loader, type="module")
    page.wait_for_function("() => window.colourReady === true")
    return page


def phone(browser: Any, bot: App, uid: int | None, theme: dict[str, str], lang: str = "en", query: str = "") -> Any:
    """A 360 px wide page opened as Telegram opens a Mini App (or, with no ``uid``, as a browser would)."""
    page = browser.new_page(viewport={"width": 360, "height": 740}, device_scale_factor=2)
    page.route("https://telegram.org/**", lambda route: route.abort())  # no internet here, nor on some hosts
    fragment = f"#tgWebAppData={quote(init_data(uid, TOKEN, lang=lang), safe='')}" if uid else "#"
    fragment += f"&tgWebAppVersion=8.0&tgWebAppThemeParams={quote(json.dumps(theme), safe='')}"
    page.goto(f"{bot.base}/app{query}{fragment}")
    return page
