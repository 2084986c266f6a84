"""Long polling of our own, feeding the journal and then the handlers.

PTB's Updater calls deleteWebhook before it polls and treats a failure as
fatal, and it confirms a batch of updates (by asking for the next offset)
as soon as it polls again, possibly before any handler has run. This loop
stores each batch in the journal first (bot/updates/intake.py), so the offset that
confirms an update is only sent once the update is safe on disk. It backs
off on network errors, and while the journal cannot be written, instead of
dying: Telegram keeps the updates it was not told were taken.
"""
from __future__ import annotations

import asyncio
import logging
import time

from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import Application

from bot.updates.intake import Intake
from storage.database import Unwritable

log = logging.getLogger("animebot.polling")

MAX_BACKOFF_S = 60.0


async def poll(app: Application, intake: Intake, offset: int, timeout_s: int, allowed_updates: list[str]) -> None:
    """Fetch updates forever (until cancelled), from ``offset`` on."""
    backoff = 1.0
    while True:
        started = time.monotonic()
        try:
            updates = await app.bot.get_updates(offset=offset, timeout=timeout_s, read_timeout=timeout_s + 10,
                                                allowed_updates=allowed_updates)
        except InvalidToken:
            raise
        except (NetworkError, TelegramError) as exc:  # NetworkError covers timeouts
            log.warning("getUpdates failed (%s: %s); retrying in %.0f s", exc.__class__.__name__, exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            continue
        if updates:
            try:
                await intake.accept([u.to_dict() for u in updates])  # on disk before the next offset confirms them
            except Unwritable:  # said by the database, once: they stay with Telegram, fetched again
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            offset = updates[-1].update_id + 1
        elif time.monotonic() - started < 1.0:  # a server that ignores the long-poll timeout
            await asyncio.sleep(0.5)
        backoff = 1.0
