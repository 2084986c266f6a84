"""Never lose a photo: a crash (kill -9), a graceful stop (SIGTERM) and a stored update.

The real bot runs against the fake Bot API with the real model; each test
restarts it on the same data dir, as an operator (or Docker) would.
"""
from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageOps

from storage.journal import Journal
from storage.database import Database
from testkit.bot_harness import private_chat, start_bot
from testkit.journal import journal_rows, settled
from testkit.replies import STATUS, answers as replies_of
from testkit.fake_telegram import Call, FakeTelegram
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
FAST = {"ANIMEBOT_MAX_SIDE": "320", "ANIMEBOT_PER_USER_LIMIT": "20", "ANIMEBOT_RATE_PER_MINUTE": "0"}


def distinct_photos(files: list[Path], count: int) -> list[bytes]:
    """``count`` different JPEGs (no two share a cache entry): the shared photos, then mirrored.
    Real photos of many sizes keep the worker drawing while the rest wait, which is what a crash
    or a stop must find."""
    out = []
    for i in range(count):
        img = Image.open(files[i % len(files)]).convert("RGB")
        img.thumbnail((900, 900))
        if (i // len(files)) % 2:
            img = ImageOps.mirror(img)
        buf = io.BytesIO()
        img.save(buf, "JPEG", quality=88 - i // len(files))
        out.append(buf.getvalue())
    return out


def answers(fake: FakeTelegram, message: dict[str, Any]) -> list[Call]:
    """The bot's answers to ``message``: result photos and final sentences, not status messages."""
    return replies_of(fake, message, "sendPhoto", "sendMessage")


def leftover_status(fake: FakeTelegram, unheard: tuple[float, float] | None = None) -> list[str]:
    """Status messages still showing in any chat; but for those sent within ``unheard`` (a span of
    monotonic time): a sendMessage Telegram took as the bot was killed, whose answer the bot never read,
    names a message the bot cannot know of, and so cannot delete."""
    with fake._cond:
        lost = {(int(c.params["chat_id"]), c.result["message_id"]) for c in fake.calls
                if unheard and c.method == "sendMessage" and isinstance(c.result, dict)
                and unheard[0] <= c.at <= unheard[1]}
        return [m["text"] for key, m in fake.messages.items() if key not in lost
                and m.get("from", {}).get("is_bot") and str(m.get("text", "")).startswith(STATUS)]


def send_all(fake: FakeTelegram, photos: list[bytes]) -> list[dict[str, Any]]:
    sent = []
    for i, data in enumerate(photos):
        chat, user = private_chat(700 + i % 3)
        sent.append(fake.photo_message(chat, user, data))
    return sent


def test_after_a_kill_9_every_accepted_photo_is_answered_exactly_once(real_store: ModelStore, photos: list[Path],
                                                                      tmp_path: Path) -> None:
    """The bot dies (kill -9, workers too) while uploading its second result, before Telegram
    has taken it; the other eight photos are queued or being drawn."""
    jpegs = distinct_photos(photos, 10)
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, **FAST)
        uploads = []
        killed_at: list[float] = []

        def crash_on_second_upload(method: str, params: dict[str, Any]) -> bool:
            if method == "sendPhoto":
                uploads.append(params["chat_id"])
                if len(uploads) == 2:
                    killed_at.append(time.monotonic())
                    bot.kill9()
                    return True
            return False

        fake.intercept = crash_on_second_upload
        sent = send_all(fake, jpegs)
        fake.wait_for(lambda: bot.process.poll() is not None, 300)
        fake.intercept = None
        assert sum(1 for m in sent if answers(fake, m)) == 1
        # A status message sent in the last moment (the HTTP round trip of another job's sendMessage)
        # reached Telegram, but its answer never reached the dying bot.
        unheard = (killed_at[0] - 1.0, time.monotonic())

        bot = start_bot(fake, tmp_path / "bot", real_store.home, **FAST)
        try:
            fake.wait_for(lambda: all(answers(fake, m) for m in sent) and settled(bot.home, fake), 600)
            assert journal_rows(bot.home, "SELECT state, COUNT(*) FROM jobs GROUP BY state") == [("done", len(sent))]
            for m in sent:
                got = answers(fake, m)
                assert [c.method for c in got] == ["sendPhoto"], (m["message_id"], [c.params for c in got])
            fake.wait_for(lambda: not leftover_status(fake, unheard), 30)
        finally:
            assert bot.stop() == 0, bot.log()
        assert "resumed" in bot.log()


def test_sigterm_finishes_the_photo_being_drawn_and_keeps_the_rest(real_store: ModelStore, photos: list[Path],
                                                                   tmp_path: Path) -> None:
    # Eight, not four: with compiled shapes loaded from the cache, four small photos could all be
    # drawn between the first "Drawing…" and the stop, leaving nothing to keep.
    jpegs = distinct_photos(photos, 8)
    with FakeTelegram() as fake:
        bot = start_bot(fake, tmp_path / "bot", real_store.home, **FAST)
        sent = send_all(fake, jpegs)
        # "Drawing…" comes as the first status of a photo a free worker takes at once, or as an edit
        shown = fake.wait_for(lambda: [c for c in fake.calls_to("sendMessage") + fake.calls_to("editMessageText")
                                       if c.params.get("text") == "Drawing…"], 300)
        drawing = int(shown[0].params["chat_id"])
        assert bot.stop() == 0, bot.log()
        log = bot.log()
        answered = [m for m in sent if answers(fake, m)]
        assert any(m["chat"]["id"] == drawing for m in answered), "the photo being drawn was not sent before exit"
        assert len(answered) < len(sent), "nothing was left queued at the stop; the test proved nothing"
        assert "kept for the next start" in log

        bot = start_bot(fake, tmp_path / "bot", real_store.home, **FAST)
        try:
            fake.wait_for(lambda: all(answers(fake, m) for m in sent) and settled(bot.home, fake), 600)
            assert all(len(answers(fake, m)) == 1 for m in sent), [len(answers(fake, m)) for m in sent]
            # A status is deleted just after its job is marked answered in the journal, so it can
            # still show the moment the journal is settled.
            fake.wait_for(lambda: not leftover_status(fake), 30)
        finally:
            assert bot.stop() == 0, bot.log()


def test_an_update_stored_but_not_handled_is_handled_at_the_next_start(real_store: ModelStore, photos: list[Path],
                                                                         tmp_path: Path) -> None:
    """The gap before a handler runs: Telegram has forgotten the update (its offset was confirmed),
    and only the journal still has it."""
    home = tmp_path / "bot"
    with FakeTelegram() as fake:
        chat, user = private_chat(777)
        msg = fake.photo_message(chat, user, distinct_photos(photos, 1)[0], push=False)

        async def store() -> None:
            journal_db = await Database.open(home / "bot.db")
            journal = Journal(journal_db)
            await journal.add_updates([(41, json.dumps({"update_id": 41, "message": msg}))])
            await journal_db.close()

        asyncio.run(store())
        bot = start_bot(fake, home, real_store.home, **FAST)
        try:
            reply = fake.wait_for(lambda: answers(fake, msg), 300)
            assert [c.method for c in reply] == ["sendPhoto"]
        finally:
            assert bot.stop() == 0, bot.log()
