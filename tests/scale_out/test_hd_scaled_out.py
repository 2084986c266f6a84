"""HD scaled out: the HD button's doubling is done by an ``animebot worker`` over Celery, as drawings are.

The worker gets the very file the user has (``WorkOrder.hd``, through the broker's codec) and sends back
Real-CUGAN of it, twice its size, which the bot caches like any result.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inference.engine import load_upscaler
from testkit.bot_harness import private_chat, start_bot
from testkit.fake_telegram import FakeTelegram
from testkit.pictures import PHOTOS, psnr
from testkit.redis_server import RedisServer
from testkit.replies import buttons, first_answer
from testkit.worker_harness import start_worker
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_hd_is_doubled_by_a_worker_over_celery(hd_store: ModelStore, redis_server: RedisServer,
                                               tmp_path: Path) -> None:
    worker = start_worker(tmp_path / "worker", hd_store.home, redis_server.url(), ANIMEBOT_THREADS="1")
    try:
        with FakeTelegram() as fake:
            bot = start_bot(fake, tmp_path / "bot", hd_store.home, ANIMEBOT_BROKER_URL=redis_server.url(),
                            ANIMEBOT_MAX_SIDE="320", ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_THREADS="1")
            try:
                chat, user = private_chat(770052001)
                photo = fake.photo_message(chat, user, (PHOTOS / "portrait_closeup.jpg").read_bytes())
                result = first_answer(fake, photo, "sendPhoto", timeout=300)
                fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("h:")))
                file = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 300)[0]
            finally:
                bot.stop()
        log = bot.log()
    finally:
        worker.stop()
    original = _rgb(fake.sent_file(result, "photo"))
    ours = _rgb(fake.sent_file(file, "document"))
    h, w = original.shape[:2]
    assert ours.shape[:2] == (2 * h, 2 * w)
    assert psnr(ours, load_upscaler(hd_store, threads=1)(original)) >= 40, "Real-CUGAN of the result as the user has it"
    assert "Traceback" not in log and "Traceback" not in worker.log()
