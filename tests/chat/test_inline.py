"""Inline mode: ``@bot`` in any chat lists the user's own results, by file id, and nobody else's.

One real bot (the tiny generator, a real worker, real SQLite) on the fake Bot API, which checks an
answer as Telegram does (ids unique, every cached file one it knows).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.bot_harness import group_chat, private_chat
from testkit.bot_in_process import InProcessBot, serving
from testkit.fake_telegram import Call, FakeTelegram
from testkit.journal import settled
from testkit.replies import first_answer, drawn
from testkit.pictures import synthetic_photo
from testkit.privacy import BOT_ENV, forget
from weights.store import ModelStore


@pytest.fixture(scope="module")
def served(tiny_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("inline"), tiny_store.home, **BOT_ENV) as both:
        yield both


def inline(fake: FakeTelegram, user: dict[str, Any], query: str = "", offset: str = "") -> Call:
    """What the bot answered to ``user`` typing ``@bot query``."""
    asked = fake.inline_query(user, query, offset)
    return fake.wait_for(lambda: [c for c in fake.calls_to("answerInlineQuery")
                                  if c.params.get("inline_query_id") == asked["id"]], 60)[0]


def listed(answer: Call) -> list[str]:
    return [r["photo_file_id"] for r in answer.params["results"]]


def test_inline_mode_lists_the_users_own_results_newest_first_and_no_one_elses(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    (chat, alice), (_, bob) = private_chat(770003001), private_chat(770003002)
    sent = [drawn(fake, chat, alice, synthetic_photo(seed=s))[1].result["photo"][-1]["file_id"] for s in (2901, 2902)]
    group = group_chat(770003009)
    in_group = fake.photo_message(group, alice, synthetic_photo(seed=2903), caption="/anime")
    sent.append(first_answer(fake, in_group, "sendPhoto", timeout=60).result["photo"][-1]["file_id"])
    fake.wait_for(lambda: settled(bot.home, fake), 60)

    answer = inline(fake, alice)
    assert listed(answer) == sent[::-1], "her three results, the group's among them, newest first"
    assert answer.params["is_personal"] in (True, "true", "True") and int(answer.params["cache_time"]) <= 10
    assert listed(inline(fake, alice, "tiny")) == sent[::-1]  # the style's name filters
    assert listed(inline(fake, alice, offset="1")) == sent[::-1][1:]  # a later page
    assert listed(inline(fake, alice, offset="9" * 30)) == sent[::-1]  # a forged offset: the first page
    unknown = inline(fake, alice, "nosuchstyle")
    assert listed(unknown) == [] and "No style has that name" in unknown.params["button"]["text"]

    stranger = inline(fake, bob)
    assert listed(stranger) == [] and "send me a photo" in stranger.params["button"]["text"]

    forget(fake, chat, alice)
    assert listed(inline(fake, alice)) == [], "forgotten: nothing left to share"
