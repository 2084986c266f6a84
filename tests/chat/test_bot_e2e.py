"""The real bot process, end to end over real HTTP, with the real Hayao model and real photos.

One bot serves this module (the default layout: one worker of two threads,
720 px); each test plays its own users so the tests do not see each
other's cache entries or replies.
"""
from __future__ import annotations

import io
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from inference.engine import load_face_tools, load_stylizer
from inference.pipeline import ConvertSettings, convert_bytes, fit_size
from testkit.bot_harness import group_chat, private_chat
from testkit.bot_in_process import InProcessBot, bot_in_process
from testkit.models import CUTE_FILE
from testkit.pictures import PHOTOS, psnr
from testkit.journal import handled, jobs_for
from testkit.replies import answers, first_answer, is_status
from testkit.fake_telegram import TOKEN, Call, FakeTelegram
from testkit.phone_files import FORMATS as PHONE_FORMATS, MIME, SUFFIX, as_phone_file
from testkit.words import sentences
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="session")
def shared_home(real_store: ModelStore) -> Path:
    return real_store.home


@pytest.fixture(scope="module")
def bot(fake: FakeTelegram, shared_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBot]:
    with bot_in_process(fake, tmp_path_factory.mktemp("bot"), shared_home) as running:
        yield running
    assert TOKEN.split(":")[1] not in running.log()


def photo(name: str) -> bytes:
    return (PHOTOS / name).read_bytes()


def photo_reply(fake: FakeTelegram, message: dict[str, Any], timeout: float = 180) -> Call:
    return first_answer(fake, message, "sendPhoto", timeout=timeout)


def text_reply(fake: FakeTelegram, message: dict[str, Any], timeout: float = 60) -> str:
    """The first sentence in reply to ``message``: no status, and no menu (a message with buttons)."""
    call = fake.wait_for(lambda: [c for c in answers(fake, message, "sendMessage") if "reply_markup" not in c.params],
                         timeout)[0]
    return str(call.params["text"])


def image_of(fake: FakeTelegram, call: Call, field: str = "photo") -> Image.Image:
    return Image.open(io.BytesIO(fake.sent_file(call, field)))


def buttons(call: Call) -> list[str]:
    return [b["callback_data"] for row in call.params["reply_markup"]["inline_keyboard"] for b in row]


@pytest.fixture(scope="module")
def engine(real_store: ModelStore):  # type: ignore[no-untyped-def]
    """What ``animebot convert`` makes with the defaults, for comparing the bot's replies."""
    models: dict[str, Any] = {}

    def convert(data: bytes, style: str = "hayao", **options: Any) -> Image.Image:
        if style not in models:
            model = load_stylizer(real_store, style)
            has_detector = real_store.is_installed(real_store.entry("det_500m"))
            models[style] = (model, load_face_tools(real_store, model) if has_detector else None)
        model, tools = models[style]
        return Image.open(io.BytesIO(convert_bytes(data, model, ConvertSettings(**options), tools).data))

    return convert


def test_private_photo_gets_anime_reply_like_the_engine(bot: InProcessBot, fake: FakeTelegram, engine) -> None:  # type: ignore[no-untyped-def]
    chat, user = private_chat(101)
    data = photo("street_1279x867.jpg")
    msg = fake.photo_message(chat, user, data)
    reply = photo_reply(fake, msg)

    got = image_of(fake, reply)
    assert got.size == fit_size(1279, 867, 720) == (720, 488)
    assert psnr(np.asarray(got.convert("RGB")), np.asarray(engine(data).convert("RGB"))) > 35
    assert np.asarray(got.convert("L"), np.float32).std() > 20  # a picture, not a flat fill
    # the status message appeared, then went away once the photo was sent
    status = [c for c in fake.replies_to(msg) if c.method == "sendMessage"]
    assert status and is_status(status[0]), status
    fake.wait_for(lambda: fake.calls_to("deleteMessage", chat["id"]), 10)
    assert fake.calls_to("sendChatAction", chat["id"])[0].params["action"] == "upload_photo"
    assert any(b.startswith("f:") for b in buttons(reply)) and not any(b.startswith("r:hayao:") for b in buttons(reply))


