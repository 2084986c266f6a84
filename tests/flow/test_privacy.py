"""A user's photos are theirs: /forget deletes what the bot keeps about them, /privacy says what that is.

One real bot (the tiny generator, a real worker process, real SQLite) serves the module through the
fake Bot API; each test plays users of its own. After a /forget the bot's home is read as a
stranger checking it would: every file byte by byte, every row of every table (testkit/privacy.py).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.service.metrics import REGISTRY
from testkit.bot_harness import group_chat, private_chat, start_bot
from testkit.clip_maker import mp4, pan_frames
from testkit.bot_in_process import InProcessBot, serving
from testkit.fake_telegram import FakeTelegram, flood
from testkit.journal import drawn_by, journal_rows, settled
from testkit.privacy import ADMIN, BOT_ENV, Traces, files_holding, forget, rows_naming, traces_of
from testkit.replies import answers, buttons, drawn, first_answer, is_status, text_after
from testkit.worker_harness import held
from testkit.pictures import synthetic_photo
from weights.store import ModelStore

@pytest.fixture(scope="module")
def served(tiny_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("privacy"), tiny_store.home, **BOT_ENV) as both:
        yield both


def photo_job(bot: InProcessBot, photo: dict[str, Any]) -> int:
    """The job (its update's id) that took on ``photo``."""
    rows = journal_rows(bot.home, "SELECT update_id FROM updates WHERE json_extract(payload, '$.message.message_id') = ?"
                        " AND json_extract(payload, '$.message.chat.id') = ?", photo["message_id"], photo["chat"]["id"])
    return int(rows[0][0])  # type: ignore[call-overload]


def test_after_forget_nothing_in_the_home_names_the_user_their_photo_or_its_result(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    chat, user = private_chat(770001001)
    data = synthetic_photo(seed=2701)
    photo, answer = drawn(fake, chat, user, data, caption="me at the beach, Alice Example")
    full = next(d for d in buttons(answer) if d.startswith("f:"))
    fake.press(user, answer.result, full)
    document = fake.wait_for(lambda: fake.calls_to("sendDocument", chat["id"]), 60)[0]
    fake.text_message(chat, user, "/settings")
    menu = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "reply_markup" in c.params], 60)[0]
    assert any(d.startswith("e:") for d in buttons(menu)), "/settings offers to delete one's data"
    fake.press(user, menu.result, "o:strength:50")
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    traces = traces_of(fake, photo, answer, hashlib.sha256(data).hexdigest(), user["id"])
    traces = type(traces)(traces.texts + (document.result["document"]["file_id"],), traces.user_id, traces.result)
    assert rows_naming(bot.home, traces), "the bot keeps what the test looks for (else the scan proves nothing)"
    assert files_holding(bot.home, traces.result)
    # The journal keeps the request by Telegram's file id, never the photo's bytes.
    stored = str(journal_rows(bot.home, "SELECT request FROM jobs WHERE job_id = ?", str(photo_job(bot, photo)))[0][0])
    assert photo["photo"][-1]["file_id"] in stored and files_holding(bot.home, data) == []

    said = forget(fake, chat, user)
    assert "results, with their files: 1" in said and "records of photos (Telegram's ids and their hashes): 1" in said
    assert "your style, language and drawing settings" in said and "delete the chat" in said
    fake.wait_for(lambda: settled(bot.home, fake), 60)

    assert files_holding(bot.home, traces.result, traces.texts) == []
    assert rows_naming(bot.home, traces) == []
    assert "Alice Example" not in bot.log() and "beach" not in bot.log()
    assert not any(text in bot.log() for text in traces.texts if text.startswith("FILE")), "no file id is logged"


def test_a_result_another_user_asked_for_too_stays_theirs(served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    (chat_a, alice), (chat_b, bob) = private_chat(770001101), private_chat(770001102)
    data = synthetic_photo(seed=2702)
    photo_a, answer_a = drawn(fake, chat_a, alice, data)
    sent = fake.files[photo_a["photo"][-1]["file_id"]]
    _, answer_b = drawn(fake, chat_b, bob, data, same_file=sent)  # forwarded: the same Telegram file
    fake.wait_for(lambda: settled(bot.home, fake), 60)

    said = forget(fake, chat_a, alice)
    assert "only your link to them is gone: 1" in said
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    traces = traces_of(fake, photo_a, answer_a, hashlib.sha256(data).hexdigest(), alice["id"])
    assert [r for r in rows_naming(bot.home, traces) if r.endswith(f"user {alice['id']}")] == []
    # Bob's buttons still work on his result, and a repeat of his comes from the cache, drawn nothing.
    fake.press(bob, answer_b.result, next(d for d in buttons(answer_b) if d.startswith("f:")))
    document = fake.wait_for(lambda: fake.calls_to("sendDocument", chat_b["id"]), 60)[0]
    assert fake.sent_file(document, "document")
    again = fake.photo_message(chat_b, bob, data, same_file=sent)
    first_answer(fake, again, "sendPhoto", timeout=60)
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, bob["id"]) == 0  # his first was Alice's drawing, shared


