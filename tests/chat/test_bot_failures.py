"""Telegram misbehaving: flood control, dropped connections, a user who blocked the bot, a deleted
message, server errors. None of it stops the bot, and each is one line in the log with the job id."""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.bot_harness import private_chat
from testkit.bot_in_process import InProcessBot, serving
from testkit.pictures import synthetic_photo
from testkit.fake_telegram import DROP, Fault, FakeTelegram, flood
from testkit.replies import answers
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
JPEG = synthetic_photo()  # any photo will do: these tests are about Telegram's trouble, not the picture


@pytest.fixture(scope="module")
def bot(real_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("failures"), real_store.home, ANIMEBOT_MAX_SIDE="256",
                 ANIMEBOT_RATE_PER_MINUTE="0") as running:
        yield running


def photo_reply(fake: FakeTelegram, message: dict[str, Any]) -> Any:
    return fake.wait_for(lambda: answers(fake, message, "sendPhoto"), 180)


def job_lines(bot: InProcessBot) -> list[str]:
    return [line for line in bot.log().splitlines() if "animebot.jobs" in line]


@pytest.mark.parametrize("method,faults", [
    ("sendPhoto", [flood(1)]),
    ("sendPhoto", [flood(1), flood(1)]),
    ("download", [DROP]),
    ("getFile", [DROP, DROP]),
    ("sendPhoto", [DROP]),
    ("sendPhoto", [Fault(502, "Bad Gateway")]),
])
def test_passing_trouble_is_retried_and_the_photo_arrives(bot: tuple[InProcessBot, FakeTelegram], method: str,
                                                          faults: list[Fault]) -> None:
    running, fake = bot
    chat, user = private_chat(8000 + len(fake.calls))
    fake.inject(method, *faults)
    msg = fake.photo_message(chat, user, JPEG)
    assert len(photo_reply(fake, msg)) >= 1
    assert fake.take_fault(method) is None  # every fault was met


def test_a_user_who_blocked_the_bot_is_one_log_line(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    running, fake = bot
    chat, user = private_chat(8101)
    fake.blocked.add(8101)
    fake.photo_message(chat, user, JPEG)
    line = fake.wait_for(lambda: [ln for ln in job_lines(running) if "blocked by the user" in ln], 120)
    assert re.search(r"job \d+: cannot answer", line[0]), line
    other_chat, other = private_chat(8102)
    photo_reply(fake, fake.photo_message(other_chat, other, JPEG))  # everyone else is still served


def test_a_deleted_message_still_gets_its_answer(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = bot
    chat, user = private_chat(8201)
    msg = fake.photo_message(chat, user, synthetic_photo(360, 380, seed=1))
    fake.delete_user_message(msg)
    reply = photo_reply(fake, msg)[0]
    assert isinstance(reply.result, dict) and reply.result.get("photo")  # sent, just not as a reply


def test_a_server_that_keeps_failing_is_logged_with_the_job_id(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    running, fake = bot
    chat, user = private_chat(8301)
    fake.inject("sendPhoto", *[Fault(500, "Internal Server Error")] * 4)
    fake.photo_message(chat, user, synthetic_photo(480, 480, seed=2))  # not a cache hit: it is drawn and uploaded
    lines = fake.wait_for(lambda: [ln for ln in job_lines(running) if "Telegram refused" in ln], 120)
    assert re.search(r"job \d+: Telegram refused: NetworkError: Internal Server Error", lines[0]), lines
    assert "Traceback" not in running.log()
    other_chat, other = private_chat(8302)
    photo_reply(fake, fake.photo_message(other_chat, other, JPEG))
