"""Seeing before choosing: /style's preview sheet, "All styles" under a result, the keyboards that
stay usable with many styles, /about's credits, and the face style's word on photos that are no selfie.

The keyboard, request and sheet tests are pure and quick. The rest run the real bot process through
the fake Bot API with six real styles (hayao, cute, hayao_v3, shinkai, jp_face, sketch), the face
detector and the registry's sample photo, all from ../shared; they skip where it is absent.
"""
from __future__ import annotations

import asyncio
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from bot.flow.access import Access, Limits
from bot.words.catalogue import t
from bot.flow.orders import face_share
from bot.chat.keyboards import (ALBUM_MAX, ALL_STYLES, AVATAR, FULL_SIZE, PREVIEW_MINE, REDRAW, SET_LANG, SET_OPTION,
                                SET_STYLE, STICKER, CUTOUT, album_styles, result_keyboard, style_keyboard, style_menu_text)
from bot.flow.kinds.registry import plan
from bot.flow.previews import PREVIEW_SETTINGS, compose, layout, sheet_key
from bot.flow.requests import REQUEST_VERSION, Request, Source, request_from_json, request_to_json
from bot.styles import Styles
from inference.pipeline import ConvertSettings, Converted
from testkit.bot_harness import private_chat, start_bot
from testkit.bot_in_process import InProcessBot, serving
from testkit.models import MODELS
from testkit.pictures import synthetic_photo
from testkit.journal import drawn_by, journal_rows, settled
from testkit.replies import album_files, answers, buttons
from testkit.fake_telegram import Call, FakeTelegram
from storage.journal import Journal, NewJob
from storage.database import Database
from weights.registry import builtin_entries
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GALLERY = ("hayao", "cute", "hayao_v3", "shinkai", "jp_face", "sketch")  # cartoon's engine is not needed here
EIGHT = GALLERY + ("cartoon", "paprika")
ROUTES = (REDRAW, FULL_SIZE, ALL_STYLES, AVATAR, STICKER, CUTOUT, PREVIEW_MINE, SET_STYLE, SET_LANG, SET_OPTION)
ADMIN = 880001
SPOILER_ADMIN = 880002  # an admin of its own (no quota), so ADMIN's counts stay the All styles test's
QUOTA = 4
# Below the number of styles: a preview sheet still counts one photo against it, as against the quota.
PER_USER_LIMIT = 5


def styles_of(names: tuple[str, ...], default: str = "hayao") -> Styles:
    entries = {e.name: e for e in builtin_entries()}
    return Styles(tuple(entries[n] for n in names), default, ConvertSettings())


def markup_rows(markup: Any) -> list[list[tuple[str, str]]]:
    return [[(b.text, str(b.callback_data)) for b in row] for row in markup.inline_keyboard]


# --- the pure parts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("names", [EIGHT, tuple(e.name for e in builtin_entries() if e.kind == "style")],
                         ids=["8 styles", "every known style"])
def test_under_a_result_two_rows_of_redraws_at_most_and_every_style_reachable(names: tuple[str, ...]) -> None:
    styles = styles_of(names)
    assert len(styles.names) == len(names) >= 8
    for style in styles.names:
        for lang in ("en", "zh"):
            rows = markup_rows(result_keyboard(styles, style, "Ab-_0123456x", lang))
            redraw_rows, uses, last = rows[:-2], rows[-2], rows[-1]
            assert 1 <= len(redraw_rows) <= 2 and all(1 <= len(row) <= 4 for row in redraw_rows), rows
            assert [REDRAW.match(d) is not None for row in redraw_rows for _, d in row] == \
                [True] * sum(map(len, redraw_rows))
            assert [d for _, d in uses] == ["t:Ab-_0123456x", "v:Ab-_0123456x"]
            assert [d for _, d in last] == ["a:Ab-_0123456x", "n:Ab-_0123456x", "f:Ab-_0123456x"]
            direct = [REDRAW.match(d).group(1) for row in redraw_rows for _, d in row]  # type: ignore[union-attr]
            # short labels: the style's display name in the user's language, nothing more
            assert [text for row in redraw_rows for text, _ in row] == [styles.display(n, lang) for n in direct]
            album = album_styles(styles, style)
            others = set(styles.names) - {style}
            assert style not in direct and style not in album and len(album) <= ALBUM_MAX
            assert set(direct) | set(album) == others, (style, direct, album)
            for _, data in (item for row in rows for item in row):
                assert len(data.encode()) <= 64
                assert sum(1 for route in ROUTES if route.match(data)) == 1, data


