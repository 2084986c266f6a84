"""The Mini App's page in a real browser: headless Chromium (Debian's), driven by Playwright, on a real bot.

The bot (the tiny generator, a real worker) polls the fake Bot API and serves /app on its metrics port.
A user has a photo drawn in the chat; the page is opened as Telegram opens it, with a signed initData
and a theme in the address's fragment, on a 360 px wide phone, with telegram.org unreachable (the
page must work without Telegram's script). The divider is dragged, the strength moved (the picture
changes at once, and is what the bot then draws), and Keep has it drawn through the queue.
Screenshots go to the test's folder (``pytest --basetemp``) to be looked at.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bot.words.catalogue import LANGS, page_words
from inference.colour import blend
from testkit.browser import chromium, colour_page, phone
from testkit.fake_telegram import TOKEN
from testkit.wait import wait_for
from testkit.webapp import App, call, drawn_photo, init_data, signed_as, unsigned

pytestmark = pytest.mark.slow  # every test here drives Chromium, on a bot of its own

DARK = {"bg_color": "#17212b", "text_color": "#f5f5f5", "hint_color": "#708499", "button_color": "#5288c1",
        "button_text_color": "#ffffff", "secondary_bg_color": "#232e3c", "link_color": "#6ab3f3"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def canvas_pixels(page: Any) -> np.ndarray:
    raw = page.evaluate("""() => { const c = document.getElementById('after');
        return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data); }""")
    width, height = page.evaluate("() => [document.getElementById('after').width, document.getElementById('after').height]")
    return np.asarray(raw, np.uint8).reshape(height, width, 4)[:, :, :3]


def test_the_page_compares_previews_a_strength_and_keeps_it(app: App, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    uid = 6901
    drawn_photo(app, uid, seed=69)
    (result,) = app.results(uid)
    page = phone(browser, app, uid, DARK)
    try:
        tile = page.locator(f'.result[data-id="{result["id"]}"]')
        expect(tile).to_be_visible(timeout=30_000)
        page.screenshot(path=str(tmp_path / "list.png"))
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 360  # no sideways scrolling
        assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") == "rgb(23, 33, 43)"
        tile.click()
        expect(page.locator("#strength")).to_have_value("100")
        page.wait_for_function("() => document.getElementById('before').complete && "
                               "document.getElementById('before').naturalWidth > 0")
        drawing = canvas_pixels(page)

        box = page.locator("#compare").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
        split = float(page.locator("#divider").get_attribute("aria-valuenow"))
        assert 75 <= split <= 85, split

        page.locator("#strength").fill("40")  # as a thumb drags it: input events, the picture follows
        expect(page.locator("#strength-value")).to_have_text("40%")
        page.wait_for_timeout(200)
        preview = canvas_pixels(page)
        photo = np.asarray(app.picture(result["photo"]))
        assert np.abs(preview.astype(float) - blend(photo, drawing, 0.4)).mean() < 1.5, \
            "the page's preview is the server's blend"
        assert np.abs(preview.astype(float) - drawing).mean() > 5
        page.screenshot(path=str(tmp_path / "viewer-40.png"))

        expect(page.locator("#keep")).to_have_text("Keep 40%")
        refused = []  # the bot's proxy answers 502 twice while the drawing is followed (a restart, say)

        def restarting(route: Any) -> None:
            if len(refused) < 2:
                refused.append(route.request.url)
                route.fulfill(status=502, body="Bad Gateway")
            else:
                route.continue_()
        page.route("**/app/api/jobs/**", restarting)
        page.locator("#keep").click()
        expect(page.locator("#strength")).to_have_value("40", timeout=60_000)
        page.wait_for_function("() => !document.getElementById('keep').disabled")
        kept = app.results(uid)[0]
        assert kept["strength"] == 40 and kept["id"] != result["id"]
        drawn = np.asarray(app.picture(kept["image"]), float)
        assert np.abs(drawn - preview).mean() < 4, "what was kept is what the page showed"
        assert len(refused) == 2  # and the page asked again, and got there
        expect(page.locator("#status")).to_have_text("Kept: drawn at 40%.")
        expect(page.locator("#send")).to_be_visible()  # nothing changed since: the main action sends it
        page.screenshot(path=str(tmp_path / "kept.png"))

        page.locator("#open-styles").click()
        expect(page.locator('.style-tile[data-style="tiny"] img')).to_be_visible(timeout=60_000)
        page.screenshot(path=str(tmp_path / "styles.png"))

        page.locator("#back").click()  # to the viewer; Keep at 70%, then straight back to the list
        page.locator("#strength").fill("70")
        before = len(app.results(uid))
        page.locator("#keep").click()
        page.locator("#back").click()
        expect(page.locator("#list")).to_be_visible()
        app_results = wait_for(lambda: len(app.results(uid)) > before and app.results(uid), 60, "the 70% drawing")
        assert app_results[0]["strength"] == 70
        page.wait_for_timeout(1500)  # the page has heard the job end by now
        expect(page.locator("#list")).to_be_visible()  # and did not pull the user back into a viewer
        expect(page.locator("#viewer")).to_be_hidden()
        expect(page.locator(f'.result[data-id="{app_results[0]["id"]}"]')).to_be_visible(timeout=10_000)
    finally:
        page.close()


def test_the_page_speaks_chinese_in_a_light_theme_and_one_sentence_unsigned(app: App, browser: Any,
                                                                            tmp_path: Path) -> None:
    from playwright.sync_api import expect

    uid = 6902
    drawn_photo(app, uid, seed=70)
    (result,) = app.results(uid)
    light = {"bg_color": "#ffffff", "text_color": "#000000", "button_color": "#3390ec", "button_text_color": "#ffffff",
             "secondary_bg_color": "#f4f4f5", "hint_color": "#707579"}
    page = phone(browser, app, uid, light, lang="zh", query=f"?r={result['id']}")
    try:
        expect(page.locator("#viewer")).to_be_visible(timeout=30_000)  # the result's own button opens it
        expect(page.locator("#send")).to_have_text("发送到聊天")
        assert page.evaluate("() => document.documentElement.lang") == "zh-CN"
        page.screenshot(path=str(tmp_path / "zh-light.png"))
    finally:
        page.close()

    unsigned = phone(browser, app, None, light)
    try:
        expect(unsigned.locator("#error")).to_have_text("Open this page from the bot's chat in Telegram.")
        expect(unsigned.locator(".result")).to_have_count(0)
    finally:
        unsigned.close()
    assert call(app.base, "/app").status == 200


def test_the_preview_matches_the_server_for_colours_and_strength(browser: Any) -> None:
    """The page's maths on its own, against inference/colour.py: random colours, every case of the blend."""
    from inference.colour import keep_colours

    page = colour_page(browser)
    try:
        rng = np.random.default_rng(7)
        photo, drawing = (rng.integers(0, 256, (16, 16, 3), dtype=np.uint8) for _ in range(2))
        photo[0] = np.arange(0, 256, 16)[:, None]  # greys, whose hue is the drawing's
        drawing[1] = np.arange(8, 256, 16)[:, None]
        for t, colours in ((0.0, False), (0.35, False), (0.8, True), (1.0, True), (1.0, False)):
            got = page.evaluate("""([photo, drawing, t, colours]) => {
                const rgba = (a) => { const o = new Uint8ClampedArray(a.length / 3 * 4);
                    for (let i = 0; i < a.length / 3; i++) { o.set(a.slice(3 * i, 3 * i + 3), 4 * i); } return o; };
                const out = new Uint8ClampedArray(photo.length / 3 * 4);
                const [p, d] = [oklab(rgba(photo)), oklab(rgba(drawing))];
                mix(p, colours ? keptColours(p, d) : d, t, out);
                return Array.from(out); }""", [photo.ravel().tolist(), drawing.ravel().tolist(), t, colours])
            mine = np.asarray(got, np.uint8).reshape(16, 16, 4)[:, :, :3].astype(float)
            target = keep_colours(photo, drawing) if colours else drawing
            expected = blend(photo, target, t).astype(float)
            assert np.abs(mine - expected).max() <= 1, (t, colours)
    finally:
        page.close()


