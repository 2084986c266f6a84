"""A deliberately small bot (one worker, a queue of one, one job per user) under a burst."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.bot_harness import RunningBot, final_answer, private_chat, serving, start_bot
from tests.fake_telegram import FakeTelegram
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
BIG = ["street_1279x867.jpg", "town_1280x854.jpg", "tall_1280x1707.jpg", "large_1365x2048.jpg"]


@pytest.fixture(scope="module")
def small_bot(real_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningBot, FakeTelegram]]:
    with serving(tmp_path_factory.mktemp("small"), real_store.home, ANIMEBOT_WORKERS="1",
                 ANIMEBOT_QUEUE_SIZE="1", ANIMEBOT_PER_USER_JOBS="1") as running:
        yield running


def test_a_full_queue_answers_busy_and_everyone_gets_an_answer(small_bot: tuple[RunningBot, FakeTelegram],
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


def test_one_user_cannot_fill_the_queue(small_bot: tuple[RunningBot, FakeTelegram],
                                        shared_photo: Callable[[str], bytes]) -> None:
    bot, fake = small_bot
    chat, user = private_chat(310)
    first = fake.photo_message(chat, user, shared_photo("portrait_900x1200.jpg"))
    second = fake.photo_message(chat, user, shared_photo("group_3_faces.jpg"))
    assert final_answer(fake, first) == "photo"
    assert "Please wait until the photos you already sent are done" in final_answer(fake, second)


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