def test_the_style_menu_is_compact_and_numbered_like_the_sheet() -> None:
    styles = styles_of(EIGHT)
    rows = markup_rows(style_keyboard(styles, "shinkai", 77, "zh", own_photo=True))
    assert all(2 <= len(row) <= 3 for row in rows[:-1]) and len(rows) == 4
    assert rows[-1] == [("🖼 用我上一张照片预览", "p:77")]
    labels = [text for row in rows[:-1] for text, _ in row]
    assert labels == [("✅ " if n == "shinkai" else "") + f"{i} {styles.display(n, 'zh')}"
                      for i, n in enumerate(styles.ordered, 1)]
    assert styles.ordered[-1] == "jp_face"  # the face style, made for selfies, comes last
    assert not any(d == "p:77" for row in markup_rows(style_keyboard(styles, "hayao", 77, "en")) for _, d in row)
    for forged in ("a:", "a:short", "a:" + "x" * 13, "p:", "p:1x", "p:-1", "a:Ab-_0123456x:1"):
        assert not any(route.match(forged) for route in ROUTES), forged


def test_without_a_sample_the_menu_is_a_text_list_that_invites_a_photo() -> None:
    styles = styles_of(GALLERY)
    for lang in ("en", "zh"):
        text = style_menu_text(styles, "cute", lang, own_photo=False)
        assert text.startswith(t(lang, "style_prompt", style=styles.display("cute", lang)))
        for i, name in enumerate(styles.ordered, 1):
            assert f"{i}. {styles.display(name, lang)}" in text and styles.describe(name, lang) in text
        assert text.endswith(t(lang, "style_invite"))
        assert style_menu_text(styles, "cute", lang, own_photo=True).endswith(t(lang, "style_own_hint"))


def test_the_quota_counts_only_what_must_be_drawn(tmp_path: Path) -> None:
    async def go() -> None:
        journal_db = await Database.open(tmp_path / "bot.db")
        journal = Journal(journal_db)
        limits = Limits(journal, Access(), per_minute=0, per_day=3)
        await journal.create_job(NewJob("photo", 1, 1, 1, "{}"))
        await journal.finish_job("photo", "done", drawn=1)
        allowed, refusal = await limits.allowance(1, 5, drawing=5)
        assert allowed == 2 and refusal is not None and refusal.code == "quota_reached"
        assert await limits.allowance(1, 5, drawing=2) == (5, None)  # "All styles" with three already drawn
        await journal.create_job(NewJob("styles", 1, 1, 2, "{}"))
        await journal.finish_job("styles", "done", drawn=2)
        assert (await limits.allowance(1, 5, drawing=1))[0] == 0  # the quota is spent
        assert await limits.allowance(1, 5, drawing=0) == (5, None)  # all from the cache: free
        await journal_db.close()

    asyncio.run(go())


