"""A rolling upgrade, for real: a bot and a worker of two releases on one Redis, each way round.

The release before HD (075b66a, testkit/releases.py), installed into a virtualenv of its own, runs by its own
entry point beside this one, as the images of two releases do while Compose, Kubernetes or KEDA replace one
with the other. Before formats were
versioned per message, each side refused every order of the other and the bot sent it again 100 times a
second, forever (the user's status said Drawing…). Now plain photos cross both ways, and what only this
release can do (an HD) gets one sentence within a few resends. The release before claim checks
(6df318f) reads only orders with their photo inside: this bot sends it those while its heartbeat is up,
and its bot's orders are read here as they come.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.drawing.celery.resend import MAX_SENDS
from testkit.bot_harness import REPO, private_chat, start_bot
from testkit.fake_telegram import FakeTelegram
from testkit.pictures import PHOTOS, synthetic_photo
from testkit.redis_server import RedisServer
from testkit.releases import BEFORE_CLAIMS, BEFORE_HD, session_release
from testkit.replies import buttons, final_answer, first_answer
from testkit.worker_harness import start_worker
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BOT = {"ANIMEBOT_MAX_SIDE": "320", "ANIMEBOT_RATE_PER_MINUTE": "0"}


@pytest.fixture(scope="module")
def before_hd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_release(tmp_path_factory, BEFORE_HD)


@pytest.fixture(scope="module")
def before_claims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_release(tmp_path_factory, BEFORE_CLAIMS)


def draw_and_double(fake: FakeTelegram, user_id: int) -> None:
    """A photo sent, drawn, and its HD asked for and sent: what a user of either release does."""
    chat, user = private_chat(user_id)
    photo = fake.photo_message(chat, user, (PHOTOS / "portrait_closeup.jpg").read_bytes())
    result = first_answer(fake, photo, "sendPhoto", timeout=300)
    fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("h:")))
    fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 300, "the HD as a file")


@pytest.mark.parametrize("side", ["worker", "bot"])
def test_this_release_and_the_one_before_claim_checks_draw_photos_and_hds_either_way_round(
        side: str, before_claims: Path, hd_store: ModelStore, redis_server: RedisServer, tmp_path: Path) -> None:
    """The worker of the release before never meets a claim check (the bot sees its heartbeat say no format
    and sends the photo inside the order), and this release's worker reads that bot's orders: no order is
    refused, none sent again."""
    url = redis_server.url(db=7 if side == "worker" else 8)
    worker = start_worker(tmp_path / "worker", hd_store.home, url, code=before_claims if side == "worker" else REPO)
    try:
        with FakeTelegram() as fake:
            bot = start_bot(fake, tmp_path / "bot", hd_store.home, code=before_claims if side == "bot" else REPO,
                            ANIMEBOT_BROKER_URL=url, **BOT)
            try:
                draw_and_double(fake, 5510 if side == "worker" else 5511)
            finally:
                assert bot.stop() == 0, bot.log()
    finally:
        worker.stop()
    log, worker_log = bot.log(), worker.log()
    assert "refused" not in worker_log and "sending it again" not in log, (log, worker_log)
    assert "Traceback" not in log and "Traceback" not in worker_log


def test_this_bot_with_a_worker_of_the_release_before_draws_photos_and_says_hd_must_wait(
        before_hd: Path, hd_store: ModelStore, redis_server: RedisServer, tmp_path: Path) -> None:
    url = redis_server.url(db=5)
    worker = start_worker(tmp_path / "worker", hd_store.home, url, code=before_hd)
    try:
        with FakeTelegram() as fake:
            bot = start_bot(fake, tmp_path / "bot", hd_store.home, ANIMEBOT_BROKER_URL=url, **BOT)
            try:
                chat, user = private_chat(5500)
                photo = fake.photo_message(chat, user, (PHOTOS / "portrait_closeup.jpg").read_bytes())
                result = first_answer(fake, photo, "sendPhoto", timeout=300)
                fake.press(user, result.result, next(d for d in buttons(result) if d.startswith("h:")))
                said = fake.wait_for(lambda: [c for c in fake.calls_to("sendMessage", chat["id"])
                                              if "upgraded" in c.params["text"]], 180)
                assert said[0].params["text"] == ("I can't do that right now: my drawing machines are being upgraded."
                                                  " Please try again in a few minutes.")
                assert not fake.calls_to("sendDocument", chat["id"])  # no HD came, nor anything else
            finally:
                assert bot.stop() == 0, bot.log()
    finally:
        worker.stop()
    log, worker_log = bot.log(), worker.log()
    assert log.count("sending it again") <= MAX_SENDS - 1, log
    assert worker_log.count("refused") <= MAX_SENDS, worker_log
    assert log.count("a worker refused an order unread") == 1, log
    assert "Traceback" not in log and "Traceback" not in worker_log


def test_a_bot_of_the_release_before_with_this_release_s_worker_draws_photos(
        before_hd: Path, real_store: ModelStore, redis_server: RedisServer, tmp_path: Path) -> None:
    url = redis_server.url(db=6)
    worker = start_worker(tmp_path / "worker", real_store.home, url)
    try:
        with FakeTelegram() as fake:
            bot = start_bot(fake, tmp_path / "bot", real_store.home, code=before_hd, ANIMEBOT_BROKER_URL=url, **BOT)
            try:
                photo = fake.photo_message(*private_chat(5501), (PHOTOS / "portrait_closeup.jpg").read_bytes())
                assert final_answer(fake, photo, timeout=300) == "photo"
                # A refusal with numbers comes in the format that bot reads (this release's would be format 5).
                speck = fake.document_message(*private_chat(5502), synthetic_photo(20, 12), "speck.jpg", "image/jpeg")
                assert final_answer(fake, speck, timeout=120) == ("This image is too small (20×12); send one at least "
                                                                  "32 px on each side.")
            finally:
                assert bot.stop() == 0, bot.log()
    finally:
        worker.stop()
    assert "refused" not in worker.log() and "sending it again" not in bot.log()
    assert "Traceback" not in bot.log() and "Traceback" not in worker.log()
