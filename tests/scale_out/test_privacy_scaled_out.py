"""/forget with the Celery pool: the bot's home and Redis both end up holding nothing of the user's.

Real Redis (with a password), a real ``animebot worker`` and the bot process, with the tiny
generator. A photo of the user's is in Redis when they say /forget (the worker is held, so the
order waits there): it is stopped, and neither the order nor a result of it stays in Redis.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from testkit.bot_harness import private_chat, start_bot
from testkit.fake_telegram import FakeTelegram
from testkit.journal import job_of, settled
from testkit.privacy import files_holding, redis_holding, rows_naming, traces_of, BOT_ENV, forget
from testkit.redis_server import RedisServer
from testkit.replies import buttons, drawn
from testkit.worker_harness import held, start_worker
from testkit.pictures import synthetic_photo
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
WORKER_ENV = {"ANIMEBOT_BACKEND": "onnxruntime", "ANIMEBOT_STYLE": "tiny"}


def test_forget_reaches_what_redis_holds_and_leaves_the_shared_result(redis_server: RedisServer,
                                                                      tiny_store: ModelStore, tmp_path: Path) -> None:
    url, client = redis_server.url(), redis_server.client()
    with FakeTelegram() as fake:
        worker = start_worker(tmp_path / "worker", tiny_store.home, url, **WORKER_ENV)
        bot = None
        try:
            worker.wait_for_log("celery.apps.worker: animebot@")
            bot = start_bot(fake, tmp_path / "bot", tiny_store.home, ANIMEBOT_BROKER_URL=url, **BOT_ENV)
            (chat_a, alice), (chat_b, bob) = private_chat(770002001), private_chat(770002002)
            shared, own, late = (synthetic_photo(seed=s) for s in (2801, 2802, 2803))
            photo_a, answer_a = drawn(fake, chat_a, alice, own)
            shared_a, _ = drawn(fake, chat_a, alice, shared)
            _, answer_b = drawn(fake, chat_b, bob, shared, same_file=fake.files[shared_a["photo"][-1]["file_id"]])
            fake.wait_for(lambda: settled(bot.home, fake), 60)

            with held(worker.process.pid):  # it takes no order: Alice's next photo waits in Redis
                late_message = fake.photo_message(chat_a, alice, late)
                fake.wait_for(lambda: redis_holding(client, late), 60, "the photo's order in Redis")
                late_job = job_of(bot.home, late_message)
                said = forget(fake, chat_a, alice)
            assert "photos being drawn, stopped: 1" in said and "only your link to them is gone: 1" in said
            # Let go, the worker meets the order and lets it go (Celery discards it as revoked, or our task
            # finds it answered): only then is its copy out of Redis for good. The moment between kombu
            # taking it off the queue and writing it to `unacked` would look empty too.
            met = re.compile(rf"(task |\[){late_job}:")
            worker.wait_for_log(met, 120)
            fake.wait_for(lambda: not client.llen("animebot") and not client.hlen("unacked"), 120, "the order gone")
            assert redis_holding(client, late, own, shared, fake.sent_file(answer_a, "photo")) == []
            assert not [k for k in client.scan_iter("celery-task-meta-*")]

            fake.wait_for(lambda: settled(bot.home, fake), 60)
            traces = traces_of(fake, photo_a, answer_a, hashlib.sha256(own).hexdigest(), alice["id"])
            assert rows_naming(bot.home, traces) == []
            assert files_holding(bot.home, traces.result, traces.texts) == []
            # Bob's result of the shared photo is still his: its Full size button sends it.
            fake.press(bob, answer_b.result, next(d for d in buttons(answer_b) if d.startswith("f:")))
            document = fake.wait_for(lambda: fake.calls_to("sendDocument", chat_b["id"]), 60)[0]
            assert fake.sent_file(document, "document")
        finally:
            for process in (bot, worker):
                if process is not None:
                    process.stop()
