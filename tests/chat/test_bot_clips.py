"""Clips through the real bot and a fake Bot API: animations, videos and video notes come back as
what they were, drawn; long ones are cut with a note; Cancel frees the worker; groups only when asked."""
from __future__ import annotations

import io
import os
import signal
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from PIL import Image

from testkit.bot_harness import group_chat, pick_style, private_chat
from testkit.bot_in_process import InProcessBot, serving
from testkit.replies import final_answer, first_answer, label
from testkit.clip_maker import mp4, pan_frames, read_back
from testkit.journal import journal_rows
from testkit.fake_telegram import Call, FakeTelegram
from testkit.models import QUICK_STYLE
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
MAX_S = 3  # the bot's longest clip here: short clips keep the module quick on two cores
ADMIN = 6999
# Most tests here are about what a clip comes back as, not its drawing, so the bots draw in the
# cute style, about a ninth of Hayao's cost a frame. A test that needs a drawing long enough to
# press Cancel in, or to be overtaken, picks Hayao for its user (:func:`testkit.bot_harness.pick_style`).


@pytest.fixture(scope="module")
def bot(real_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("clips"), real_store.home, ANIMEBOT_VIDEO_MAX_S=str(MAX_S),
                 ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_ADMINS=str(ADMIN), ANIMEBOT_STYLE=QUICK_STYLE) as running:
        yield running


@pytest.fixture(scope="module")
def street(shared_photo: Callable[[str], bytes]) -> bytes:
    return shared_photo("street_1279x867.jpg")


def clip_reply(fake: FakeTelegram, message: dict[str, Any], method: str, timeout: float = 300) -> Call:
    return first_answer(fake, message, method, timeout=timeout)


def answer_to(fake: FakeTelegram, message: dict[str, Any], timeout: float = 300) -> str:
    """'video', or the text of the bot's final reply to ``message`` (status messages aside)."""
    return label(first_answer(fake, message, "sendVideo", "sendMessage", timeout=timeout))


def press_answers(fake: FakeTelegram, since: int) -> list[str]:
    """What the bot said to button presses (answerCallbackQuery) since the ``since``-th one."""
    return [str(c.params.get("text", "")) for c in fake.calls_to("answerCallbackQuery")[since:]]


def stats(fake: FakeTelegram) -> str:
    """An admin's /stats, as the bot answers it now."""
    before = len(fake.messages_to(ADMIN))
    fake.text_message(*private_chat(ADMIN), "/stats")
    return str(fake.wait_for(lambda: fake.messages_to(ADMIN)[before:], 60)[0].params["text"])


def test_an_animation_comes_back_as_a_silent_animation_of_the_same_length(
        bot: tuple[InProcessBot, FakeTelegram], street: bytes) -> None:
    _, fake = bot
    chat, user = private_chat(6001)
    msg = fake.clip_message(chat, user, mp4(pan_frames(street, 40, (320, 240)), 20), kind="animation")
    reply = clip_reply(fake, msg, "sendAnimation")
    out = read_back(fake.sent_file(reply, "animation"))
    assert out["codec"] == "h264" and out["audio"] is None
    assert out["fps"] == pytest.approx(15, abs=0.01) and len(out["frames"]) == 30  # 2 s at the 15 fps cap
    assert out["seconds"] == pytest.approx(2.0, rel=0.05)
    assert out["size"] == (320, 240)


def test_a_video_keeps_its_sound_and_streams(bot: tuple[InProcessBot, FakeTelegram], street: bytes) -> None:
    running, fake = bot
    chat, user = private_chat(6002)
    msg = fake.clip_message(chat, user, mp4(pan_frames(street, 30, (640, 360)), 30, sound_s=1.0))
    reply = clip_reply(fake, msg, "sendVideo")
    assert reply.params["supports_streaming"] is True
    out = read_back(fake.sent_file(reply, "video"))
    assert out["audio"] == "aac" and out["audio_s"] == pytest.approx(1.0, rel=0.05)
    assert out["size"] == (480, 270) and out["seconds"] == pytest.approx(1.0, rel=0.05)
    assert "sound kept" in running.log()