def test_all_styles_and_previews_survive_the_journal_and_old_rows_still_read() -> None:
    assert REQUEST_VERSION == 6
    src = Source("F1", "U1", 1234, sha256="ab" * 32)
    many = Request("9", 5, 5, 3, "en", "cute", (src,), ConvertSettings(max_side=320), query_id="q",
                   styles=("cute", "hayao_v3", "jp_face"))
    assert request_from_json(request_to_json(many)) == many
    assert (plan(many).units(many), [s for _, s in many.items], many.first(2).styles) == (3, ["cute", "hayao_v3", "jp_face"],
                                                                                ("cute", "hayao_v3"))
    sample = Request("10", 5, 5, 4, "zh", "hayao", (Source("", sha256="cd" * 32, sample=True),), PREVIEW_SETTINGS,
                     styles=GALLERY, kind="preview")
    assert request_from_json(request_to_json(sample)) == sample
    assert plan(sample).units(sample) == 0 and len(sample.items) == len(GALLERY)
    own = Request("11", 5, 5, 4, "en", "hayao", (src,), PREVIEW_SETTINGS, styles=GALLERY, kind="preview")
    assert plan(own).units(own) == 1
    album = Request("12", 5, 5, 4, "en", "hayao", (src, Source("F2")), ConvertSettings())
    assert (plan(album).units(album), album.first(1).sources, album.drawn_styles) == (2, (src,), ("hayao",))

    clip = Request("13", 5, 5, 4, "en", "hayao", (Source("F3", kind="video", seconds=3.2),), ConvertSettings())
    assert request_from_json(request_to_json(clip)) == clip and plan(clip).units(clip) == 4  # a photo per second
    for_the_page = Request("app-x", 5, 5, None, "en", "hayao", (src,), ConvertSettings(strength=40), answer="app")
    assert request_from_json(request_to_json(for_the_page)) == for_the_page

    old = json.loads(request_to_json(album))  # as version 2 wrote it: no styles, no preview, no sample, no clips
    old["v"] = 2
    for field in ("styles", "kind", "answer"):
        del old[field]
    for s in old["sources"]:
        for field in ("sample", "kind", "seconds"):
            del s[field]
    assert request_from_json(json.dumps(old)) == album


def test_a_sheet_lays_out_labelled_tiles_and_its_key_follows_every_tile_version() -> None:
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (220, 220, 40)]
    cells = []
    for i, colour in enumerate(colours):
        buf = io.BytesIO()
        Image.new("RGB", (300, 200) if i == 0 else (150, 100), colour).save(buf, "PNG")  # the photo is shrunk
        cells.append((f"{i} Style", buf.getvalue()))
    data, w, h = compose(cells)
    size, boxes = layout(4, (150, 100))
    sheet = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.float32)
    assert (w, h) == size and sheet.shape[:2] == (h, w)
    for colour, (x0, y0, x1, y1) in zip(colours, boxes):
        tile = sheet[y0 + 5:y1 - 5, x0 + 5:x1 - 5]
        assert np.abs(tile.mean(axis=(0, 1)) - colour).max() < 8, (colour, tile.mean(axis=(0, 1)))
        label = sheet[y1 + 2:y1 + 30, x0:x1]
        assert label.max() > 200 and label.min() < 60  # light text on the dark strip

    styles = styles_of(GALLERY)
    key = sheet_key(styles, "e" * 64, styles.ordered)
    assert key == sheet_key(styles_of(GALLERY), "e" * 64, styles.ordered) and key.startswith("e" * 64 + ":@sheet:")
    other_faces = Styles(styles.entries, "hayao", ConvertSettings(), {"hayao": "jp_face"})  # jp_face draws its faces
    assert sheet_key(other_faces, "e" * 64, styles.ordered) != key
    assert sheet_key(styles, "e" * 64, styles.ordered[:-1]) != key


def test_the_largest_face_is_measured_against_the_short_side() -> None:
    def converted(faces: list[dict[str, object]], detected: bool = True) -> Converted:
        timings = {"model_s": 0.1, **({"detect_s": 0.01} if detected else {})}
        return Converted(b"", (800, 600), (400, 300), "jp_face", "x", timings, faces)

    assert face_share(converted([{"box": [10, 10, 70, 160], "score": 0.9}, {"box": [0, 0, 30, 30]}])) == 0.25
    assert face_share(converted([])) == 0.0  # looked, found none
    assert face_share(converted([], detected=False)) is None  # nobody looked


