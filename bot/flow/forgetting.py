"""/forget, carried out: the user's jobs stopped, everything kept about them deleted, and the user told.

The order matters. The erasure is written down first (storage/erasure.py), so a crash at any
later point is finished at the next start, before any job resumes (bot/root/life.py). Then the
user's new requests are refused and their jobs in flight are stopped and waited for (bot/flow/running.py),
so nothing of theirs is written after the delete: a photo on a worker leaves the pool, and in
scaled-out mode the pool revokes its task and drops its result from Redis (bot/drawing/celery/pool.py).
What they used of today's limits is kept under a one-way key, so forgetting resets neither.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from telegram import Bot
from telegram.error import TelegramError

from bot.words.catalogue import t
from bot.flow.retry import retrying
from bot.flow.access import Limits
from bot.flow.runner import JobRunner
from storage.erasure import Erased, Erasure, Erasures

log = logging.getLogger("animebot.privacy")


@dataclass(frozen=True)
class Forgotten:
    """What one /forget did: what was deleted, and how many jobs in flight it stopped."""

    erased: Erased
    stopped: int = 0


class Forgetting:
    """Carries out /forget (:meth:`forget`) and finishes any a restart interrupted (:meth:`finish_pending`)."""

    def __init__(self, bot: Bot, runner: JobRunner, erasures: Erasures, limits: Limits | None) -> None:
        self.bot = bot
        self.runner = runner
        self.erasures = erasures
        self.limits = limits
        self.asked: set[int] = set()  # users whose /forget is being carried out (bot/chat/privacy.py)

    async def forget(self, erasure: Erasure) -> Forgotten:
        """Stop the user's jobs and delete what is kept about them; the erasure stays written down
        until :meth:`told`."""
        uid = erasure.user_id
        await self.erasures.begin(erasure)
        jobs = self.runner.jobs
        async with self.runner.admission.turn(uid):  # no request of theirs is halfway through the limits
            jobs.forgetting.add(uid)
        try:
            stopped = len(await jobs.stop_all_of(uid))
            asked, drawn = await self.limits.used(uid) if self.limits is not None else (0, 0)
            erased = await self.erasures.erase(erasure, await self.runner.journal.who(uid), asked, drawn)
        finally:
            jobs.forgetting.discard(uid)
        log.info("forget %s: user %s: %d result(s) deleted, %d kept for others, %d photo(s), %d request(s), "
                 "%d update(s), %d job(s) stopped", erasure.update_id, uid, erased.results, erased.kept,
                 erased.photos, erased.requests, erased.updates, stopped)
        return Forgotten(erased, stopped)

    async def told(self, erasure: Erasure, forgotten: Forgotten, asker_id: int) -> None:
        """Say what was deleted (in place of the confirmation, where there is one), then cross the
        erasure out: a restart before this says it again, never not at all."""
        text = forgotten_text(erasure.lang, forgotten, erasure.user_id, own=asker_id == erasure.user_id)
        sent = False
        if erasure.message_id is not None:
            with contextlib.suppress(TelegramError):
                await retrying(f"forget {erasure.update_id}: editMessageText", lambda: self.bot.edit_message_text(
                    text, chat_id=erasure.chat_id, message_id=erasure.message_id))
                sent = True
        if not sent:
            with contextlib.suppress(TelegramError):
                await retrying(f"forget {erasure.update_id}: sendMessage",
                               lambda: self.bot.send_message(erasure.chat_id, text))
        await self.erasures.finish(erasure)

    async def finish_pending(self) -> int:
        """At start, before any job resumes: finish the erasures a crash or a stop interrupted."""
        pending = await self.erasures.pending()
        for erasure in pending:
            log.info("forget %s: finishing what a restart interrupted", erasure.update_id)
            forgotten = Forgotten(erasure.erased) if erasure.erased is not None else await self.forget(erasure)
            # Who asked is not kept; an admin's /forget of someone else is told in the admin's chat.
            await self.told(erasure, forgotten, asker_id=erasure.chat_id)
            await self.runner.journal.update_handled(erasure.update_id)  # not replayed: it is done
        return len(pending)


def forgotten_text(lang: str, forgotten: Forgotten, user_id: int, own: bool) -> str:
    """What /forget says it deleted: one line per kind of thing that was there, then what stays."""
    e = forgotten.erased
    lines = [t(lang, key, count=n) for key, n in (
        ("forgot_results", e.results), ("forgot_photos", e.photos), ("forgot_requests", e.requests),
        ("forgot_updates", e.updates), ("forgot_buttons", e.buttons), ("forgot_stopped", forgotten.stopped)) if n]
    if e.settings:
        lines.append(t(lang, "forgot_settings" if own else "forgot_settings_admin"))
    head = t(lang, "forgot_head" if own else "forgot_head_admin", user_id=user_id) if lines else \
        t(lang, "forgot_nothing" if own else "forgot_nothing_admin", user_id=user_id)
    parts = [head, "\n".join(f"• {line}" for line in lines)] if lines else [head]
    if e.kept:
        parts.append(t(lang, "forgot_kept" if own else "forgot_kept_admin", count=e.kept))
    if e.sticker_sets:
        links = "\n".join(f"https://t.me/addstickers/{name}" for name in e.sticker_sets)
        parts.append(t(lang, "forgot_sticker_sets" if own else "forgot_sticker_sets_admin", sets=links))
    if own:
        parts.append(t(lang, "forgot_after"))
    return "\n\n".join(parts)