# Telegram's WebApp object as a client of some Bot API version has it: data, version and methods put in by telegram().
TELEGRAM_STUB = """(() => {
    const [data, version, methods] = %s;
    window.called = [];
    const newer = (v) => { const [a, b] = [version, v].map((s) => s.split(".").map(Number));
        return a[0] > b[0] || (a[0] === b[0] && (a[1] || 0) >= (b[1] || 0)); };
    const webApp = { initData: data, initDataUnsafe: { user: { language_code: "en" } }, version, themeParams: {},
        colorScheme: "light", isVersionAtLeast: newer, ready() {}, expand() {}, onEvent() {} };
    for (const name of methods) webApp[name] = (...args) => { window.called.push([name, ...args]); };
    window.Telegram = { WebApp: webApp };
})();"""


def telegram(browser: Any, bot: App, uid: int, version: str, methods: tuple[str, ...], query: str) -> Any:
    """The page inside a Telegram client of this Bot API ``version``, its WebApp object stubbed with ``methods``
    among downloadFile, shareToStory and openLink: each records its calls in ``window.called``."""
    page = browser.new_page(viewport={"width": 360, "height": 740}, device_scale_factor=2)
    page.route("https://telegram.org/**", lambda route: route.abort())
    page.add_init_script(TELEGRAM_STUB % json.dumps([init_data(uid, TOKEN), version, list(methods)]))
    page.goto(f"{bot.base}/app{query}#tgWebAppVersion={version}")
    return page