# --- the real bot ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gallery_home(hayao_file: Path, photos: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir with the six styles, the face detector and the sample photo, imported by hash."""
    store = ModelStore(tmp_path_factory.mktemp("gallery-home"))
    for name in (*GALLERY, "det_500m"):
        path = MODELS / store.entry(name).filename
        if not path.is_file():
            pytest.skip(f"real model file {path} is absent (it lives in ../shared/models on CI)")
        store.import_file(path)
    sample = next((p for p in photos if p.name == "group_3_faces.jpg"), None)
    if sample is None:
        pytest.skip("the sample photo group_3_faces.jpg is absent from ../shared/photos")
    assert store.import_file(sample).name == "sample"
    return store.home


@pytest.fixture(scope="module")
def served(gallery_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    assert PER_USER_LIMIT < len(GALLERY)
    with serving(tmp_path_factory.mktemp("bot"), gallery_home, ANIMEBOT_MAX_SIDE="320",
                 ANIMEBOT_ADMINS=f"{ADMIN},{SPOILER_ADMIN}", ANIMEBOT_DAILY_QUOTA=str(QUOTA),
                 ANIMEBOT_PER_USER_LIMIT=str(PER_USER_LIMIT), ANIMEBOT_RATE_PER_MINUTE="0") as both:
        yield both


@pytest.fixture(scope="module")
def gallery() -> Styles:
    return styles_of(GALLERY)


def picture(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.float32)


def photos_to(fake: FakeTelegram, message: dict[str, Any], since: int = 0) -> list[Call]:
    return answers(fake, message, "sendPhoto")[since:]


def one_photo(fake: FakeTelegram, message: dict[str, Any], since: int = 0, timeout: float = 600) -> Call:
    return fake.wait_for(lambda: photos_to(fake, message, since), timeout)[0]


def albums_to(fake: FakeTelegram, message: dict[str, Any]) -> list[Call]:
    return answers(fake, message, "sendMediaGroup")


def drawings_logged(bot: InProcessBot, size: str) -> list[str]:
    """The styles the workers drew from a photo of ``size`` (e.g. 900x900), one log line per drawing."""
    return re.findall(rf"job \S+: (\S+) {size} -> \d+x\d+, waited", bot.log())


def photo_bytes(name: str, photos: list[Path], mirrored: bool = False) -> bytes:
    """A shared photo's bytes; mirrored, a photo no other test sends (its own cache entries)."""
    data = next(p for p in photos if p.name == name).read_bytes()
    if not mirrored:
        return data
    buf = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(buf, "JPEG")
    return buf.getvalue()


def test_style_previews_are_drawn_once_by_the_workers_then_sent_by_file_id(
        served: tuple[InProcessBot, FakeTelegram], gallery: Styles) -> None:
    bot, fake = served
    chat, user = private_chat(8101)
    first = fake.text_message(chat, user, "/style")
    sheet = one_photo(fake, first)
    assert "photo" in sheet.files, "the first sheet is an upload"
    statuses = [c.params["text"] for c in fake.replies_to(first) if c.method == "sendMessage"]
    assert statuses == ["Drawing every style on one photo for the previews…"]
    assert sorted(drawings_logged(bot, "900x900")) == sorted(GALLERY), "one order per style, drawn by the workers"
    assert "Hayao" in sheet.params["caption"]
    assert buttons(sheet) == [f"s:{n}:8101" for n in gallery.ordered]  # no photo of theirs yet: no own preview

    image = picture(fake.sent_file(sheet, "photo"))
    size, boxes = layout(1 + len(GALLERY), (PREVIEW_SETTINGS.max_side,) * 2)  # the sample photo, then each style
    assert image.shape[:2] == size[::-1]
    tiles = [image[y0:y1, x0:x1] for x0, y0, x1, y1 in boxes]
    for i in range(len(tiles)):
        assert tiles[i].std() > 20, f"tile {i} is not a picture"
        for j in range(i):
            assert np.abs(tiles[i] - tiles[j]).mean() > 4, f"tiles {j} and {i} look the same"

    again_chat, again_user = private_chat(8102)
    second = fake.text_message(again_chat, again_user, "/style")
    resent = one_photo(fake, second, timeout=60)
    assert not resent.files and resent.params["photo"] == sheet.result["photo"][-1]["file_id"]
    assert len(drawings_logged(bot, "900x900")) == len(GALLERY), "the second /style drew nothing"
    assert not [c for c in fake.replies_to(second) if c.method == "sendMessage"], "a cached sheet needs no status"

    fake.press(again_user, resent.result, "s:shinkai:8102")
    edit = fake.wait_for(lambda: fake.calls_to("editMessageCaption", again_chat["id"]), 60)[0]
    assert "Shinkai" in edit.params["caption"]
    ticked = [b["text"] for row in edit.params["reply_markup"]["inline_keyboard"] for b in row
              if b["text"].startswith("✅")]
    assert len(ticked) == 1 and "Shinkai" in ticked[0]  # the menu stays, for a change of mind


def test_all_styles_is_an_album_of_every_other_style_each_an_ordinary_result(
        served: tuple[InProcessBot, FakeTelegram], gallery: Styles, photos: list[Path]) -> None:
    bot, fake = served
    chat, user = private_chat(ADMIN)  # no quota in the way; what it counts is read from the journal
    original = fake.photo_message(chat, user, photo_bytes("square_512.jpg", photos))
    result = one_photo(fake, original)
    assert any(d.startswith("a:") for d in buttons(result))
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, ADMIN) == 1

    fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("a:")))
    album = fake.wait_for(lambda: albums_to(fake, original), 600)[0]
    items = album_files(fake, album)
    others = [n for n in gallery.ordered if n != "hayao"]
    assert [c.split("\n")[0] for c, _ in items] == [gallery.display(n, "en") for n in others]
    pictures = [picture(data) for _, data in items] + [picture(fake.sent_file(result, "photo"))]
    assert all(p.shape == pictures[0].shape for p in pictures)
    for i in range(len(pictures)):
        for j in range(i):
            assert np.abs(pictures[i] - pictures[j]).mean() > 4, (others + ["hayao"])[i]
    button_row = fake.wait_for(lambda: [c for c in fake.replies_to(original) if c.method == "sendMessage"
                                        and "by style" in c.params["text"]], 60)[0]
    assert len(buttons(button_row)) == len(others)
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    press_job = journal_rows(bot.home, "SELECT photos, drawn FROM jobs WHERE user_id = ? ORDER BY created_at DESC"
                                       " LIMIT 1", ADMIN)
    assert press_job == [(len(others), len(others))], "once per style"

    # each drawing is an ordinary cached result: a redraw button answers with it, by file_id
    result_id = next(d for d in buttons(result) if d.startswith("a:"))[2:]
    fake.press(user, result.result, f"r:cute:{result_id}")
    cute = one_photo(fake, original, since=1, timeout=60)
    assert not cute.files and cute.params["photo"] == album.result[0]["photo"][-1]["file_id"]
    fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("a:")))
    again = fake.wait_for(lambda: albums_to(fake, original)[1:], 60)[0]
    assert not again.files, "a repeat is sent by file_id, nothing drawn or uploaded"
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, ADMIN) == 1 + len(others)