def test_a_video_note_comes_back_round(bot: tuple[InProcessBot, FakeTelegram], street: bytes) -> None:
    _, fake = bot
    chat, user = private_chat(6003)
    msg = fake.clip_message(chat, user, mp4(pan_frames(street, 15, (240, 240)), 15, sound_s=1.0), kind="video_note")
    reply = clip_reply(fake, msg, "sendVideoNote")
    out = read_back(fake.sent_file(reply, "video_note"))
    assert out["size"] == (240, 240) and int(reply.params["length"]) == 240 and out["audio"] == "aac"


def test_a_long_clip_is_drawn_as_its_start_and_says_so(bot: tuple[InProcessBot, FakeTelegram], street: bytes) -> None:
    running, fake = bot
    chat, user = private_chat(6004)
    msg = fake.clip_message(chat, user, mp4(pan_frames(street, 50, (192, 144)), 10))  # 5 s
    reply = clip_reply(fake, msg, "sendVideo")
    out = read_back(fake.sent_file(reply, "video"))
    assert out["seconds"] == pytest.approx(MAX_S, rel=0.05) and out["fps"] == pytest.approx(10, abs=0.01)
    assert f"up to {MAX_S} seconds" in reply.params["caption"]
    # a clip counts a photo per second drawn (read once the job is recorded answered, just after the send)
    rows = fake.wait_for(lambda: journal_rows(running.home, "SELECT drawn FROM jobs WHERE user_id = ? AND state = 'done'",
                                              user["id"]), 30)
    assert rows == [(MAX_S,)]


def test_a_repeat_is_sent_by_reference(bot: tuple[InProcessBot, FakeTelegram], street: bytes) -> None:
    _, fake = bot
    chat, user = private_chat(6005)
    data = mp4(pan_frames(street, 10, (160, 120)), 10)
    first = clip_reply(fake, fake.clip_message(chat, user, data, kind="animation"), "sendAnimation")
    again = clip_reply(fake, fake.clip_message(chat, user, data, kind="animation"), "sendAnimation")
    assert "animation" in first.files and again.params["animation"] == first.result["animation"]["file_id"]


def test_in_a_group_only_a_clip_asked_for_is_drawn(bot: tuple[InProcessBot, FakeTelegram], street: bytes) -> None:
    _, fake = bot
    group, user = group_chat(6006), private_chat(6006)[1]
    unasked = fake.clip_message(group, user, mp4(pan_frames(street, 10, (160, 120)), 10))
    clip = fake.clip_message(group, user, mp4(pan_frames(street, 10, (160, 120), travel=0.3), 10), push=False)
    ask = fake.text_message(group, user, "/anime", reply_to=clip)
    clip_reply(fake, clip, "sendVideo")  # under the clip /anime replied to
    assert not fake.replies_to(ask) and not fake.replies_to(unasked)


def test_cancel_stops_the_drawing_frees_the_worker_and_costs_nothing(
        bot: tuple[InProcessBot, FakeTelegram], street: bytes) -> None:
    running, fake = bot
    chat, user = private_chat(6007)
    pick_style(fake, chat, user, "hayao", "Hayao")
    msg = fake.clip_message(chat, user, mp4(pan_frames(street, 90, (640, 360)), 30))  # 45 frames at 480x270

    def progress() -> list[Call]:
        return [c for c in fake.calls_to("editMessageText", chat["id"]) if "Drawing frame" in c.params["text"]]

    edit = fake.wait_for(progress, 300)[0]
    status = fake.messages[(chat["id"], int(edit.params["message_id"]))]
    (button,) = [b for row in edit.params["reply_markup"]["inline_keyboard"] for b in row]
    fake.press(user, status, button["callback_data"])
    assert final_answer(fake, msg).startswith("Cancelled")
    assert not [c for c in fake.replies_to(msg) if c.method == "sendVideo"]

    def job() -> tuple[str, str, int] | None:
        with sqlite3.connect(running.home / "bot.db") as db:
            row = db.execute("SELECT state, outcome, COALESCE(drawn, 0) FROM jobs WHERE user_id = ?",
                             (user["id"],)).fetchone()
        return row if row and row[0] != "running" else None

    assert fake.wait_for(job, 30) == ("failed", "cancelled", 0)  # nothing counts against the quota
    photo = fake.photo_message(chat, user, street)
    assert final_answer(fake, photo, 120) == "photo"  # the worker is free again