def called(page: Any, name: str) -> list[Any]:
    """The page's calls of Telegram's ``name``, each with its arguments; a signed address among them as the
    picture it names (:func:`~testkit.webapp.unsigned`), and so compared with ``unsigned(...)``."""
    def named(value: Any) -> Any:
        if isinstance(value, str) and "/app/img/" in value:
            return unsigned(value)
        if isinstance(value, dict):
            return {k: named(v) for k, v in value.items()}
        return value

    return [[named(a) for a in c[1:]] for c in page.evaluate("() => window.called") if c[0] == name]


def test_save_hd_has_it_made_then_telegram_downloads_it_and_a_story_shares_the_picture(hd_app: App, browser: Any,
                                                                                       tmp_path: Path) -> None:
    from playwright.sync_api import expect

    uid = 6911
    drawn_photo(hd_app, uid, seed=71)
    (result,) = hd_app.results(uid)
    page = telegram(browser, hd_app, uid, "8.0", ("downloadFile", "shareToStory", "openLink"), f"?r={result['id']}")
    try:
        expect(page.locator("#viewer")).to_be_visible(timeout=30_000)
        expect(page.locator("#save-hd")).to_have_text("Save HD")
        expect(page.locator("#hd-link")).to_be_hidden()
        expect(page.locator("#story-link")).to_be_hidden()
        page.locator("#share-story").click()  # no HD yet: the drawing itself
        assert called(page, "shareToStory") == [[unsigned(hd_app.base + result["image"]), {}]]

        page.locator("#save-hd").click()
        (download,) = wait_for(lambda: called(page, "downloadFile"), 120, "Telegram's download")
        hd = hd_app.results(uid)[0]["hd"]
        assert hd and download == [{"url": unsigned(hd_app.base + hd), "file_name": f"animebot-hayao-{result['id']}-hd.jpg"}]
        expect(page.locator("#status")).to_have_text("Telegram is saving the HD picture.")
        answer = call(hd_app.base, hd)
        assert answer.status == 200
        page.screenshot(path=str(tmp_path / "hd-saved.png"))
        page.locator("#share-story").click()  # now the HD
        assert called(page, "shareToStory")[1] == [unsigned(hd_app.base + hd), {}]
    finally:
        page.close()