def test_all_styles_over_the_quota_draws_what_fits_and_says_the_rest(
        served: tuple[InProcessBot, FakeTelegram], gallery: Styles, photos: list[Path]) -> None:
    bot, fake = served
    chat, user = private_chat(8201)
    img = Image.open(io.BytesIO(photo_bytes("town_1280x854.jpg", photos))).convert("RGB").resize((480, 320))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    original = fake.photo_message(chat, user, buf.getvalue())
    result = one_photo(fake, original)
    fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("a:")))
    album = fake.wait_for(lambda: albums_to(fake, original), 600)[0]
    left = QUOTA - 1
    others = [n for n in gallery.ordered if n != "hayao"]
    assert [c.split("\n")[0] for c, _ in album_files(fake, album)] == [gallery.display(n, "en") for n in others[:left]]
    note = fake.wait_for(lambda: [c for c in fake.replies_to(original) if c.method == "sendMessage"
                                  and "Not drawn" in c.params["text"]], 60)[0]
    assert note.params["text"].startswith(f"Not drawn: the last {len(others) - left} of the {len(others)} styles")
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, user["id"]) == QUOTA


def test_a_preview_on_my_last_photo_costs_one_photo_and_only_once(
        served: tuple[InProcessBot, FakeTelegram], gallery: Styles, photos: list[Path]) -> None:
    bot, fake = served
    chat, user = private_chat(8301)
    original = fake.photo_message(chat, user, photo_bytes("square_512.jpg", photos, mirrored=True))
    one_photo(fake, original)
    menu_msg = fake.text_message(chat, user, "/style")
    menu = one_photo(fake, menu_msg)
    assert buttons(menu)[-1] == "p:8301"
    _, stranger = private_chat(8302)
    fake.press(stranger, menu.result, "p:8301")
    fake.wait_for(lambda: [c for c in fake.calls_to("answerCallbackQuery") if "someone else" in c.params.get("text", "")])
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    before = drawn_by(bot.home, user["id"])

    fake.press(user, menu.result, "p:8301")
    own = one_photo(fake, menu_msg, since=1)
    assert "Your last photo" in own.params["caption"] and "photo" in own.files
    image = picture(fake.sent_file(own, "photo"))
    size, boxes = layout(1 + len(GALLERY), (PREVIEW_SETTINGS.max_side,) * 2)  # a square photo: square tiles
    assert image.shape[:2] == size[::-1]
    tiles = [image[y0:y1, x0:x1] for x0, y0, x1, y1 in boxes]
    assert all(np.abs(tiles[i] - tiles[0]).mean() > 4 for i in range(1, len(tiles)))
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, user["id"]) == before + 1, "every style on it, for one photo of the quota"

    fake.press(user, menu.result, "p:8301")
    repeat = one_photo(fake, menu_msg, since=2, timeout=60)
    assert not repeat.files and repeat.params["photo"] == own.result["photo"][-1]["file_id"]
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, user["id"]) == before + 1


