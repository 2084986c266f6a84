"""The upgrade of a scaled-out bot as an operator runs it (docs/scaling-out.md, "Upgrading"): the workers
first, then the bot, while users go on sending photos.

The release before is the one before claim checks (testkit/releases.py), installed into a virtualenv of its
own and run by its own ``animebot`` entry point, as an image of it would be. Its bot and its worker serve
photos; a worker of this release starts beside them; the old worker is told to stop (SIGTERM, as Compose,
Kubernetes or KEDA send it) in the middle of a drawing, which it finishes; the bot is stopped, with a photo
on the worker that outlasts its stop wait and more in its queue, and started again as this release on the
same home, photos arriving all the while, some while no bot runs. Every photo is answered once, drawn: none
lost, none twice, no apology.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from testkit.bot_harness import private_chat, start_bot
from testkit.fake_telegram import FakeTelegram
from testkit.journal import jobs_for, settled
from testkit.pictures import synthetic_photo
from testkit.redis_server import RedisServer
from testkit.releases import BEFORE_CLAIMS, session_release
from testkit.replies import answers, labels
from testkit.worker_harness import caught_drawing, held, start_worker
from weights.store import ModelStore

# Two releases' bots and workers, each loading the real model, one after another: minutes.
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
BOT = {"ANIMEBOT_MAX_SIDE": "320", "ANIMEBOT_RATE_PER_MINUTE": "0"}


@pytest.fixture(scope="module")
def release_before(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return session_release(tmp_path_factory, BEFORE_CLAIMS)


class Users:
    """A new user for each photo, each photo a different one (the cache would answer a repeat without a
    worker): what was sent, to be found answered."""

    def __init__(self, fake: FakeTelegram) -> None:
        self.fake = fake
        self.sent: list[dict[str, Any]] = []

    def send(self, count: int) -> None:
        for _ in range(count):
            n = len(self.sent)
            chat, user = private_chat(5800 + n)
            self.sent.append(self.fake.photo_message(chat, user, synthetic_photo(480, 360, seed=5800 + n)))

    def all_answered(self, timeout: float = 600) -> None:
        self.fake.wait_for(lambda: all(answers(self.fake, photo) for photo in self.sent), timeout,
                           f"an answer to each of {len(self.sent)} photos")


def test_workers_first_then_the_bot_every_photo_sent_meanwhile_is_drawn_once(
        release_before: Path, real_store: ModelStore, redis_server: RedisServer, tmp_path: Path) -> None:
    url = redis_server.url(db=9)
    old_worker = start_worker(tmp_path / "old-worker", real_store.home, url, code=release_before)
    new_worker = None
    try:
        with FakeTelegram() as fake:
            users = Users(fake)
            # A short stop wait: the photo held on the worker outlasts it, as a long clip outlasts 30 s.
            old_bot = start_bot(fake, tmp_path / "bot", real_store.home, code=release_before,
                                ANIMEBOT_BROKER_URL=url, ANIMEBOT_STOP_WAIT="3", **BOT)
            try:
                users.send(3)  # the release before, alone
                users.all_answered()
                # 1. A worker of this release beside the old one, reading the old bot's orders.
                new_worker = start_worker(tmp_path / "new-worker", real_store.home, url)
                users.send(6)
                # 2. The old worker told to stop while it draws one of them: it finishes that photo and goes.
                with caught_drawing([old_worker], url, claim_checks=False):
                    os.kill(old_worker.process.pid, signal.SIGTERM)
                    users.send(2)
                assert old_worker.process.wait(120) == 0, old_worker.log()
                users.send(2)  # only this release's worker left, the old bot still sending
                users.all_answered()
                # 3. The bot stopped with a photo on the worker that its stop wait does not see finished, and
                # more in its queue; two more sent while no bot runs; then this release's bot on the same home.
                with held(*new_worker.drawing_pids()):
                    users.send(4)
                    fake.wait_for(lambda: all(jobs_for(old_bot.home, photo) for photo in users.sent[-4:]), 120,
                                  "the old bot's job for each photo")
                    assert old_bot.stop() == 0, old_bot.log()
                    users.send(2)
            finally:
                assert old_bot.stop() == 0, old_bot.log()
            new_bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_BROKER_URL=url, **BOT)
            try:
                users.send(2)
                users.all_answered()
                fake.wait_for(lambda: settled(new_bot.home, fake), 120, "every update handled, every job answered")
            finally:
                assert new_bot.stop() == 0, new_bot.log()
            said = {photo["chat"]["id"]: labels(fake, photo) for photo in users.sent}
            assert said == {chat: ["photo"] for chat in said}, said
            assert all(len(fake.calls_to("sendPhoto", chat)) == 1 for chat in said)
    finally:
        old_worker.stop()
        if new_worker is not None:
            new_worker.stop()
    log, old_log, new_log = new_bot.log(), old_worker.log(), new_worker.log()
    assert "refused" not in old_log + new_log, (old_log, new_log)
    assert "Traceback" not in log + old_log + new_log, (log, old_log, new_log)
