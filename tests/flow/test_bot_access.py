"""Abuse and access through the real bot: rate limit, daily quota, admin-only /stats, the allowlist,
and the webhook's secret token."""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testkit.bot_harness import group_chat, private_chat, start_bot
from testkit.replies import final_answer
from testkit.pictures import synthetic_photo
from testkit.journal import journal_rows
from testkit.fake_telegram import TOKEN, FakeTelegram
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
JPEG = synthetic_photo()  # any photo will do: these tests are about who is served, not how
ADMIN = 5001


def test_rate_limit_quota_and_admin_stats(real_store: ModelStore, tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_MAX_SIDE="256",
                        ANIMEBOT_RATE_PER_MINUTE="2", ANIMEBOT_DAILY_QUOTA="3", ANIMEBOT_ADMINS=str(ADMIN))
        try:
            chat, user = private_chat(5002)
            first = [final_answer(fake, fake.photo_message(chat, user, JPEG)) for _ in range(3)]
            assert first[:2] == ["photo", "photo"]  # the repeat comes from the cache, and still counts
            assert "2 a minute" in first[2]

            admin_chat, admin = private_chat(ADMIN)
            assert [final_answer(fake, fake.photo_message(admin_chat, admin, JPEG)) for _ in range(4)] == ["photo"] * 4

            fake.text_message(chat, user, "/stats")
            refused = fake.wait_for(lambda: [c for c in fake.messages_to(5002) if "admins" in c.params["text"]], 60)
            assert len(refused) == 1
            fake.text_message(admin_chat, admin, "/stats")
            stats = fake.wait_for(lambda: [c for c in fake.messages_to(ADMIN) if "Queue:" in c.params["text"]], 60)
            text = stats[0].params["text"]
            assert "1 of 1 worker process(es) up" in text and "rate_limited 1" in text, text
            assert "answered from cache" in text
        finally:
            assert bot.stop() == 0, bot.log()


def test_the_daily_quota_outlives_a_restart(real_store: ModelStore, tmp_path: Path) -> None:
    chat, user = private_chat(5003)
    with FakeTelegram() as fake:
        seeds = iter(range(1, 10))  # different photos: a repeat from the cache uses no quota
        for sends, expected in ((3, ["photo", "photo", "today's limit of 2"]), (1, ["today's limit of 2"])):
            bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_MAX_SIDE="256",
                            ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_DAILY_QUOTA="2")
            try:  # the second start: the count lives in the journal, not in memory
                got = [final_answer(fake, fake.photo_message(chat, user, synthetic_photo(seed=next(seeds))))
                       for _ in range(sends)]
                assert [e == "photo" and g == "photo" or e in g for g, e in zip(got, expected)] == [True] * sends, got
            finally:
                assert bot.stop() == 0, bot.log()


def test_allowlist_mode_refuses_everyone_else_politely(real_store: ModelStore, tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, ANIMEBOT_MAX_SIDE="256",
                        ANIMEBOT_ALLOWLIST="6001,-6100", ANIMEBOT_ADMINS="6002")
        try:
            for uid in (6001, 6002):
                chat, user = private_chat(uid)
                assert final_answer(fake, fake.photo_message(chat, user, JPEG)) == "photo"
            chat, stranger = private_chat(6003)
            msg = fake.photo_message(chat, stranger, JPEG)
            assert "private bot" in final_answer(fake, msg)
            assert len(fake.replies_to(msg)) == 1
            fake.text_message(chat, stranger, "/start")
            fake.wait_for(lambda: len(fake.messages_to(6003)) == 2, 60)
            assert all("private bot" in c.params["text"] for c in fake.messages_to(6003))

            listed, other = group_chat(6100), group_chat(6200)
            pic = fake.photo_message(listed, stranger, JPEG, caption="/anime")
            assert final_answer(fake, pic) == "photo"  # anyone in a listed group
            ignored = fake.photo_message(other, stranger, JPEG)
            asked = fake.photo_message(other, stranger, JPEG, caption="/anime")
            assert "private bot" in final_answer(fake, asked)
            assert not fake.replies_to(ignored)
            files_fetched = len(fake.calls_to("getFile"))
            assert files_fetched <= 3  # nothing of the refused users' was downloaded
        finally:
            assert bot.stop() == 0, bot.log()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(url: str, body: dict[str, Any], secret: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Telegram-Bot-Api-Secret-Token"] = secret
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_webhook_mode_checks_the_secret_and_reports_health(real_store: ModelStore, tmp_path: Path) -> None:
    port = free_port()
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, "--webhook", "https://bot.example.org/tg/hook",
                        ANIMEBOT_WEBHOOK_LISTEN="127.0.0.1", ANIMEBOT_WEBHOOK_PORT=str(port),
                        ANIMEBOT_MAX_SIDE="256")
        try:
            hook = fake.wait_for(lambda: fake.webhook, 60)
            assert hook["url"] == "https://bot.example.org/tg/hook"
            secret = hook["secret_token"]
            assert len(secret) >= 32
            assert not fake.calls_to("deleteWebhook")

            chat, user = private_chat(7001)
            msg = fake.photo_message(chat, user, JPEG, push=False)
            update = {"update_id": 90001, "message": msg}
            url = f"http://127.0.0.1:{port}/tg/hook"
            home = bot.home

            def stored() -> list[tuple[object, ...]]:
                return journal_rows(home, "SELECT handled FROM updates WHERE update_id = 90001")

            assert post(url, update, None) == 403
            assert post(url, update, "wrong-secret") == 403
            # An update is stored before the webhook answers 200; one refused with 403 never is,
            # so nothing can come of it later.
            assert stored() == [] and not fake.replies_to(msg)
            assert post(url, update, secret) == 200
            assert stored() in ([(0,)], [(1,)])  # stored before the 200
            assert final_answer(fake, msg) == "photo"
            assert post(url, update, secret) == 200  # Telegram retrying: stored once, answered once
            fake.wait_for(lambda: stored() == [(1,)] and journal_rows(
                home, "SELECT state FROM jobs WHERE chat_id = 7001") == [("done",)], 60)  # one job, answered
            assert [c.method for c in fake.replies_to(msg) if c.method != "sendMessage"] == ["sendPhoto"]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as response:
                assert json.loads(response.read())["ok"] is True
        finally:
            assert bot.stop() == 0, bot.log()
        assert TOKEN not in bot.log() and secret not in bot.log()