def test_about_lists_each_style_with_its_credits_and_licence(served: tuple[InProcessBot, FakeTelegram],
                                                             gallery: Styles) -> None:
    _, fake = served
    chat, user = private_chat(8401)
    fake.text_message(chat, user, "/about")
    text = fake.wait_for(lambda: fake.messages_to(chat["id"]), 60)[0].params["text"]
    for name in GALLERY:
        entry = gallery.entry(name)
        assert gallery.display(entry.name, "en") in text and entry.credits in text and entry.license in text, name
    assert "Cartoon" not in text, "only the installed styles"


def test_the_face_style_says_it_is_made_for_selfies_only_under_small_faces(
        served: tuple[InProcessBot, FakeTelegram], photos: list[Path]) -> None:
    _, fake = served
    chat, user = private_chat(8501)
    scene = fake.photo_message(chat, user, photo_bytes("street_1279x867.jpg", photos), caption="/anime jp_face")
    caption = one_photo(fake, scene).params.get("caption") or ""
    assert "made for selfies" in caption and "try Hayao" in caption, caption
    selfie = fake.photo_message(chat, user, photo_bytes("portrait_closeup.jpg", photos), caption="/anime jp_face")
    assert "selfies" not in (one_photo(fake, selfie).params.get("caption") or "")


