"""Where updates enter the bot, in-process: a real journal (SQLite on disk), a real
python-telegram-bot Application (initialised against the fake Bot API over HTTP) and a handler
that records what it saw. No model is needed, so these run on a clone on its own, in seconds.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from telegram import Update
from telegram.ext import Application, ContextTypes, MessageHandler, filters

from bot.updates.intake import Intake
from storage.journal import Journal
from storage.database import Database
from testkit.wait import until, within
from testkit.fake_telegram import TOKEN, FakeTelegram


def text_update(update_id: int, text: str) -> dict[str, Any]:
    """A private text message as Telegram sends it."""
    user = {"id": 42, "is_bot": False, "first_name": "Ann"}
    return {"update_id": update_id, "message": {"message_id": update_id, "date": 1700000000,
                                                "chat": {"id": 42, "type": "private"}, "from": user, "text": text}}


@dataclass
class Recorder:
    """The bot's handlers, as far as the intake can tell: it records each update it is given,
    with what the journal held for it, unhandled, when the handler ran (None: nothing)."""

    journal: Journal
    seen: list[tuple[int, dict[str, Any] | None]] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    hold: asyncio.Event = field(default_factory=asyncio.Event)  # a "wait" message blocks until this is set

    async def handle(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        pending = dict(await self.journal.unhandled_updates())
        stored = pending.get(update.update_id)
        self.seen.append((update.update_id, json.loads(stored) if stored is not None else None))
        if update.message is not None and update.message.text == "wait":
            await self.hold.wait()
        self.finished.append(update.update_id)


@asynccontextmanager
async def a_start(db: Path, hold: bool = True) -> AsyncIterator[tuple[Intake, Recorder]]:
    """One run of the bot's intake on the journal at ``db``: the journal opened, an Application
    with the recording handler initialised (getMe, over HTTP to the fake); all closed after.
    With ``hold=False`` a "wait" message does not block."""
    journal_db = await Database.open(db)
    journal = Journal(journal_db)
    recorder = Recorder(journal)
    if not hold:
        recorder.hold.set()
    try:
        with FakeTelegram() as fake:
            app = Application.builder().token(TOKEN).base_url(fake.base_url).base_file_url(fake.file_url) \
                .updater(None).build()
            app.add_handler(MessageHandler(filters.ALL, recorder.handle))
            await app.initialize()
            try:
                yield Intake(app, journal), recorder
            finally:
                await app.shutdown()
    finally:
        await journal_db.close()


async def settle() -> None:
    """Until every task started on this loop (the intake's handlers) has finished."""
    while others := asyncio.all_tasks() - {asyncio.current_task()}:
        await within(asyncio.gather(*others, return_exceptions=True))


async def unhandled(recorder: Recorder) -> list[int]:
    return [uid for uid, _ in await recorder.journal.unhandled_updates()]


def test_an_update_is_in_the_journal_before_its_handler_runs_and_handled_after(tmp_path: Path) -> None:
    async def go() -> None:
        async with a_start(tmp_path / "bot.db") as (intake, recorder):
            sent = [text_update(1, "hello"), text_update(2, "again")]
            await intake.accept(sent)
            await settle()
            # each handler found its update already stored, exactly as Telegram sent it
            assert sorted(recorder.seen, key=lambda s: s[0]) == [(1, sent[0]), (2, sent[1])]
            assert await unhandled(recorder) == [] and await recorder.journal.next_offset() == 3

    asyncio.run(go())


def test_an_update_telegram_sends_again_is_handled_once(tmp_path: Path) -> None:
    async def go() -> None:
        async with a_start(tmp_path / "bot.db") as (intake, recorder):
            await intake.accept([text_update(1, "hello")])
            await settle()
            # Telegram re-sends what it has not seen confirmed, alone or with newer updates
            await intake.accept([text_update(1, "hello")])
            await intake.accept([text_update(1, "hello"), text_update(2, "new")])
            await settle()
            assert await intake.replay() == 0  # a restart finds nothing left to do
            await settle()
            assert [uid for uid, _ in recorder.seen] == [1, 2]

    asyncio.run(go())


def test_an_update_cut_short_is_handled_again_at_the_next_start(tmp_path: Path) -> None:
    async def go() -> None:
        async with a_start(tmp_path / "bot.db") as (intake, recorder):
            await intake.accept([text_update(1, "wait"), text_update(2, "quick")])
            await until(lambda: recorder.finished == [2] and sorted(uid for uid, _ in recorder.seen) == [1, 2])
            await intake.cancel()  # a stop while update 1's handler is still running
            assert recorder.finished == [2] and await unhandled(recorder) == [1]

        async with a_start(tmp_path / "bot.db", hold=False) as (intake, recorder):  # the next start
            assert await intake.replay() == 1
            await settle()
            assert recorder.seen == [(1, text_update(1, "wait"))] and recorder.finished == [1]  # not 2: it was done
            assert await unhandled(recorder) == []

    asyncio.run(go())


@pytest.mark.parametrize("broken", [
    {"update_id": 5, "message": {"message_id": 1}},  # no chat, no date
    {"update_id": 5, "message": "hello"},
    {"update_id": 5, "message": {"message_id": 1, "date": 0, "chat": {"id": 1}}},  # a chat without a type
])
def test_an_unreadable_update_is_skipped_and_marked_handled(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            broken: dict[str, Any]) -> None:
    async def go() -> None:
        async with a_start(tmp_path / "bot.db") as (intake, recorder):
            await intake.accept([text_update(4, "before"), broken, text_update(6, "after")])
            await settle()
            assert sorted(uid for uid, _ in recorder.seen) == [4, 6]  # its neighbours are served
            assert await unhandled(recorder) == []  # it will not be replayed at every start

    with caplog.at_level(logging.ERROR, logger="animebot.intake"):
        asyncio.run(go())
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == ["update 5: unreadable"]
