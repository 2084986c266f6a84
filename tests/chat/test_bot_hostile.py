"""Hostile and broken input, sent through the fake Bot API: each gets one clear answer, and the bot
keeps serving everyone else (a normal photo still converts afterwards)."""
from __future__ import annotations

import io
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from testkit.bot_harness import group_chat, private_chat
from testkit.bot_in_process import InProcessBot, serving
from testkit.clip_maker import read_back
from testkit.pictures import synthetic_photo
from testkit.journal import handled, jobs_for
from testkit.replies import answers
from testkit.fake_telegram import Call, FakeTelegram
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def bot(real_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("hostile"), real_store.home, ANIMEBOT_MAX_SIDE="256",
                 ANIMEBOT_RATE_PER_MINUTE="0") as running:
        yield running


def png(size: tuple[int, int], mode: str = "RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, 0 if mode == "1" else (120, 140, 160)[: len(mode)] if mode != "L" else 128).save(buf, "PNG")
    return buf.getvalue()


def animation(fmt: str) -> bytes:
    frames = [Image.new("RGB", (240, 180), colour) for colour in ((200, 40, 40), (40, 200, 40), (40, 40, 200))]
    buf = io.BytesIO()
    frames[0].save(buf, fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


def only_answer(fake: FakeTelegram, message: dict[str, Any]) -> Call:
    """The one answer to ``message`` (status messages aside); fails if there are two."""
    got = fake.wait_for(lambda: answers(fake, message, "sendPhoto", "sendDocument", "sendMessage"), 180)
    assert len(got) == 1, [c.params for c in got]
    return got[0]


def header_only_bomb(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` but whose pixel data is not even valid zlib:
    137 bytes. Decoding it can only fail as damaged; refusing it as too large proves the size was
    judged from the header alone, before any pixel was decoded."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", b"not zlib data at all" * 4) + chunk(b"IEND", b""))


JPEG = synthetic_photo()  # any photo will do: these tests are about what arrives around it
FILES = {
    # name: (bytes, file name, mime type, what the answer says)
    "random bytes": (os.urandom(5000), "photo.jpg", "image/jpeg", "not an image"),
    "truncated jpeg": (JPEG[: len(JPEG) * 2 // 5], "cut.jpg", "image/jpeg", "damaged or truncated"),
    "text named .jpg": (b"hello, this is not a picture\n" * 20, "cat.jpg", "image/jpeg", "not an image"),
    "zero bytes": (b"", "empty.jpg", "image/jpeg", "empty"),
    "decompression bomb": (png((20000, 20000), "1"), "bomb.png", "image/png", "too large"),
    "1x1": (png((1, 1)), "dot.png", "image/png", "too small"),
    "aspect 30:1": (png((3000, 100)), "strip.png", "image/png", "long and thin"),
    # Narrower than 32 px too, but its shape is the telling reason (it once said "too small" here).
    "strip 20000x20": (png((20000, 20)), "strip.png", "image/png", "too long and thin (20000×20)"),
}


@pytest.mark.parametrize("case", list(FILES))
def test_a_broken_file_gets_one_clear_sentence(bot: tuple[InProcessBot, FakeTelegram], case: str) -> None:
    _, fake = bot
    data, name, mime, says = FILES[case]
    chat, user = private_chat(900 + list(FILES).index(case))
    msg = fake.document_message(chat, user, data, name, mime)
    answer = only_answer(fake, msg)
    assert answer.method == "sendMessage" and says in answer.params["text"], answer.params
    assert "Traceback" not in answer.params["text"]


def test_a_picture_refused_for_its_size_is_told_the_numbers_in_its_own_language(
        bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = bot
    for n, (data, says) in enumerate(((png((20000, 20)), "图片太细长了（20000×20），长宽比最多 20:1。"),
                                      (png((10, 12)), "图片太小了（10×12），每边至少需要 32 像素。"))):
        chat, user = private_chat(930 + n, lang="zh")
        msg = fake.document_message(chat, user, data, "small.png", "image/png")
        said = fake.wait_for(lambda: [c.params["text"] for c in fake.replies_to(msg)  # (its status is 正在绘制…)
                                      if c.method == "sendMessage" and c.params["text"].startswith("图片")], 120)
        assert said == [says]


def test_a_bomb_is_refused_from_its_header(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    """137 bytes that claim 400 MP, with pixel data no decoder could read: the answer is "too
    large", not "damaged", so the bot refused it from the header without decoding it."""
    _, fake = bot
    chat, user = private_chat(940)
    msg = fake.document_message(chat, user, header_only_bomb(20000, 20000), "bomb.png", "image/png")
    text = only_answer(fake, msg).params["text"]
    assert "too large" in text and "20000×20000" in text, text
    assert "damaged" not in text


def test_a_file_over_20_mb_is_refused_without_fetching_it(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = bot
    chat, user = private_chat(950)
    msg = fake.document_message(chat, user, b"\xff\xd8" + bytes(21 * 2**20), "huge.jpg", "image/jpeg")
    answer = only_answer(fake, msg)
    assert "up to 20 MB" in answer.params["text"]
    assert not [c for c in fake.calls_to("getFile") if c.params["file_id"] == msg["document"]["file_id"]]


def test_an_animated_webp_is_drawn_from_its_first_frame_and_says_so(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = bot
    chat, user = private_chat(964)
    msg = fake.document_message(chat, user, animation("WEBP"), "loop.webp", "image/webp")
    answer = only_answer(fake, msg)
    assert answer.method == "sendPhoto"
    assert "first frame" in answer.params.get("caption", "")


def test_a_gif_sent_as_a_file_comes_back_as_an_animation(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = bot
    chat, user = private_chat(963)
    msg = fake.document_message(chat, user, animation("GIF"), "loop.gif", "image/gif")
    answer = fake.wait_for(lambda: [c for c in fake.replies_to(msg) if c.method == "sendAnimation"], 180)[0]
    frames = read_back(fake.sent_file(answer, "animation"))
    assert frames["audio"] is None and frames["codec"] == "h264"


def test_huge_text_and_captions_and_unknown_commands(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    running, fake = bot
    chat, user = private_chat(970)
    photo = fake.photo_message(chat, user, JPEG, caption="x" * 5000)
    assert only_answer(fake, photo).method == "sendPhoto"
    for uid, text, says in ((971, "y" * 4096, "Send me a photo"),
                            (972, "/frobnicate " + "z" * 3000, "don't know that command")):
        chat, user = private_chat(uid)  # a chat of its own: these replies don't quote the message
        sent = fake.text_message(chat, user, text)
        fake.wait_for(lambda: handled(running.home, sent), 60)  # a text's answer is sent by its handler
        replies = fake.messages_to(uid)
        assert len(replies) == 1 and says in replies[0].params["text"], [c.params for c in replies]
    group = group_chat(970)
    unasked = fake.photo_message(group, user, JPEG, caption="nice " * 200)
    asked = fake.photo_message(group, user, JPEG, caption="/anime look at this " + "w " * 450)
    assert only_answer(fake, asked).method == "sendPhoto"  # prose after /anime is not a style
    one_word = fake.photo_message(group, user, JPEG, caption="/anime " + "w" * 900)
    refusal = only_answer(fake, one_word).params["text"]
    assert "don't know the style" in refusal and len(refusal) < 200
    fake.wait_for(lambda: handled(running.home, unasked), 60)
    # a group photo nobody asked about: handled, no job taken on, so no answer now or later
    assert jobs_for(running.home, unasked) == [] and not fake.replies_to(unasked)


@pytest.mark.parametrize("data", ["r:hayao:0123456789ab", "r:nosuchstyle:0123456789ab", "f:0123456789ab",
                                  "r:hayao:0123456789abcdef", "f:hayao:zz", "s:hayao:1", "l:en:1",
                                  "\x00\x01garbage", "", "o:faces:notanumber", "s:" + "h" * 60])
def test_forged_or_expired_buttons_are_answered_and_harmless(bot: tuple[InProcessBot, FakeTelegram], data: str) -> None:
    _, fake = bot
    chat, user = private_chat(980)
    message = fake.text_message(chat, user, "(a message the button sits under)")
    query = fake.press(user, message, data)
    answers = fake.wait_for(lambda: [c for c in fake.calls_to("answerCallbackQuery")
                                     if c.params["callback_query_id"] == query["id"]], 60)
    assert len(answers) == 1


def test_the_bot_still_serves_after_all_that(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    running, fake = bot
    chat, user = private_chat(999)
    msg = fake.photo_message(chat, user, synthetic_photo(360, 380, seed=1))
    assert only_answer(fake, msg).method == "sendPhoto"
    assert running.alive()
    assert "Traceback" not in running.log()