def test_a_text_file_named_video_gets_one_sentence(bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = bot
    chat, user = private_chat(6008)
    msg = fake.document_message(chat, user, b"this is not a video at all\n" * 40, "holiday.mp4", "video/mp4")
    assert final_answer(fake, msg) == "That file is not a video or GIF I can read."


def test_photos_of_others_overtake_a_second_clip(bot: tuple[InProcessBot, FakeTelegram], street: bytes,
                                                 shared_photo: Callable[[str], bytes]) -> None:
    """One worker: a user's second clip waits behind other users' photos sent after it, because a
    clip moves its owner's line on by its frames."""
    _, fake = bot
    chat_a, user_a = private_chat(6009)
    chat_b, user_b = private_chat(6010)
    pick_style(fake, chat_a, user_a, "hayao", "Hayao")
    clips = [fake.clip_message(chat_a, user_a, mp4(pan_frames(street, 15, (320, 240), travel=t), 15))
             for t in (0.1, 0.2)]
    photos = [fake.photo_message(chat_b, user_b, shared_photo(name))
              for name in ("portrait_900x1200.jpg", "square_512.jpg")]
    second_clip = clip_reply(fake, clips[1], "sendVideo")
    answered = [fake.wait_for(lambda m=m: [c for c in fake.replies_to(m) if c.method == "sendPhoto"], 300)[0]
                for m in photos]
    assert all(c.at < second_clip.at for c in answered), [c.at - second_clip.at for c in answered]


def test_clips_against_the_quota_the_waiting_limit_and_albums(real_store: ModelStore, street: bytes,
                                                              tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each second counts: a clip over what is left of today's quota is told both numbers, a clip
    sent as a file (no length given) counts one until drawn, and an album's videos are not lost silently."""
    small = mp4(pan_frames(street, 30, (160, 120)), 10)  # 3 s
    with serving(tmp_path_factory.mktemp("clip-quota"), real_store.home, ANIMEBOT_DAILY_QUOTA="4",
                 ANIMEBOT_PER_USER_LIMIT="3", ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_STYLE=QUICK_STYLE) as (_, fake):
        chat, user = private_chat(6020)
        first = fake.clip_message(chat, user, small)
        clip_reply(fake, first, "sendVideo")
        second = fake.clip_message(chat, user, mp4(pan_frames(street, 30, (160, 120), travel=0.3), 10))
        assert final_answer(fake, second) == ("That clip counts as 3 photos (one per second), and you have 1 of "
                                              "today's 4 left. It resets at midnight UTC; a shorter clip may fit now.")
        chat, user = private_chat(6021)
        as_file = fake.document_message(chat, user, mp4(pan_frames(street, 10, (160, 120)), 10), "a.mp4",
                                        "video/mp4")
        clip_reply(fake, as_file, "sendVideo")  # a 1 s file: taken, though its length was not given
        for i in range(2):
            part = fake.clip_message(chat, user, mp4(pan_frames(street, 10, (160, 120), travel=0.1 * i), 10),
                                     push=False)
            part["media_group_id"] = "clips-6021"
            fake.push({"message": part})
        note = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "one at a time" in
                                      str(c.params.get("text"))], 60)
        assert len(note) == 1


