"""What a user gets back, end to end, in the cases people found broken by using the bot:
buttons acting on the result they sit under, albums whose parts arrive apart, button
mashing, quotas, group settings, spoilers and animations.

One real bot (real model at 256 px, real worker, real SQLite) serves the module
through the fake Bot API; each test plays its own users, so none sees another's
cache entries or replies. The photos are made (testkit/pictures.py): what they show is not the point.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.chat import repeats
from testkit.bot_harness import group_chat, private_chat
from testkit.bot_in_process import InProcessBot, serving
from testkit.journal import all_handled, drawn_by
from testkit.pictures import jpeg
from testkit.replies import buttons, final_answer, first_answer, photos_sent
from testkit.models import CUTE_FILE
from testkit.fake_telegram import Call, FakeTelegram
from weights.store import ModelStore

ADMIN = 990001
QUOTA = 4


@pytest.fixture(scope="module")
def served(real_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("bot"), real_store.home, ANIMEBOT_MAX_SIDE="256",
                 ANIMEBOT_ADMINS=str(ADMIN), ANIMEBOT_DAILY_QUOTA=str(QUOTA), ANIMEBOT_RATE_PER_MINUTE="0") as both:
        yield both


def result_of(fake: FakeTelegram, message: dict[str, Any]) -> Call:
    return first_answer(fake, message, "sendPhoto", timeout=180)


def message_of(call: Call) -> dict[str, Any]:
    """The message Telegram made of a bot's send call (what a user's button press refers to)."""
    return call.result


def full_size(fake: FakeTelegram, user: dict[str, Any], result: Call) -> bytes:
    data = next(d for d in buttons(result) if d.startswith("f:"))
    before = len(fake.calls_to("sendDocument", user["id"]))
    fake.press(user, message_of(result), data)
    doc = fake.wait_for(lambda: fake.calls_to("sendDocument", user["id"])[before:], 120)[0]
    return fake.sent_file(doc, "document")


def alerts(fake: FakeTelegram) -> list[str]:
    return [c.params.get("text", "") for c in fake.calls_to("answerCallbackQuery") if c.params.get("show_alert")]


def set_strength(fake: FakeTelegram, chat: dict[str, Any], user: dict[str, Any], value: int) -> None:
    fake.text_message(chat, user, "/settings")
    menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "reply_markup" in c.params
                                  and "Strength" in c.params["text"]], 60)[-1]
    edits = len(fake.calls_to("editMessageText", chat["id"]))
    fake.press(user, message_of(menu), f"o:strength:{value}")
    fake.wait_for(lambda: len(fake.calls_to("editMessageText", chat["id"])) > edits, 60)


def test_full_size_sends_the_result_it_sits_under_whoever_drew_the_photo_since(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat_a, user_a = private_chat(3001)
    chat_b, user_b = private_chat(3002)
    first = fake.photo_message(chat_a, user_a, jpeg(1))
    r1 = result_of(fake, first)
    set_strength(fake, chat_b, user_b, 25)
    same_photo = fake.files[first["photo"][-1]["file_id"]]
    r2 = result_of(fake, fake.photo_message(chat_b, user_b, b"", same_file=same_photo))
    assert fake.sent_file(r1, "photo") != fake.sent_file(r2, "photo")  # 25% is not 100%
    assert full_size(fake, user_a, r1) == fake.sent_file(r1, "photo")
    assert full_size(fake, user_b, r2) == fake.sent_file(r2, "photo")


def test_full_size_after_a_settings_change_is_still_the_old_result(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat, user = private_chat(3011)
    r100 = result_of(fake, fake.photo_message(chat, user, jpeg(11)))
    set_strength(fake, chat, user, 50)
    assert full_size(fake, user, r100) == fake.sent_file(r100, "photo")


@pytest.mark.skipif(not CUTE_FILE.is_file(), reason="the AnimeGANv3 cute model is absent from ../shared/models")
def test_a_button_reaches_only_results_shown_in_its_own_chat(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat_a, user_a = private_chat(3021)
    chat_c, user_c = private_chat(3022)
    result = result_of(fake, fake.photo_message(chat_a, user_a, jpeg(21)))
    mine = fake.text_message(chat_c, user_c, "hello")  # a message of C's own to press under
    for data in buttons(result):  # C copies A's buttons' data into a press in C's chat
        fake.press(user_c, mine, data)
    fake.wait_for(lambda: len(alerts(fake)) >= len(buttons(result)) and all(
        "expired" in a for a in alerts(fake)[-len(buttons(result)):]), 60)
    assert not fake.calls_to("sendDocument", chat_c["id"]) and not fake.calls_to("sendPhoto", chat_c["id"])


def test_an_album_whose_parts_arrive_seconds_apart_is_answered_whole(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat, user = private_chat(3031)
    for i in range(3):
        fake.photo_message(chat, user, jpeg(31 + i), media_group_id="album-3031")
        time.sleep(1.3)  # the gap between parts that lost photos: it is the input, not a wait for the bot
    fake.wait_for(lambda: len(photos_sent(fake, chat["id"])) >= 3, 180)
    group = group_chat(3032)
    _, member = private_chat(3033)
    for i in range(3):
        fake.photo_message(group, member, jpeg(34 + i), caption="/anime" if i == 0 else None,
                           media_group_id="album-3032")
        time.sleep(2.0)
    fake.wait_for(lambda: len(photos_sent(fake, group["id"])) >= 3, 180)
    for chat_id in (chat["id"], group["id"]):
        sent = photos_sent(fake, chat_id)
        assert len(sent) == 3 and len(set(sent)) == 3, chat_id


def test_an_album_gets_full_size_buttons_per_photo(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat, user = private_chat(3041)
    for i in range(3):
        fake.photo_message(chat, user, jpeg(41 + i), media_group_id="album-3041")
    menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "reply_markup" in c.params], 180)[0]
    sent = photos_sent(fake, chat["id"])
    assert len(sent) == 3 and len(buttons(menu)) == 3
    fake.press(user, message_of(menu), buttons(menu)[1])
    doc = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 60)[0]
    assert fake.sent_file(doc, "document") == sent[1]


def test_ten_presses_of_one_button_give_one_answer_and_no_chat_noise(served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    chat, user = private_chat(3051)
    result = result_of(fake, fake.photo_message(chat, user, jpeg(51)))
    data = next(d for d in buttons(result) if d.startswith("f:"))
    texts_before = len(fake.messages_to(chat["id"]))
    for _ in range(10):
        fake.press(user, message_of(result), data)
    fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 60)
    fake.wait_for(lambda: all_handled(bot.home, fake), 60)
    assert len(fake.calls_to("sendDocument", chat["id"])) == 1
    assert len(fake.messages_to(chat["id"])) == texts_before  # no "please wait" in the chat
    assert drawn_by(bot.home, user["id"]) == 1  # the presses drew nothing


def test_a_slow_double_tap_on_an_answer_from_the_cache_sends_one_copy(
        served: tuple[InProcessBot, FakeTelegram], monkeypatch: pytest.MonkeyPatch) -> None:
    """The first tap is answered from the cache in milliseconds, before the second tap arrives: the second
    is told it was just sent. A press after the window is a new wish, and gets the file again."""
    bot, fake = served
    chat, user = private_chat(3052)
    result = result_of(fake, fake.photo_message(chat, user, jpeg(52)))
    data = next(d for d in buttons(result) if d.startswith("f:"))

    def tap() -> str:
        query_id = fake.press(user, message_of(result), data)["id"]
        return str(fake.wait_for(lambda: [c for c in fake.calls_to("answerCallbackQuery")
                                          if c.params.get("callback_query_id") == query_id], 60)[0].params.get("text", ""))

    # However slow this machine is, the second tap lands within the window; the third after it.
    monkeypatch.setattr(repeats, "REPEAT_S", 3600.0)
    tap()
    fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 60)
    fake.wait_for(lambda: all_handled(bot.home, fake), 60)  # answered and done with, not still on its way
    assert tap() == "Sent just now: it is above."
    assert len(fake.calls_to("sendDocument", chat["id"])) == 1
    monkeypatch.setattr(repeats, "REPEAT_S", 0.0)
    tap()
    fake.wait_for(lambda: len(fake.calls_to("sendDocument", chat["id"])) == 2, 60)
    fake.wait_for(lambda: all_handled(bot.home, fake), 60)
    assert drawn_by(bot.home, user["id"]) == 1  # the presses drew nothing


def test_an_album_over_the_quota_draws_what_fits_and_says_how_many_were_left_out(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat, user = private_chat(3081)
    for i in range(QUOTA + 2):
        fake.photo_message(chat, user, jpeg(81 + i), media_group_id="album-3081")
    note = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "left out" in c.params["text"]], 180)[0]
    assert note.params["text"].startswith("2 of your photos were left out")
    assert len(photos_sent(fake, chat["id"])) == QUOTA


def test_only_a_groups_admins_change_its_settings_and_menus_answer_only_their_owner(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    group = group_chat(3091)
    _, admin = private_chat(3092)
    _, member = private_chat(3093)
    fake.chat_admins[group["id"]] = {admin["id"]}
    fake.text_message(group, member, "/settings")
    told = fake.wait_for(lambda: fake.messages_to(group["id"]), 60)[0]
    assert "reply_markup" not in told.params and "admins" in told.params["text"]
    fake.text_message(group, admin, "/settings")
    menu = fake.wait_for(lambda: [c for c in fake.messages_to(group["id"]) if "reply_markup" in c.params], 60)[0]
    fake.press(member, message_of(menu), "o:strength:25")
    fake.wait_for(lambda: any("admins" in a for a in alerts(fake)), 60)
    assert not fake.calls_to("editMessageText", group["id"])
    fake.press(admin, message_of(menu), "o:strength:25")
    edited = fake.wait_for(lambda: fake.calls_to("editMessageText", group["id"]), 60)[0]
    assert "25%" in edited.params["text"]

    fake.text_message(group, admin, "/style")
    styles = fake.wait_for(lambda: [c for c in fake.messages_to(group["id"]) if "Pick a style" in c.params["text"]],
                           60)[0]
    fake.press(member, message_of(styles), buttons(styles)[0])
    fake.wait_for(lambda: any("someone else" in a for a in alerts(fake)), 60)
    assert len(fake.calls_to("editMessageText", group["id"])) == 1  # the admin's menu is still there


def test_a_spoiler_comes_back_as_a_spoiler(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat, user = private_chat(3101)
    result = result_of(fake, fake.photo_message(chat, user, jpeg(101), spoiler=True))
    assert result.params.get("has_spoiler") is True
    plain = result_of(fake, fake.photo_message(chat, user, jpeg(102)))
    assert not plain.params.get("has_spoiler")


def test_a_broken_animation_gets_one_clear_sentence(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    chat, user = private_chat(3111)
    msg = fake.animation_message(chat, user, b"\x00\x00\x00\x18ftypmp42" + bytes(64))
    assert final_answer(fake, msg) == "That file is not a video or GIF I can read."


def test_a_blocked_user_is_one_warning_line(served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    chat, user = private_chat(3121)
    fake.blocked.add(user["id"])
    fake.text_message(chat, user, "/start")
    fake.wait_for(lambda: all_handled(bot.home, fake), 60)
    lines = [ln for ln in bot.log().splitlines() if "blocked by the user" in ln]
    assert len(lines) == 1 and " WARNING " in lines[0] and "Forbidden: Forbidden" not in lines[0]
    assert "Traceback" not in bot.log()