def test_forget_deletes_the_users_own_file_ids_when_another_user_sent_the_same_bytes(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    """Two users send the same JPEG as files of their own (different file ids, one hash): the first one's
    /forget deletes their file ids, and only the second one's, which he needs, stay."""
    bot, fake = served
    (chat_a, alice), (chat_b, bob) = private_chat(770001111), private_chat(770001112)
    data = synthetic_photo(seed=2703)
    photo_a, _ = drawn(fake, chat_a, alice, data)
    photo_b, answer_b = drawn(fake, chat_b, bob, data)
    file_a, file_b = photo_a["photo"][-1], photo_b["photo"][-1]
    assert file_a["file_unique_id"] != file_b["file_unique_id"]
    fake.wait_for(lambda: settled(bot.home, fake), 60)

    said = forget(fake, chat_a, alice)
    assert "records of photos (Telegram's ids and their hashes): 1" in said
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert journal_rows(bot.home, "SELECT * FROM uploads WHERE file_unique_id = ? OR file_id = ?",
                        file_a["file_unique_id"], file_a["file_id"]) == []
    assert rows_naming(bot.home, Traces((file_a["file_id"], file_a["file_unique_id"]), alice["id"], b"")) == []
    # Bob's own upload stays, so his buttons still fetch the photo: his avatar is drawn from it.
    redraw = next(d for d in buttons(answer_b) if d.startswith("v:"))  # an avatar: drawn again from the photo
    before, fetched = len(fake.calls_to("sendPhoto", chat_b["id"])), len(fake.calls_to("getFile"))
    fake.press(bob, answer_b.result, redraw)
    fake.wait_for(lambda: fake.calls_to("sendPhoto", chat_b["id"])[before:], 120)
    assert [c.params.get("file_id") for c in fake.calls_to("getFile")[fetched:]] == [file_b["file_id"]]


def test_after_forget_a_repeat_is_drawn_again_and_the_daily_quota_is_where_it_was(
        served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    chat, user = private_chat(770001201)
    first, second, third = (synthetic_photo(seed=s) for s in (2711, 2712, 2713))
    drawn(fake, chat, user, first)
    drawn(fake, chat, user, second)
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, user["id"]) == 2
    forget(fake, chat, user)
    assert drawn_by(bot.home, user["id"]) == 0  # the rows are gone...

    _, again = drawn(fake, chat, user, first)
    assert "photo" in again.files, "drawn and uploaded anew, not sent again by the file id of the forgotten one"
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert drawn_by(bot.home, user["id"]) == 1
    over = fake.photo_message(chat, user, third)  # ...but 2 + 1 drawn today: the quota of 3 is used up
    assert "today's limit of 3 photos" in str(first_answer(fake, over, timeout=60).params.get("text"))


def test_forget_is_private_confirmed_by_its_owner_and_open_to_admins(served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    chat, user = private_chat(770001301)
    other_chat, other = private_chat(770001302)
    admin_chat, admin = private_chat(ADMIN)
    group = group_chat(770001309)

    before = len(fake.messages_to(group["id"]))
    fake.text_message(group, user, "/forget")
    text_after(fake, group["id"], before, "Send /forget to me in a private chat")

    before = len(fake.messages_to(other_chat["id"]))
    fake.text_message(other_chat, other, f"/forget {user['id']}")
    text_after(fake, other_chat["id"], before, "Only this bot's admins can delete someone else's data")

    drawn(fake, chat, user, synthetic_photo(seed=2721))
    asked = len(fake.messages_to(chat["id"]))
    fake.text_message(chat, user, "/forget")
    question = text_after(fake, chat["id"], asked, "Delete everything")
    alerts = len(fake.calls_to("answerCallbackQuery"))
    fake.press(other, question.result, f"E:{user['id']}")  # a forged press by someone else
    alert = fake.wait_for(lambda: fake.calls_to("answerCallbackQuery")[alerts:], 60)[0]
    assert "belongs to someone else" in str(alert.params.get("text")) and alert.params.get("show_alert")
    edits = len(fake.calls_to("editMessageText", chat["id"]))
    fake.press(user, question.result, f"k:{user['id']}")
    text_after(fake, chat["id"], edits, "Nothing was deleted.", "editMessageText")
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert journal_rows(bot.home, "SELECT 1 FROM holdings WHERE user_id = ?", user["id"])

    said = forget(fake, admin_chat, admin, f"/forget {user['id']}")
    assert said.startswith(f"Done. I deleted everything kept about user {user['id']}")
    assert "your" not in said and "stored messages: 4" in said  # the user's four, not the admin's /forget
    assert journal_rows(bot.home, "SELECT 1 FROM holdings WHERE user_id = ?", user["id"]) == []
    assert f"user {user['id']}" in bot.log() and "forget" in bot.log()


def test_privacy_says_what_is_kept_for_how_long_in_english_and_chinese(served: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = served
    for uid, lang, words in ((770001401, "en", ("30 days", "/forget", "/stats")),
                             (770001402, "zh", ("30 天", "/forget", "/stats"))):
        chat, user = private_chat(uid, lang)
        fake.text_message(chat, user, "/privacy")
        text = str(fake.wait_for(lambda: fake.messages_to(chat["id"]), 60)[0].params["text"])
        assert all(w in text for w in words), text
        assert "Redis" not in text  # an embedded bot has no broker to speak of


def test_forget_stops_a_photo_being_drawn_and_keeps_nothing_of_it(served: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = served
    chat, user = private_chat(770001501)
    data = synthetic_photo(seed=2731)
    with held(*bot.worker_pids().values()):  # the drawing cannot finish before the /forget
        photo = fake.photo_message(chat, user, data)
        fake.wait_for(lambda: journal_rows(bot.home, "SELECT 1 FROM jobs WHERE user_id = ?", user["id"]), 60)
        said = forget(fake, chat, user)
    assert "photos being drawn, stopped: 1" in said
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert answers(fake, photo, "sendPhoto") == []
    status = [c.result["message_id"] for c in fake.replies_to(photo) if is_status(c)]
    assert status, "it was shown drawing"
    # ...and that message went with it: no "Drawing…" left hanging
    fake.wait_for(lambda: {int(c.params["message_id"]) for c in fake.calls_to("deleteMessage", chat["id"])} >= set(status),
                  30, "the status message deleted")
    sha = hashlib.sha256(data).hexdigest()
    assert journal_rows(bot.home, "SELECT 1 FROM results WHERE content_sha256 = ?", sha) == []
    assert rows_naming(bot.home, Traces((sha, photo["photo"][-1]["file_id"]), user["id"], b"")) == []
    # The worker, let go, drew it for nobody: the next photo is drawn as ever.
    drawn(fake, chat, user, synthetic_photo(seed=2732))


def test_a_clip_being_drawn_that_forget_stops_is_counted_as_cancelled(served: tuple[InProcessBot, FakeTelegram]) -> None:
    """/forget stops a clip on its worker: the request and the clip each count as cancelled in /metrics."""
    bot, fake = served
    chat, user = private_chat(770001503)

    def cancelled(counter: str) -> float:
        return REGISTRY.get_sample_value(f"animebot_{counter}_total", {"outcome": "cancelled"}) or 0.0

    before = cancelled("jobs"), cancelled("clips")
    with held(*bot.worker_pids().values()):  # it is on the worker, and cannot finish before the /forget
        clip = fake.clip_message(chat, user, mp4(pan_frames(synthetic_photo(seed=2741), 15, (320, 240)), 15.0), kind="video")
        fake.wait_for(lambda: [c for c in fake.replies_to(clip) if is_status(c) and "Drawing" in c.params["text"]]
                      or [c for c in fake.calls_to("editMessageText", chat["id"]) if "Drawing" in c.params["text"]], 60)
        said = forget(fake, chat, user)
    assert "photos being drawn, stopped: 1" in said
    fake.wait_for(lambda: settled(bot.home, fake), 60)
    assert (cancelled("jobs"), cancelled("clips")) == (before[0] + 1, before[1] + 1)


def test_a_restart_in_the_middle_of_a_forget_finishes_it(tiny_store: ModelStore, tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", tiny_store.home, **BOT_ENV)
        try:
            chat, user = private_chat(770001601)
            data = synthetic_photo(seed=2741)
            photo, answer = drawn(fake, chat, user, data)
            fake.wait_for(lambda: settled(bot.home, fake), 60)
            fake.text_message(chat, user, "/forget")
            question = text_after(fake, chat["id"], 0, "Delete everything")
            fake.inject("editMessageText", flood(120))  # "Deleting…" waits two minutes: the bot dies meanwhile
            fake.press(user, question.result, f"E:{user['id']}")
            fake.wait_for(lambda: journal_rows(bot.home, "SELECT user_id FROM erasures"), 60)
            fake.wait_for(lambda: not fake.faults.get("editMessageText"), 60, "the edit flooded")  # waiting now
            assert journal_rows(bot.home, "SELECT 1 FROM holdings WHERE user_id = ?", user["id"]), "not yet deleted"
            bot.kill9()
            bot = start_bot(fake, tmp_path / "bot", tiny_store.home, **BOT_ENV)
            done = text_after(fake, chat["id"], 0, "Done.", "editMessageText")
            assert "results, with their files: 1" in str(done.params["text"])
            fake.wait_for(lambda: settled(bot.home, fake), 60)
            traces = traces_of(fake, photo, answer, hashlib.sha256(data).hexdigest(), user["id"])
            assert rows_naming(bot.home, traces) == []
            assert files_holding(bot.home, traces.result, traces.texts) == []
            told = [c for c in fake.calls if str(c.params.get("text", "")).startswith("Done.")]
            assert len(told) == 1, "told once: the confirming press is not replayed after the restart"
        finally:
            bot.stop()