def test_a_second_cancel_says_it_is_stopping_and_stats_see_the_drawing_and_the_cancel(
        bot: tuple[InProcessBot, FakeTelegram], street: bytes, real_store: ModelStore) -> None:
    running, fake = bot
    chat, user = private_chat(6030)
    pick_style(fake, chat, user, "hayao", "Hayao")
    msg = fake.clip_message(chat, user, mp4(pan_frames(street, 90, (640, 360), travel=0.25), 30))
    edit = fake.wait_for(lambda: [c for c in fake.calls_to("editMessageText", chat["id"])
                                  if "Drawing frame" in c.params["text"]], 300)[0]
    status = fake.messages[(chat["id"], int(edit.params["message_id"]))]
    (pid,) = running.worker_pids().values()
    os.kill(pid, signal.SIGSTOP)  # the worker holds still mid-clip, so the presses certainly come before it stops
    try:
        drawing = stats(fake)
        styles = ",".join(e.name for e in real_store.installed("style"))
        assert f"[{styles}; " in drawing and "; drawing]" in drawing, drawing  # every style it draws, and busy
        (button,) = [b for row in edit.params["reply_markup"]["inline_keyboard"] for b in row]
        answered = len(fake.calls_to("answerCallbackQuery"))
        fake.press(user, status, button["callback_data"])
        fake.wait_for(lambda: press_answers(fake, answered), 60)
        fake.press(user, status, button["callback_data"])
        fake.wait_for(lambda: press_answers(fake, answered)[1:], 60)
        assert press_answers(fake, answered) == ["Stopping…",
                                                 "Already stopping: nothing will be sent, and it costs nothing."]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert answer_to(fake, msg).startswith("Cancelled")

    def journal_counts() -> tuple[int, int]:
        rows = journal_rows(running.home, "SELECT COUNT(*), COALESCE(SUM(state = 'failed' AND outcome = 'cancelled'),"
                                          " 0) FROM jobs WHERE state = 'failed'")
        failed, cancelled = rows[0]
        return int(failed) - int(cancelled), int(cancelled)  # type: ignore[call-overload]

    fake.wait_for(lambda: not journal_rows(running.home, "SELECT 1 FROM jobs WHERE state IN ('queued', 'running')"), 60)
    failed, cancelled = journal_counts()
    assert cancelled >= 1
    assert f"{failed} failed, {cancelled} cancelled, " in stats(fake)


def test_a_one_frame_gif_file_is_a_picture_with_no_cancel_button(bot: tuple[InProcessBot, FakeTelegram],
                                                                 street: bytes) -> None:
    _, fake = bot
    chat, user = private_chat(6031)
    buf = io.BytesIO()
    Image.open(io.BytesIO(street)).convert("RGB").resize((320, 217)).save(buf, "GIF")
    msg = fake.document_message(chat, user, buf.getvalue(), "still.gif", "image/gif")
    assert final_answer(fake, msg) == "photo"
    statuses = [c for c in fake.replies_to(msg) if c.method == "sendMessage"]
    edits = [c for c in fake.calls_to("editMessageText", chat["id"])]
    assert statuses, "a status while it was drawn"
    assert not [c for c in statuses + edits if c.params.get("reply_markup")], "a picture has nothing to cancel"


