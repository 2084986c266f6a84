"""The status message of a request being drawn: "In queue, #2…", then "Drawing…".

Nothing is shown for answers that come straight from the cache: the
message appears once a photo is queued and is deleted once the request is
answered. While drawing, the chat shows *sending a photo*. Sending the
message is never cancelled half way, so none is left behind when a job
finishes while it is still being sent.
"""
from __future__ import annotations

import asyncio
import contextlib

from telegram import Bot, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import TelegramError

from bot.i18n import t
from bot.pool import Task
from bot.requests import Request
from storage.journal import Journal

CHAT_ACTION_EVERY_S = 4.5  # Telegram shows an action for 5 s


def reply_to(req: Request) -> ReplyParameters | None:
    """Thread a reply to the user's message, still answering if they deleted it."""
    return ReplyParameters(req.reply_to, allow_sending_without_reply=True) if req.reply_to else None


class Status:
    def __init__(self, bot: Bot, req: Request, journal: Journal) -> None:
        self.bot = bot
        self.req = req
        self.journal = journal
        self.tasks: list[Task] = []
        self._sending: asyncio.Task[Message | None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    def add(self, task: Task) -> None:
        self.tasks.append(task)
        if self._sending is None:
            self._sending = asyncio.create_task(self._send_first())
            self._watcher = asyncio.create_task(self._watch(self._sending))

    def _drawing(self) -> bool:
        """Whether a photo of it is on a worker, or is about to be (a worker was idle when it came)."""
        return any(task.started.is_set() or task.position <= 0 for task in self.tasks)

    def _text(self) -> str:
        lang, count = self.req.lang, len(self.req.sources)
        if count > 1:
            return t(lang, "album_drawing" if self._drawing() else "album_queued", count=count)
        return t(lang, "drawing") if self._drawing() else t(lang, "queued", position=self.tasks[0].position)

    async def _send_first(self) -> Message | None:
        await asyncio.sleep(0)  # let the other photos of an album queue first
        req = self.req
        try:
            message = await self.bot.send_message(req.chat_id, self._text(), reply_parameters=reply_to(req))
        except TelegramError:
            return None
        await self.journal.set_status_message(req.job_id, message.message_id)  # removed after a crash
        return message

    async def _watch(self, sending: "asyncio.Task[Message | None]") -> None:
        """Switch the status to "drawing…", then keep the chat action alive until cancelled."""
        message = await asyncio.shield(sending)
        if message is None:
            return
        with contextlib.suppress(TelegramError):
            while not self._drawing():
                await asyncio.sleep(0.2)
            if self._text() != message.text:
                await self.bot.edit_message_text(self._text(), self.req.chat_id, message.message_id)
            while True:
                await self.bot.send_chat_action(self.req.chat_id, ChatAction.UPLOAD_PHOTO)
                await asyncio.sleep(CHAT_ACTION_EVERY_S)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self._sending is not None and (message := await self._sending) is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.req.chat_id, message.message_id)