def test_all_styles_survives_a_crash_before_its_album_is_sent(gallery_home: Path, photos: list[Path],
                                                               tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        env = {"ANIMEBOT_MAX_SIDE": "256", "ANIMEBOT_RATE_PER_MINUTE": "0"}
        bot = start_bot(fake, tmp_path / "bot", gallery_home, **env)
        chat, user = private_chat(8601)
        try:
            original = fake.photo_message(chat, user, photo_bytes("town_1280x854.jpg", photos))
            result = one_photo(fake, original)

            def crash_on_the_album(method: str, params: dict[str, Any]) -> bool:
                if method == "sendMediaGroup":
                    bot.kill9()
                    return True
                return False

            fake.intercept = crash_on_the_album
            fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("a:")))
            fake.wait_for(lambda: bot.process.poll() is not None, 600)
            fake.intercept = None
            assert not albums_to(fake, original)
        except BaseException:
            bot.stop()
            raise
        bot = start_bot(fake, tmp_path / "bot", gallery_home, **env)
        try:
            album = fake.wait_for(lambda: albums_to(fake, original), 600)[0]
            assert len(album.params["media"]) == len(GALLERY) - 1
            fake.wait_for(lambda: settled(bot.home, fake), 60)
            assert len(albums_to(fake, original)) == 1
        finally:
            assert bot.stop() == 0, bot.log()
        assert "resumed" in bot.log()


def test_a_photo_sent_with_a_spoiler_keeps_it_in_every_answer_about_it(
        served: tuple[InProcessBot, FakeTelegram], gallery: Styles, photos: list[Path]) -> None:
    _, fake = served
    chat, user = private_chat(SPOILER_ADMIN)
    img = Image.open(io.BytesIO(photo_bytes("portrait_900x1200.jpg", photos))).convert("RGB").resize((150, 200))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    original = fake.photo_message(chat, user, buf.getvalue(), spoiler=True)
    result = one_photo(fake, original)
    assert result.params.get("has_spoiler") is True
    result_id = next(d for d in buttons(result) if d.startswith("a:"))[2:]

    fake.press(user, result.result, f"r:cute:{result_id}")
    assert one_photo(fake, original, since=1).params.get("has_spoiler") is True, "a redraw"
    fake.press(user, result.result, f"a:{result_id}")
    album = fake.wait_for(lambda: albums_to(fake, original), 600)[0]
    assert [item.get("has_spoiler") for item in album.params["media"]] == [True] * (len(GALLERY) - 1), "All styles"

    menu_msg = fake.text_message(chat, user, "/style")
    menu = one_photo(fake, menu_msg)  # the sample's sheet: the bot's own photo, no spoiler
    assert not menu.params.get("has_spoiler")
    fake.press(user, menu.result, f"p:{SPOILER_ADMIN}")
    own = one_photo(fake, menu_msg, since=1)
    assert "Your last photo" in own.params["caption"] and own.params.get("has_spoiler") is True, "its preview sheet"


def test_the_face_style_says_when_it_found_no_face_at_all(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat, user = private_chat(8502)
    faceless = fake.photo_message(chat, user, synthetic_photo(480, 360, seed=8502), caption="/anime jp_face")
    caption = one_photo(fake, faceless).params.get("caption") or ""
    assert "I found no face in this photo" in caption and "try Hayao" in caption, caption


def test_a_style_is_named_by_its_id_or_its_name_in_any_language() -> None:
    styles = styles_of(GALLERY)
    assert styles.resolve("JP_FACE") == styles.resolve("anime  FACE") == styles.resolve("Аниме-лицо") == "jp_face"
    assert styles.resolve("هایائو") == styles.resolve("宫崎骏") == styles.resolve("Хаяо") == "hayao"
    assert styles.resolve("Anime") is None and styles.resolve(None) == styles.default
    assert styles.listed("ru").endswith(" и " + f"{styles.display(styles.ordered[-1], 'ru')} ({styles.ordered[-1]})")
