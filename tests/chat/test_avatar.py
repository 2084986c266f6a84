"""The Avatar button: the result's photo drawn again as a square around the largest face, with the
head inside the circle Telegram shows a profile photo in, sent as a photo and as the file; under a
clip, a silent square animation for an animated profile photo.

The geometry is checked on its own; then a real bot draws avatars: of a real portrait with the
real model and face detector (from ../shared), and of a synthetic photo with no face on the tiny
generator (everywhere).
"""
from __future__ import annotations

import io
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from inference.avatar import avatar_square, head_box, subject
from inference.detector import FaceDetector
from testkit.bot_harness import private_chat
from testkit.bot_in_process import InProcessBot, serving
from testkit.clip_maker import mp4, pan_frames, read_back
from testkit.fake_telegram import Call, FakeTelegram
from testkit.journal import settled
from testkit.replies import buttons, first_answer
from testkit.pictures import PHOTOS, synthetic_photo
from testkit.privacy import BOT_ENV
from weights.store import ModelStore


def inside_circle(square: tuple[int, int, int, int], box: tuple[float, float, float, float]) -> bool:
    left, top, right, bottom = square
    cx, cy, r = (left + right) / 2, (top + bottom) / 2, (right - left) / 2
    return all(math.hypot(x - cx, y - cy) <= r for x in (box[0], box[2]) for y in (box[1], box[3]))


def test_the_square_holds_the_head_in_its_circle_and_stays_inside_the_photo() -> None:
    face = (900.0, 700.0, 1100.0, 950.0)
    square = avatar_square((2000, 3000), face)
    assert square[2] - square[0] == square[3] - square[1] and inside_circle(square, head_box(face))
    near_corner = avatar_square((2000, 3000), (10.0, 20.0, 210.0, 270.0))
    assert near_corner[0] == 0 and near_corner[1] == 0, "moved inside the photo, not cut off"
    small = avatar_square((300, 400), (50.0, 50.0, 250.0, 300.0))
    assert small[2] - small[0] == 300 and 0 <= small[1] and small[3] <= 400  # the largest square there is
    assert avatar_square((400, 300), None) == (50, 0, 350, 300)  # no face: the centre
    assert subject((1280, 867), [(600.0, 400.0, 640.0, 440.0)]) is None  # a passer-by is no subject
    assert subject((1280, 867), [face, (1.0, 1.0, 2.0, 2.0)]) == face

def avatar_of(fake: FakeTelegram, chat: dict[str, Any], user: dict[str, Any], data: bytes) -> tuple[Call, Call]:
    """Send a photo, press Avatar under its result; the avatar as a photo, and as the file."""
    photo = fake.photo_message(chat, user, data)
    result = first_answer(fake, photo, "sendPhoto", timeout=180)
    before = (len(fake.calls_to("sendPhoto", chat["id"])), len(fake.calls_to("sendDocument", chat["id"])))
    fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("v:")))
    shown = fake.wait_for(lambda: fake.calls_to("sendPhoto", chat["id"])[before[0]:], 180)[0]
    file = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"])[before[1]:], 60)[0]
    return shown, file


@pytest.fixture(scope="module")
def tiny_bot(tiny_store: ModelStore,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("avatar-tiny"), tiny_store.home, **BOT_ENV) as both:
        yield both


def test_an_avatar_of_a_photo_without_a_face_is_its_centre_square(tiny_bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = tiny_bot
    chat, user = private_chat(770004001)
    shown, file = avatar_of(fake, chat, user, synthetic_photo(640, 400, seed=3001))
    picture = Image.open(io.BytesIO(fake.sent_file(file, "document")))
    assert picture.size == (400, 400), "the largest square, never enlarged"
    assert Image.open(io.BytesIO(fake.sent_file(shown, "photo"))).size == (400, 400)


def test_an_avatar_of_a_group_photo_is_its_largest_face_with_the_head_inside_the_circle(
        real_store: ModelStore, det_file: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    with serving(tmp_path_factory.mktemp("avatar-real"), real_store.home, ANIMEBOT_RATE_PER_MINUTE="0") as (_, fake):
        chat, user = private_chat(770004101)
        # At a quarter of the style the face stays a photo's, which the detector finds again below.
        fake.text_message(chat, user, "/settings")
        menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "reply_markup" in c.params], 60)[0]
        fake.press(user, menu.result, "o:strength:25")
        fake.wait_for(lambda: fake.calls_to("editMessageText", chat["id"]), 60)
        _, file = avatar_of(fake, chat, user, (PHOTOS / "group_3_faces.jpg").read_bytes())
    picture = np.asarray(Image.open(io.BytesIO(fake.sent_file(file, "document"))).convert("RGB"))
    side = picture.shape[0]
    assert picture.shape[1] == side and side <= 1024
    faces = FaceDetector(det_file).detect(picture)
    assert faces, "the face is in the avatar"
    assert inside_circle((0, 0, side, side), head_box(faces[0].box)), faces[0].box


def test_a_clip_avatar_is_a_silent_square_animation_and_its_file(tiny_bot: tuple[InProcessBot, FakeTelegram]) -> None:
    """Avatar under a drawn video: an animated profile photo, square (the centre, with no face), silent,
    at most the clip limit long, sent to look at and as the file."""
    bot, fake = tiny_bot
    chat, user = private_chat(770004002)
    clip = mp4(pan_frames(synthetic_photo(seed=3011), 15, (320, 240)), 15.0, sound_s=1.0)  # a second: one photo of the quota
    fake.clip_message(chat, user, clip, kind="video")
    result = fake.wait_for(lambda: fake.calls_to("sendVideo", chat["id"]), 120)[0]
    fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("v:")))
    shown = fake.wait_for(lambda: fake.calls_to("sendAnimation", chat["id"]), 120)[0]
    file = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 60)[0]
    facts = read_back(fake.sent_file(file, "document"))
    assert facts["size"] == (240, 240) and facts["audio"] is None and float(facts["seconds"]) <= 10.0 + 1e-3, facts
    assert fake.sent_file(shown, "animation") == fake.sent_file(file, "document")
    # Inline mode offers each file as what it was sent as (Telegram refuses a file id as another type, and
    # with it the whole answer): the video as a video, the animated avatar as an animation.
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    asked = fake.inline_query(user)
    answer = fake.wait_for(lambda: [c for c in fake.calls_to("answerInlineQuery")
                                    if c.params.get("inline_query_id") == asked["id"]], 60)[0]
    offered = {(r["type"], r.get("video_file_id") or r.get("mpeg4_file_id")) for r in answer.params["results"]}
    assert offered == {("video", result.result["video"]["file_id"]), ("mpeg4_gif", shown.result["animation"]["file_id"])}
