"""A bot with a Bot API server of its own, run with --local (TELEGRAM_API_LOCAL=true): files past
Telegram's 20 MB are read from the server's disk, drawn and answered, while the operator's own
limit (ANIMEBOT_MAX_FILE_MB) still refuses bigger ones in one sentence without fetching them."""
from __future__ import annotations

import io
from collections.abc import Callable, Iterator

import pytest
from PIL import Image

from testkit.bot_harness import private_chat
from testkit.bot_in_process import InProcessBot, bot_in_process
from testkit.clip_maker import grainy_mp4, read_back
from testkit.fake_telegram import DOWNLOAD_LIMIT, LOCAL_LIMIT, FakeTelegram
from testkit.pictures import grainy_png
from testkit.replies import first_answer
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LIMIT_MB = 40  # the operator's ANIMEBOT_MAX_FILE_MB here: past Telegram's 20, short of what the server allows


@pytest.fixture(scope="module")
def bot(real_store: ModelStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessBot, FakeTelegram]]:
    with FakeTelegram(local_dir=tmp_path_factory.mktemp("bot-api-disk")) as fake, \
            bot_in_process(fake, tmp_path_factory.mktemp("local-api"), real_store.home, TELEGRAM_API_LOCAL="true",
                           ANIMEBOT_MAX_FILE_MB=str(LIMIT_MB), ANIMEBOT_VIDEO_MAX_S="2",
                           ANIMEBOT_RATE_PER_MINUTE="0") as running:
        yield running, fake


def test_a_34_mb_png_sent_as_a_file_is_read_from_the_servers_disk_and_drawn(
        bot: tuple[InProcessBot, FakeTelegram], shared_photo: Callable[[str], bytes]) -> None:
    _, fake = bot
    png = grainy_png(shared_photo("large_1365x2048.jpg"), 34 << 20)
    assert len(png) >= 34 << 20
    chat, user = private_chat(5101)
    msg = fake.document_message(chat, user, png, "portrait.png", "image/png")
    answer = first_answer(fake, msg, "sendPhoto", "sendMessage")
    assert answer.method == "sendPhoto", answer.params.get("text")
    drawn = Image.open(io.BytesIO(fake.sent_file(answer, "photo")))
    source = Image.open(io.BytesIO(png))
    assert abs(drawn.width / drawn.height - source.width / source.height) < 0.01  # the photo, whole
    assert fake.downloads == []  # read from the disk the server shares, never over HTTP


def test_a_31_mb_mp4_sent_as_a_file_comes_back_drawn(bot: tuple[InProcessBot, FakeTelegram],
                                                     shared_photo: Callable[[str], bytes]) -> None:
    running, fake = bot
    clip = grainy_mp4(shared_photo("street_1279x867.jpg"), 31 << 20)
    assert len(clip) >= 31 << 20
    chat, user = private_chat(5102)
    msg = fake.document_message(chat, user, clip, "holiday.mp4", "video/mp4")
    answer = first_answer(fake, msg, "sendVideo", "sendAnimation", "sendMessage")
    assert answer.method == "sendVideo", answer.params.get("text")
    seen = read_back(fake.sent_file(answer, "video"))
    assert 1.5 <= float(str(seen["seconds"])) <= 2.5  # its first ANIMEBOT_VIDEO_MAX_S seconds, drawn
    assert fake.downloads == []
    line = "1 answered by chat (0 from cache), 0 failed (photo, a clip) in"  # the job's log line, once it is written
    fake.wait_for(lambda: line in running.log(), 60, "the job's log line")


def test_a_file_over_the_operators_limit_is_refused_in_one_sentence_without_fetching_it(
        bot: tuple[InProcessBot, FakeTelegram]) -> None:
    _, fake = bot
    chat, user = private_chat(5103)
    msg = fake.document_message(chat, user, b"\xff\xd8" + bytes(((LIMIT_MB + 4) << 20) + 1), "huge.jpg", "image/jpeg")
    answer = first_answer(fake, msg)
    assert answer.params["text"] == (f"That file is {LIMIT_MB + 5} MB; I can only fetch files up to {LIMIT_MB} MB. "
                                     "Please send a smaller one.")
    assert not [c for c in fake.calls_to("getFile") if c.params["file_id"] == msg["document"]["file_id"]]


def test_a_server_whose_disk_the_bot_lacks_gets_the_user_one_sentence_and_the_operator_the_reason(
        bot: tuple[InProcessBot, FakeTelegram], shared_photo: Callable[[str], bytes]) -> None:
    """The server's data folder not mounted in the bot (or at another path): the user is told the file
    could not be fetched, and the log says what to mount, without the path (it holds the token)."""
    running, fake = bot
    fake.unshared = True
    try:
        chat, user = private_chat(5104)
        msg = fake.document_message(chat, user, shared_photo("square_512.jpg"), "square.jpg", "image/jpeg")
        answer = first_answer(fake, msg)
    finally:
        fake.unshared = False
    assert answer.params["text"] == "I couldn't fetch that file from Telegram. Please send it again."
    said = [line for line in running.log().splitlines() if "cannot be read here" in line]
    assert len(said) == 1 and "mounted in the bot at the same path" in said[0], running.log()
    assert "telegram-bot-api" not in running.log()


def test_a_server_run_without_local_mode_is_named_to_the_operator_and_the_user_hears_its_20_mb(
        bot: tuple[InProcessBot, FakeTelegram]) -> None:
    """TELEGRAM_API_LOCAL=true, but the server refuses past Telegram's 20 MB (it runs without --local): the user
    is told the 20 MB that holds, not a limit their file is within, and the log says what is wrong."""
    running, fake = bot
    fake.download_limit = DOWNLOAD_LIMIT
    try:
        chat, user = private_chat(5105)
        msg = fake.document_message(chat, user, b"\xff\xd8" + bytes(25 << 20), "big.jpg", "image/jpeg")
        answer = first_answer(fake, msg)
    finally:
        fake.download_limit = LOCAL_LIMIT
    assert answer.params["text"] == "That file is 26 MB; I can only fetch files up to 20 MB. Please send a smaller one."
    assert "TELEGRAM_API_LOCAL=true needs a Bot API server run with --local" in running.log()
