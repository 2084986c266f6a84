"""A deliberately small bot (one worker, a queue of one, one photo waiting per user) under a burst."""
from __future__ import annotations

import io
from collections.abc import Callable, Iterator

import pytest
from PIL import Image

from bot.chat.replies import NOTICE_EDIT_EVERY_S
from testkit.bot_harness import private_chat, start_bot
from testkit.bot_in_process import InProcessBot, serving
from testkit.replies import final_answer, photos_sent
from testkit.journal import all_handled, open_jobs
from testkit.pictures import jpeg
from testkit.fake_telegram import Call, FakeTelegram
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ADMIN = 990002
BIG = ["street_1279x867.jpg", "town_1280x854.jpg", "tall_1280x1707.jpg", "large_1365x2048.jpg"]


@pytest.fixture(scope="module")
def small_bot(real_store: ModelStore,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("small"), real_store.home, ANIMEBOT_WORKERS="1",
                 ANIMEBOT_QUEUE_SIZE="1", ANIMEBOT_PER_USER_LIMIT="1", ANIMEBOT_ADMINS=str(ADMIN)) as running:
        yield running


def test_a_full_queue_answers_busy_and_everyone_gets_an_answer(small_bot: tuple[InProcessBot, FakeTelegram],
                                                                shared_photo: Callable[[str], bytes]) -> None:
    bot, fake = small_bot
    sent = []
    for i, name in enumerate(BIG):  # the biggest photos, so the one worker is still drawing the first
        chat, user = private_chat(300 + i)
        sent.append(fake.photo_message(chat, user, shared_photo(name)))
    answers = [final_answer(fake, m) for m in sent]
    assert "photo" in answers
    assert any("busy" in a for a in answers), answers
    assert all(a == "photo" or "busy" in a for a in answers), answers


def test_one_user_past_their_waiting_limit_is_told_so_in_one_sentence(small_bot: tuple[InProcessBot, FakeTelegram],
                                        shared_photo: Callable[[str], bytes]) -> None:
    bot, fake = small_bot
    chat, user = private_chat(310)
    first = fake.photo_message(chat, user, shared_photo("portrait_900x1200.jpg"))
    second = fake.photo_message(chat, user, shared_photo("group_3_faces.jpg"))
    assert final_answer(fake, first) == "photo"
    assert final_answer(fake, second) == ("You already have 1 photo waiting, the most I keep for one person. "
                                          "Send this one again once it is back.")


def test_a_burst_past_the_limit_is_told_once_how_many_were_not_taken(small_bot: tuple[InProcessBot, FakeTelegram],
                                                                      shared_photo: Callable[[str], bytes]) -> None:
    bot, fake = small_bot
    chat, user = private_chat(330)
    # big, and never drawn before (the first test drew the originals): still drawing while the rest arrive
    fake.photo_message(chat, user, mirrored(shared_photo("large_1365x2048.jpg")))
    for i in range(7):
        fake.photo_message(chat, user, jpeg(330 + i))
    fake.wait_for(lambda: photos_sent(fake, chat["id"]), 180)
    fake.wait_for(lambda: all_handled(bot.home, fake), 60)
    waits = [c for c in fake.messages_to(chat["id"]) if c.params["text"].startswith("You already have")]
    assert len(photos_sent(fake, chat["id"])) == 1 and len(waits) == 1

    def edits() -> list[Call]:
        return [c for c in fake.calls_to("editMessageText", chat["id"])
                if str(c.params["message_id"]) == str(waits[0].result["message_id"])]

    fake.wait_for(lambda: any("not taken so far: 7" in c.params["text"] for c in edits()), 60)
    assert "not taken so far: 7" in edits()[-1].params["text"]
    times = [waits[0].at] + [c.at for c in edits()]  # counted in a few edits, not one a photo
    assert len(edits()) < 6 and all(b - a >= NOTICE_EDIT_EVERY_S - 0.5 for a, b in zip(times, times[1:])), times


def test_an_album_past_the_limit_is_drawn_as_far_as_it_fits_and_says_so(
        small_bot: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = small_bot
    chat, user = private_chat(340)
    for i in range(3):
        fake.photo_message(chat, user, jpeg(340 + i), media_group_id="album-340")
    note = fake.wait_for(lambda: [c for c in fake.messages_to(chat["id"]) if "I took" in c.params["text"]], 180)[0]
    assert note.params["text"] == ("I took 1 of these 3 photos; the other 2 would pass the 1 I keep waiting for one "
                                   "person, so send them again once these are back.")
    assert len(photos_sent(fake, chat["id"])) == 1


def test_admins_have_no_waiting_limit(small_bot: tuple[InProcessBot, FakeTelegram]) -> None:
    bot, fake = small_bot
    chat, user = private_chat(ADMIN)
    fake.wait_for(lambda: all_handled(bot.home, fake) and not open_jobs(bot.home), 120)  # the queue of 1 is free again
    for i in range(2):  # one drawing, one waiting: past the limit of 1, within the queue of 1
        fake.photo_message(chat, user, jpeg(350 + i))
    fake.wait_for(lambda: len(photos_sent(fake, chat["id"])) >= 2, 180)
    fake.wait_for(lambda: all_handled(bot.home, fake), 60)
    assert not [c for c in fake.messages_to(chat["id"]) if c.params["text"].startswith("You already have")]


def mirrored(photo: bytes) -> bytes:
    """The photo flipped left to right: as big, but new to the bot's cache."""
    out = io.BytesIO()
    Image.open(io.BytesIO(photo)).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(out, "JPEG", quality=90)
    return out.getvalue()


def test_a_photo_forwarded_by_many_at_once_is_drawn_once(real_store: ModelStore,
                                                         tmp_path_factory: pytest.TempPathFactory,
                                                         shared_photo: Callable[[str], bytes]) -> None:
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path_factory.mktemp("viral"), real_store.home)
        try:
            first = private_chat(320)
            original = fake.photo_message(*first, shared_photo("street_1279x867.jpg"))
            file = fake.files[original["photo"][-1]["file_id"]]
            forwards = [fake.photo_message(*private_chat(321 + i), b"", same_file=file) for i in range(3)]
            assert [final_answer(fake, m) for m in [original, *forwards]] == ["photo"] * 4
            drawn = [line for line in bot.log().splitlines() if "face pass(es)" in line]
            assert len(drawn) == 1, drawn
        finally:
            assert bot.stop() == 0, bot.log()
