"""Long polling of our own, feeding python-telegram-bot's Application.

PTB's Updater calls deleteWebhook before it polls and treats a failure as
fatal, so a Bot API without that method (a local server, a test double)
would stop the bot before it starts. This loop tries it once, goes on
either way, and backs off on network errors instead of dying. It is also
the one place where updates enter the bot, which is where they can be
stored before their offset is confirmed.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time

from telegram.error import InvalidToken, NetworkError, TelegramError
from telegram.ext import Application

log = logging.getLogger("animebot.polling")

MAX_BACKOFF_S = 60.0


async def poll(app: Application, timeout_s: int, allowed_updates: list[str]) -> None:
    """Fetch updates forever (until cancelled) and queue them for the handlers."""
    offset = 0
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
        backoff = 1.0
        for update in updates:
            await app.update_queue.put(update)
        if updates:
            offset = updates[-1].update_id + 1
        elif time.monotonic() - started < 1.0:  # a server that ignores the long-poll timeout
            await asyncio.sleep(0.5)


async def serve(app: Application, timeout_s: int, allowed_updates: list[str]) -> None:
    """Run ``app`` with :func:`poll` until SIGINT or SIGTERM, with its start-up and shutdown hooks."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with app:  # initialize (getMe) and, on the way out, shutdown
        try:
            if app.post_init:
                await app.post_init(app)
            try:
                await app.bot.delete_webhook()
            except TelegramError as exc:
                log.info("deleteWebhook not done (%s); polling anyway", exc.__class__.__name__)
            await app.start()
            try:
                poller = asyncio.create_task(poll(app, timeout_s, allowed_updates), name="poll")
                stopping = asyncio.create_task(stop.wait())
                await asyncio.wait([poller, stopping], return_when=asyncio.FIRST_COMPLETED)
                poller.cancel()
                stopping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poller  # re-raises InvalidToken, if that is why it ended
            finally:
                log.info("stopping")
                await app.stop()
        finally:
            if app.post_shutdown:
                await app.post_shutdown(app)