def test_a_client_without_them_gets_plain_links_to_the_pictures(hd_app: App, browser: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    uid = 6912
    drawn_photo(hd_app, uid, seed=72)
    (result,) = hd_app.results(uid)
    page = telegram(browser, hd_app, uid, "6.0", ("openLink",), f"?r={result['id']}")
    try:
        expect(page.locator("#viewer")).to_be_visible(timeout=30_000)
        expect(page.locator("#share-story")).to_be_hidden()
        expect(page.locator("#story-link")).to_have_attribute("href", signed_as(hd_app.base + result["image"]))
        page.locator("#save-hd").click()  # no HD yet: it is made, then linked to
        expect(page.locator("#hd-link")).to_be_visible(timeout=120_000)
        expect(page.locator("#save-hd")).to_be_hidden()
        hd = hd_app.results(uid)[0]["hd"]
        assert hd and unsigned(page.locator("#hd-link").get_attribute("href")) == unsigned(hd_app.base + hd)
        expect(page.locator("#hd-link")).to_have_text("Open HD picture")
        expect(page.locator("#story-link")).to_have_attribute("href", signed_as(hd_app.base + hd))
        page.screenshot(path=str(tmp_path / "old-client.png"))
        page.locator("#hd-link").click()
        assert called(page, "openLink") == [[unsigned(hd_app.base + hd)]]  # Telegram opens it, outside the page's frame
    finally:
        page.close()


def test_without_hd_only_the_drawing_is_shared(app: App, browser: Any) -> None:
    from playwright.sync_api import expect

    uid = 6913
    drawn_photo(app, uid, seed=73)
    (result,) = app.results(uid)
    page = telegram(browser, app, uid, "8.0", ("downloadFile", "shareToStory"), f"?r={result['id']}")
    try:
        expect(page.locator("#viewer")).to_be_visible(timeout=30_000)
        expect(page.locator("#save-hd")).to_be_hidden()
        expect(page.locator("#hd-link")).to_be_hidden()
        page.locator("#share-story").click()
        assert called(page, "shareToStory") == [[unsigned(app.base + result["image"]), {}]]
    finally:
        page.close()


# Every element the page shows lies within a phone's width, and no button or label cuts its words off.
OVERFLOWING = """() => {
  const bad = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || getComputedStyle(el).visibility === "hidden") continue;
    let [left, right] = [r.left, r.right];  // what shows of it: a box that clips (a title's ellipsis) cuts it
    for (let box = el.parentElement; box && box !== document.body; box = box.parentElement) {
      if (getComputedStyle(box).overflowX === "visible") continue;
      const b = box.getBoundingClientRect();
      [left, right] = [Math.max(left, b.left), Math.min(right, b.right)];
    }
    const name = el.id || el.className || el.tagName;
    if (left < -1 || right > innerWidth + 1) bad.push(`${name} spans ${Math.round(left)}..${Math.round(right)}`);
    if (["BUTTON", "A", "LABEL", "P"].includes(el.tagName) && el.scrollWidth > el.clientWidth + 1)
      bad.push(`${name} cuts its text: ${el.scrollWidth} > ${el.clientWidth}`);
  }
  return bad;
}"""
LANG_ATTRIBUTE = {"zh": "zh-CN", "pt-br": "pt-BR"}


@pytest.mark.parametrize("lang", LANGS)
def test_every_language_fits_a_phone_and_arabic_and_persian_read_right_to_left(app: App, browser: Any, lang: str,
                                                                                tmp_path: Path) -> None:
    from playwright.sync_api import expect

    uid = 6950 + LANGS.index(lang)
    drawn_photo(app, uid, seed=uid)
    (result,) = app.results(uid)
    words, rtl = page_words()[lang], lang in ("ar", "fa")
    page = phone(browser, app, uid, DARK, lang={"pt-br": "pt", "fa": "fa-IR"}.get(lang, lang))
    try:
        expect(page.locator(".result")).to_have_count(1, timeout=30_000)
        expect(page.locator("#title")).to_have_text(words["title"])
        assert page.evaluate("() => [document.documentElement.lang, document.documentElement.dir]") == \
            [LANG_ATTRIBUTE.get(lang, lang), "rtl" if rtl else "ltr"]
        assert page.evaluate(OVERFLOWING) == []
        if lang in ("ar", "fa", "ru"):
            page.screenshot(path=str(tmp_path / f"{lang}-list.png"))

        page.locator(".result").click()
        expect(page.locator("#send")).to_have_text(words["send"])
        page.wait_for_function("() => document.getElementById('before').naturalWidth > 0")
        assert page.evaluate(OVERFLOWING) == []
        photo_tag, anime_tag = (page.locator(f"#tag-{tag}").bounding_box() for tag in ("photo", "anime"))
        assert (photo_tag["x"] > anime_tag["x"]) == rtl  # the photo is where reading starts
        assert page.evaluate("() => getComputedStyle(document.getElementById('strength')).direction") == \
            ("rtl" if rtl else "ltr")  # the slider grows the way the page reads

        box = page.locator("#compare").bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2, steps=4)
        page.mouse.up()
        shown = float(page.locator("#divider").get_attribute("aria-valuenow") or 0)
        assert abs(shown - (20 if rtl else 80)) <= 2  # the photo's share, counted from where reading starts
        divider = page.locator("#divider").bounding_box()
        assert abs(divider["x"] + divider["width"] / 2 - (box["x"] + box["width"] * 0.8)) <= 3  # under the finger
        if lang in ("ar", "fa", "ru"):
            page.screenshot(path=str(tmp_path / f"{lang}-viewer.png"))
    finally:
        page.close()
