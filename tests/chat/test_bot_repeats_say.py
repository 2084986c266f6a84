"""A repeat from the cache says what the first answer said: the drawing's notes are kept with it.

A stranger sent an animated WebP as a file and got "🎞 That was an animation: I drew its first frame.";
another user sent the same bytes and got the picture with no word, and a repeated clip lost its "cut
short" too: answers from the cache were built without the drawing's notes.
"""
from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.bot_harness import private_chat
from testkit.bot_in_process import InProcessBot, serving
from testkit.clip_maker import mp4, pan_frames
from testkit.fake_telegram import FakeTelegram
from testkit.pictures import synthetic_image, synthetic_photo
from testkit.replies import first_answer
from weights.store import ModelStore

FIRST_FRAME = "🎞 That was an animation: I drew its first frame."
TRIMMED = "✂️ I draw clips up to 1 seconds long: this is the start of yours."


@pytest.fixture(scope="module")
def served(tiny_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("repeats"), tiny_store.home, ANIMEBOT_STYLE="tiny",
                 ANIMEBOT_BACKEND="onnxruntime", ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_VIDEO_MAX_S="1") as both:
        yield both


def animated_webp() -> bytes:
    frames = [synthetic_image(96, 96, seed) for seed in (1, 2, 3)]
    buf = io.BytesIO()
    frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


def caption(answer: Any) -> str:
    return str(answer.params.get("caption", ""))


def test_the_same_animation_from_two_users_is_said_to_be_its_first_frame_both_times(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    data = animated_webp()
    first = fake.document_message(*private_chat(9100), data, "moving.webp", "image/webp")
    drawn = first_answer(fake, first, "sendPhoto", "sendDocument")
    again = fake.document_message(*private_chat(9101), data, "moving.webp", "image/webp")
    repeat = first_answer(fake, again, "sendPhoto", "sendDocument")
    assert FIRST_FRAME in caption(drawn) and FIRST_FRAME in caption(repeat), (caption(drawn), caption(repeat))


def test_a_repeated_clip_cut_short_is_said_to_be_cut_short_again(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    clip = mp4(pan_frames(synthetic_photo(seed=7), 20, (96, 64)), fps=10)  # 2 s, over the 1 s drawn
    answers = []
    for uid in (9102, 9103):
        chat, user = private_chat(uid)
        message = fake.document_message(chat, user, clip, "walk.mp4", "video/mp4")
        answers.append(first_answer(fake, message, "sendVideo", "sendAnimation", "sendDocument"))
    assert all(TRIMMED in caption(a) for a in answers), [caption(a) for a in answers]
