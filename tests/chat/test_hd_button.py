"""The HD button: a result doubled by Real-CUGAN, sent as the file and as a photo where it fits.

With the real style and Real-CUGAN (from ../shared), a real bot draws a photo; HD of that result must be
exactly twice its size, and it must be Real-CUGAN of the very file the user got (as ncnn's own runtime
runs it), clearly closer to that than to a resize. Pressed again, it comes from the cache and costs no
photo of the quota. Without the model, or with ``ANIMEBOT_HD=off``, there is no button, and an old one
says so in one sentence (on the tiny generator, everywhere).
"""
from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from testkit import ncnn_reference
from testkit.bot_harness import private_chat, start_bot
from testkit.bot_in_process import serving
from testkit.fake_telegram import FakeTelegram
from testkit.journal import drawn_by, settled
from testkit.models import CUGAN_BIN, CUGAN_PARAM
from testkit.pictures import PHOTOS, synthetic_photo
from testkit.privacy import BOT_ENV
from testkit.replies import buttons, first_answer
from testkit.worker_harness import held
from weights.store import ModelStore

BORDER = 24  # px left out at each edge, as the independent check does


def _rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_hd_under_a_result_is_real_cugan_of_that_result_twice_its_size(hd_store: ModelStore, tmp_path: Path) -> None:
    with serving(tmp_path, hd_store.home, ANIMEBOT_STYLE="hayao", ANIMEBOT_RATE_PER_MINUTE="0") as (bot, fake):
        chat, user = private_chat(770051001)
        photo = fake.photo_message(chat, user, (PHOTOS / "portrait_closeup.jpg").read_bytes())
        result = first_answer(fake, photo, "sendPhoto", timeout=300)
        hd = next(d for d in buttons(result) if d.startswith("h:"))
        photos_before = len(fake.calls_to("sendPhoto", chat["id"]))
        said_before = len(fake.calls_to("sendMessage", chat["id"]))
        fake.press(user, result.result, hd)
        file = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 300)[0]
        # Its status is HD's own, not "Drawing…": the picture is drawn already.
        statuses = [c.params["text"] for c in fake.calls_to("sendMessage", chat["id"])[said_before:]]
        assert statuses == ["Making the HD picture…"], statuses
        shown = fake.wait_for(lambda: fake.calls_to("sendPhoto", chat["id"])[photos_before:], 60)[0]
        fake.wait_for(lambda: settled(bot.home, fake), 60)
        drawn = drawn_by(bot.home, user["id"])

        fake.press(user, result.result, hd)  # again: from the cache, free
        again = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"])[1:], 120)[0]
        fake.wait_for(lambda: settled(bot.home, fake), 60)
        assert drawn_by(bot.home, user["id"]) == drawn == 2, "the drawing and its HD; the repeat costs nothing"

    original = _rgb(fake.sent_file(result, "photo"))
    ours = _rgb(fake.sent_file(file, "document"))
    h, w = original.shape[:2]
    assert ours.shape[:2] == (2 * h, 2 * w)
    assert _rgb(fake.sent_file(shown, "photo")).shape == ours.shape  # 1440 px fits Telegram's photo limits
    assert fake.sent_file(again, "document") == fake.sent_file(file, "document")
    to_reference, lanczos_to_reference = ncnn_reference.closeness(ours, original, CUGAN_PARAM, CUGAN_BIN, BORDER)
    assert to_reference >= 38 and to_reference >= lanczos_to_reference + 5


@pytest.mark.parametrize("env", [{}, {"ANIMEBOT_HD": "off"}], ids=["not-installed", "switched-off"])
def test_without_hd_there_is_no_button_and_an_old_one_says_so(tiny_store: ModelStore, tmp_path: Path,
                                                                env: dict[str, str]) -> None:
    with serving(tmp_path, tiny_store.home, **{**BOT_ENV, **env}) as (_, fake):
        chat, user = private_chat(770051002)
        photo = fake.photo_message(chat, user, synthetic_photo(480, 360, seed=5101))
        result = first_answer(fake, photo, "sendPhoto", timeout=120)
        shown = buttons(result)
        assert any(d.startswith("f:") for d in shown) and not any(d.startswith("h:") for d in shown)
        fake.press(user, result.result, "h:" + next(d for d in shown if d.startswith("f:"))[2:])
        alert = fake.wait_for(lambda: [c for c in fake.calls_to("answerCallbackQuery") if c.params.get("text")], 60)[0]
    assert alert.params["text"] == "HD is not available on this bot."
    assert not fake.calls_to("sendDocument", chat["id"])


def test_hd_may_take_longer_than_a_drawing_may(hd_store: ModelStore, tmp_path: Path) -> None:
    """HD costs about twice a drawing of its size, so it has its own allowance: an HD whose worker is held for
    one and a half job timeouts (as a loaded CPU or a big result would hold it) is still delivered, where a
    photo's worker would have been replaced."""
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", hd_store.home, ANIMEBOT_MAX_SIDE="256", ANIMEBOT_JOB_TIMEOUT="20",
                        ANIMEBOT_WORKERS="1", ANIMEBOT_RATE_PER_MINUTE="0")
        try:
            chat, user = private_chat(770051003)
            photo = fake.photo_message(chat, user, (PHOTOS / "portrait_closeup.jpg").read_bytes())
            result = first_answer(fake, photo, "sendPhoto", timeout=300)
            with held(*bot.worker_pids().values()):
                fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("h:")))
                time.sleep(30)  # the hold: 1.5 job timeouts
            file = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 120)[0]
        finally:
            bot.stop()
    h, w = _rgb(fake.sent_file(result, "photo")).shape[:2]
    assert _rgb(fake.sent_file(file, "document")).shape[:2] == (2 * h, 2 * w)
    assert "replacing it" not in bot.log()