def test_a_clip_sent_as_a_file_counts_its_seconds_once_its_header_is_read(
        real_store: ModelStore, street: bytes, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Telegram gives no length for a file: the bot reads it from the clip's header, after the download
    and before drawing, and weighs it against the quota and the waiting limit then, as a video's."""
    def clip(seconds: int, travel: float) -> bytes:
        return mp4(pan_frames(street, 10 * seconds, (160, 120), travel=travel), 10)

    with serving(tmp_path_factory.mktemp("file-quota"), real_store.home, ANIMEBOT_DAILY_QUOTA="6",
                 ANIMEBOT_PER_USER_LIMIT="4", ANIMEBOT_RATE_PER_MINUTE="0", ANIMEBOT_STYLE=QUICK_STYLE) as (running, fake):
        chat, user = private_chat(6050)
        first = fake.document_message(chat, user, clip(3, 0.1), "first.mp4", "video/mp4")
        assert answer_to(fake, first) == "video"
        # Two more at once, each counted as one photo until its header is read: only one fits what is left
        # (3 of 6). The other is told so, at once or once its length is known, as the two arrive.
        both = [fake.document_message(chat, user, clip(3, 0.2 + 0.1 * i), f"more-{i}.mp4", "video/mp4")
                for i in range(2)]
        answers = sorted(answer_to(fake, m) for m in both)
        assert answers[1] == "video", answers
        assert answers[0] in ("That clip counts as 3 photos (one per second), and you have 2 of today's 6 left. It "
                              "resets at midnight UTC; a shorter clip may fit now.",
                              "You've reached today's limit of 6 photos. It resets at midnight UTC."), answers
        fake.wait_for(lambda: not journal_rows(running.home, "SELECT 1 FROM jobs WHERE state IN ('queued', 'running')"),
                      60)
        drawn = journal_rows(running.home, "SELECT COALESCE(SUM(drawn), 0) FROM jobs WHERE user_id = ?", user["id"])
        assert drawn == [(6,)], "two clips of three seconds: the quota, and no more"

        chat, user = private_chat(6051)
        long = fake.document_message(chat, user, clip(5, 0.1), "long.mp4", "video/mp4")
        assert answer_to(fake, long) == ("That clip counts as 5 photos (one per second); with what you have waiting, "
                                         "there is room for 4 of the 4 I keep for one person. Send it again once "
                                         "your other photos are back, or send a shorter clip.")


def test_a_preview_of_my_last_photo_is_of_the_last_photo_never_of_a_clip(
        bot: tuple[InProcessBot, FakeTelegram], street: bytes, real_store: ModelStore) -> None:
    running, fake = bot
    chat, user = private_chat(6032)

    def menu_buttons() -> list[str]:
        before = len(fake.messages_to(chat["id"]))
        fake.text_message(chat, user, "/style")
        menu = fake.wait_for(lambda: fake.messages_to(chat["id"])[before:], 60)[0]
        return [b["callback_data"] for row in menu.params["reply_markup"]["inline_keyboard"] for b in row]

    note = fake.clip_message(chat, user, mp4(pan_frames(street, 10, (240, 240)), 10), kind="video_note")
    clip_reply(fake, note, "sendVideoNote")
    assert "p:6032" not in menu_buttons(), "a clip is no photo to preview the styles on"

    small = io.BytesIO()
    Image.open(io.BytesIO(street)).convert("RGB").resize((400, 271)).save(small, "JPEG", quality=90)
    photo = fake.photo_message(chat, user, small.getvalue())
    assert final_answer(fake, photo) == "photo"
    clip = fake.clip_message(chat, user, mp4(pan_frames(street, 10, (176, 132), travel=0.4), 10))  # a size of its own
    clip_reply(fake, clip, "sendVideo")
    buttons = menu_buttons()
    assert "p:6032" in buttons
    menu = fake.messages_to(chat["id"])[-1]
    fake.press(user, fake.messages[(chat["id"], int(menu.result["message_id"]))], "p:6032")
    fake.wait_for(lambda: [c for c in fake.calls_to("sendPhoto", chat["id"])
                           if "Your last photo" in str(c.params.get("caption"))], 300)
    log = running.log()
    assert log.count(" 400x271 -> ") == 1 + len(real_store.installed("style")), "the photo, then a tile per style"
    assert log.count("clip 176x132 -> ") == 1, "the clip was drawn once, for its own answer"
