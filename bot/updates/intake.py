"""Where updates enter the bot: stored in the journal first, then handed to the handlers.

Polling and the webhook both feed :meth:`Intake.accept`, which returns only
once the updates are committed to SQLite; only then does polling confirm
their offset to Telegram, or the webhook answer 200. Each update is handled
in a task of its own and marked handled when its handler returns. One that
was interrupted (a crash, a stop) is still unhandled at the next start, and
:meth:`replay` hands it to the handlers again; the journal's job rows make
sure a photo that was already taken on is not taken on twice.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from typing import Any

from telegram import Update
from telegram.ext import Application

from storage.database import Unwritable
from storage.journal import Journal

log = logging.getLogger("animebot.intake")


class Intake:
    def __init__(self, app: Application, journal: Journal) -> None:
        self.app = app
        self.journal = journal
        self._tasks: set[asyncio.Task[None]] = set()

    async def accept(self, updates: Sequence[dict[str, Any]]) -> None:
        """Store ``updates`` (Telegram's JSON objects) durably, then start handling the new ones."""
        payloads = [(int(u["update_id"]), json.dumps(u, ensure_ascii=False)) for u in updates]
        fresh = set(await self.journal.add_updates(payloads))
        for update_id, payload in payloads:
            if update_id in fresh:
                self._dispatch(update_id, payload)

    async def replay(self) -> int:
        """Hand the updates a crash or a stop left unhandled to the handlers again."""
        pending = await self.journal.unhandled_updates()
        for update_id, payload in pending:
            self._dispatch(update_id, payload)
        return len(pending)

    async def cancel(self) -> None:
        """Stop every update still being handled; they stay unhandled for the next start."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _dispatch(self, update_id: int, payload: str) -> None:
        task = asyncio.create_task(self._handle(update_id, payload), name=f"update-{update_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, update_id: int, payload: str) -> None:
        try:
            update = Update.de_json(json.loads(payload), self.app.bot)
        except Exception as exc:  # Telegram sent something we cannot read: nothing to answer
            # The error's class only: its text may quote the update (a caption, a name).
            log.error("update %s: unreadable (%s); skipped", update_id, exc.__class__.__name__)
        else:
            await self.app.process_update(update)  # handler errors go to the error handler
        with contextlib.suppress(Unwritable):  # said by the database, once; replayed at the next start
            await self.journal.update_handled(update_id)