def test_image_document_gets_anime_reply(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(102)
    png = io.BytesIO()
    Image.open(PHOTOS / "square_512.jpg").save(png, "PNG")
    msg = fake.document_message(chat, user, png.getvalue(), "holiday.png", "image/png")
    assert image_of(fake, photo_reply(fake, msg)).size == (512, 512)


@pytest.mark.parametrize("fmt", PHONE_FORMATS)
def test_an_iphone_photo_sent_as_a_file_is_drawn_upright(bot: InProcessBot, fake: FakeTelegram, engine,  # type: ignore[no-untyped-def]
                                                        fmt: str) -> None:
    """An iPhone's HEIC (or an AVIF) sent as a file, stored sideways with its turn: drawn as the phone shows it."""
    chat, user = private_chat(116 + PHONE_FORMATS.index(fmt))
    upright = photo("portrait_900x1200.jpg")
    msg = fake.document_message(chat, user, as_phone_file(upright, fmt), f"IMG_4032{SUFFIX[fmt]}", MIME[fmt])
    got = np.asarray(image_of(fake, photo_reply(fake, msg)).convert("RGB"))
    expected = np.asarray(engine(upright).convert("RGB"))
    assert got.shape == expected.shape == (720, 540, 3)  # sideways (unturned, or turned twice): 540 high
    assert psnr(got, expected) > 35 and psnr(got, expected[::-1, ::-1]) < 20  # and not upside down


def test_non_image_documents_get_a_clear_message(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(103)
    pdf = fake.document_message(chat, user, b"%PDF-1.4\n" + b"x" * 500, "report.pdf", "application/pdf")
    assert "isn't an image" in text_reply(fake, pdf)
    fake_jpg = fake.document_message(chat, user, b"this is text, not a photo" * 10, "cat.jpg", "image/jpeg")
    assert "not an image I can read" in text_reply(fake, fake_jpg)
    assert not [c for c in fake.replies_to(fake_jpg) if c.method == "sendPhoto"]


def test_a_file_over_the_download_limit_is_refused_without_fetching(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(114)
    huge = fake.document_message(chat, user, b"\xff\xd8" + bytes(21 * 2**20), "huge.jpg", "image/jpeg")
    assert "up to 20 MB" in text_reply(fake, huge)
    assert not [c for c in fake.calls_to("getFile") if c.params["file_id"] == huge["document"]["file_id"]]


def test_a_sticker_gets_a_hint(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(115)  # (a video is drawn: tests/chat/test_bot_clips.py)
    sticker = {"file_id": "S1", "file_unique_id": "US1", "width": 512, "height": 512, "is_animated": False,
               "is_video": False, "type": "regular"}
    fake.push({"message": fake._message(chat, user, sticker=sticker)})
    assert "Send me a photo" in fake.wait_for(lambda: fake.messages_to(chat["id"]), 30)[0].params["text"]


def test_album_in_album_out(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(104)
    first = fake.photo_message(chat, user, photo("portrait_closeup.jpg"), media_group_id="album-1")
    fake.photo_message(chat, user, photo("square_512.jpg"), media_group_id="album-1")
    album = fake.wait_for(lambda: [c for c in fake.replies_to(first) if c.method == "sendMediaGroup"], 180)[0]
    assert len(album.params["media"]) == 2
    sizes = [Image.open(io.BytesIO(album.files[m["media"].removeprefix("attach://")])).size
             for m in album.params["media"]]
    assert sizes == [(362, 381), (512, 512)]
    assert not fake.calls_to("sendPhoto", chat["id"])


def test_group_photos_are_converted_only_when_asked(bot: InProcessBot, fake: FakeTelegram) -> None:
    group = group_chat(201)
    _, user = private_chat(105)
    unasked = fake.photo_message(group, user, photo("portrait_closeup.jpg"))
    other_bot = fake.photo_message(group, user, photo("square_512.jpg"), caption="/anime@SomeOtherBot")
    command = fake.text_message(group, user, "/anime@AnimeTestBot", reply_to=unasked)
    reply = photo_reply(fake, unasked)
    assert image_of(fake, reply).size == (362, 381)
    assert reply.params["reply_parameters"]["message_id"] == unasked["message_id"]

    captioned = fake.photo_message(group, user, photo("square_512.jpg"), caption="/anime")
    assert image_of(fake, photo_reply(fake, captioned)).size == (512, 512)
    # Handled without a job of their own: nothing can answer them later either.
    # (the command's own job drew the photo it replied to, and is answered)
    fake.wait_for(lambda: handled(bot.home, other_bot) and jobs_for(bot.home, command) == ["done"], 60)
    assert jobs_for(bot.home, other_bot) == [] and not fake.replies_to(other_bot), "a command for another bot"
    assert not fake.replies_to(command), "the command message itself needs no reply of its own"
    sent = [c for c in fake.calls if c.method == "sendPhoto" and str(c.params["chat_id"]) == str(group["id"])]
    assert len(sent) == 2, "only the two photos someone asked about were converted"
    assert not fake.calls_to("sendMessage", group["id"]), "no status chatter in a group"


@pytest.mark.skipif(not CUTE_FILE.is_file(), reason="the AnimeGANv3 cute model is absent from ../shared/models")
def test_style_command_changes_the_style(bot: InProcessBot, fake: FakeTelegram, engine) -> None:  # type: ignore[no-untyped-def]
    chat, user = private_chat(106)
    fake.text_message(chat, user, "/style")
    menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "reply_markup" in c.params], 30)[0]
    assert "s:cute:106" in buttons(menu)  # the menu names whom it was sent to
    query = fake.press(user, menu.result, "s:cute:106")
    fake.wait_for(lambda: [c for c in fake.calls_to("editMessageText", chat["id"]) if "Cute" in c.params["text"]], 30)
    answered = fake.wait_for(lambda: [c for c in fake.calls_to("answerCallbackQuery")
                                      if c.params["callback_query_id"] == query["id"]], 30)
    assert len(answered) == 1  # the button stops spinning, once

    data = photo("portrait_closeup.jpg")
    reply = photo_reply(fake, fake.photo_message(chat, user, data))
    assert any(b.startswith("f:") for b in buttons(reply)) and any(b.startswith("r:hayao:") for b in buttons(reply))
    got = np.asarray(image_of(fake, reply).convert("RGB"))
    assert psnr(got, np.asarray(engine(data, "cute").convert("RGB"))) > 35
    assert psnr(got, np.asarray(engine(data, "hayao").convert("RGB"))) < 30


@pytest.mark.skipif(not CUTE_FILE.is_file(), reason="the AnimeGANv3 cute model is absent from ../shared/models")
def test_rerender_and_full_size_buttons(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(107)
    original = fake.photo_message(chat, user, photo("square_512.jpg"))
    first = photo_reply(fake, original)
    redraw = next(b for b in buttons(first) if b.startswith("r:cute:"))
    downloads = len(fake.downloads)

    fake.press(user, first.result, redraw)
    cute = fake.wait_for(lambda: [c for c in fake.replies_to(original) if c.method == "sendPhoto"][1:], 180)[0]
    assert any(b.startswith("r:hayao:") for b in buttons(cute))  # a cute result offers hayao
    assert not np.array_equal(np.asarray(image_of(fake, cute)), np.asarray(image_of(fake, first)))

    full = next(b for b in buttons(cute) if b.startswith("f:"))
    fake.press(user, cute.result, full)
    doc = fake.wait_for(lambda: [c for c in fake.replies_to(original) if c.method == "sendDocument"], 60)[0]
    assert np.array_equal(np.asarray(image_of(fake, doc, "document")), np.asarray(image_of(fake, cute)))

    fake.press(user, first.result, redraw)  # again: straight from the cache, by file_id
    again = fake.wait_for(lambda: [c for c in fake.replies_to(original) if c.method == "sendPhoto"][2:], 60)[0]
    assert not again.files and again.params["photo"] == cute.result["photo"][-1]["file_id"]
    assert len(fake.downloads) == downloads + 1, "only the first redraw fetched the original again"


def test_forged_button_is_answered_as_expired(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(108)
    fake.text_message(chat, user, "hello")
    hint = fake.wait_for(lambda: fake.messages_to(chat["id"]), 30)[0]
    fake.press(user, hint.result, "r:hayao:0123456789abcdef")
    answer = fake.wait_for(lambda: [c for c in fake.calls_to("answerCallbackQuery") if c.params.get("text")], 30)[0]
    assert "expired" in answer.params["text"]


def test_the_same_photo_twice_needs_no_download_and_no_upload(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(109)
    first = fake.photo_message(chat, user, photo("portrait_closeup.jpg"))
    sent = photo_reply(fake, first)
    file = fake.files[first["photo"][-1]["file_id"]]
    downloads, get_files = len(fake.downloads), len(fake.calls_to("getFile"))

    t0 = time.monotonic()
    repeat = fake.photo_message(chat, user, b"", same_file=file)
    again = photo_reply(fake, repeat)
    print(f"cache hit answered in {time.monotonic() - t0:.3f} s")
    assert not again.files, "the repeat was uploaded again"
    assert again.params["photo"] == sent.result["photo"][-1]["file_id"]
    assert (len(fake.downloads), len(fake.calls_to("getFile"))) == (downloads, get_files)
    assert not [c for c in fake.replies_to(repeat) if c.method == "sendMessage"], "a cache hit needs no status"


def test_chinese_users_are_answered_in_chinese_and_lang_overrides(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(110, lang="zh-hans")
    fake.text_message(chat, user, "/start")
    assert "动漫" in fake.wait_for(lambda: fake.messages_to(chat["id"]), 30)[0].params["text"]
    fake.text_message(chat, user, "/lang")
    menu = fake.wait_for(lambda: fake.messages_to(chat["id"])[1:], 30)[0]
    fake.press(user, menu.result, "l:en:110")
    fake.wait_for(lambda: [c for c in fake.calls_to("editMessageText", chat["id"]) if "English" in c.params["text"]])
    fake.text_message(chat, user, "/start")
    assert "anime" in fake.wait_for(lambda: fake.messages_to(chat["id"])[2:], 30)[0].params["text"]


def test_commands_are_registered(bot: InProcessBot, fake: FakeTelegram) -> None:
    names = {c["command"] for call in fake.calls_to("setMyCommands") for c in call.params["commands"]}
    assert {"start", "help", "style", "lang", "about", "anime"} <= names


def test_the_command_menus_say_what_the_catalogue_says_in_every_language(bot: InProcessBot, fake: FakeTelegram) -> None:
    menus = {(call.params.get("language_code", "en"), call.params["scope"]["type"]): call.params["commands"]
             for call in fake.calls_to("setMyCommands")}
    for lang in ("en", "zh"):
        words = sentences(lang)
        for scope, prefix in (("all_private_chats", "command_"), ("all_group_chats", "group_command_")):
            assert menus[lang, scope] and all(c["description"] == words[prefix + c["command"]] for c in menus[lang, scope])


def test_a_killed_worker_is_replaced_and_its_user_answered(bot: InProcessBot, fake: FakeTelegram) -> None:
    chat, user = private_chat(111)
    before = bot.worker_pids()
    msg = fake.photo_message(chat, user, photo("large_1365x2048.jpg"))
    fake.wait_for(lambda: fake.calls_to("sendChatAction", chat["id"]), 60)  # a worker has the job
    for pid in before.values():
        os.kill(pid, signal.SIGKILL)
    assert "Sorry" in text_reply(fake, msg, timeout=120)
    assert not [c for c in fake.replies_to(msg) if c.method == "sendPhoto"]

    fresh = io.BytesIO()  # a photo the cache has never seen, so a worker must draw it
    Image.open(PHOTOS / "square_512.jpg").transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(fresh, "JPEG")
    retry = fake.photo_message(chat, user, fresh.getvalue())
    assert image_of(fake, photo_reply(fake, retry)).size == (512, 512)
    after = bot.worker_pids()
    assert len(after) == len(before) and set(after.values()) != set(before.values())


def test_group_command_mistakes_get_a_short_explanation(bot: InProcessBot, fake: FakeTelegram) -> None:
    group = group_chat(202)
    _, user = private_chat(112)
    lone = fake.text_message(group, user, "/anime")
    assert "Reply /anime to a photo" in text_reply(fake, lone)
    pic = fake.photo_message(group, user, photo("portrait_closeup.jpg"))
    wrong = fake.text_message(group, user, "/anime vangogh", reply_to=pic)
    assert "vangogh" in text_reply(fake, wrong) and "hayao" in text_reply(fake, wrong)
    about = fake.text_message(group, user, "/about")
    assert "non-commercial" in text_reply(fake, about)
    assert not [c for c in fake.calls_to("getFile") if c.params["file_id"] == pic["photo"][-1]["file_id"]], \
        "a refused /anime must not download the photo"


def test_settings_switch_faces_off_and_set_strength_for_this_chat(bot: InProcessBot, fake: FakeTelegram, engine) -> None:  # type: ignore[no-untyped-def]
    chat, user = private_chat(113)
    fake.text_message(chat, user, "/settings")
    menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "reply_markup" in c.params], 30)[0]
    assert "Faces drawn again at full detail: on" in menu.params["text"]
    assert {"o:faces:0", "o:strength:50", "o:keep_colours:1"} <= set(buttons(menu))
    fake.press(user, menu.result, "o:faces:0")
    fake.wait_for(lambda: [c for c in fake.calls_to("editMessageText", chat["id"]) if ": off" in c.params["text"]], 30)
    fake.press(user, menu.result, "o:strength:50")
    fake.wait_for(lambda: [c for c in fake.calls_to("editMessageText", chat["id"]) if "50%" in c.params["text"]], 30)

    data = photo("portrait_closeup.jpg")  # drawn before with faces on at full strength: not a cache hit now
    got = np.asarray(image_of(fake, photo_reply(fake, fake.photo_message(chat, user, data))).convert("RGB"))
    assert psnr(got, np.asarray(engine(data, faces=False, strength=50).convert("RGB"))) > 35
    assert psnr(got, np.asarray(engine(data).convert("RGB"))) < 30
