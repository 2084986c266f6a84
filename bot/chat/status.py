"""The status message of a request being drawn: its place in the queue, then "Drawing…" (for a clip,
"Drawing frame 40 of 150…" under a Cancel button).

Nothing is shown for answers that come straight from the cache: the
message appears once a photo is queued and is deleted once the request is
answered. Its place is the real one in the fair queue ("3 photos before
yours"), edited as it moves, but at most every few seconds, and not at all
while more than 10 are ahead: hundreds of waiting photos must not flood
Telegram with edits. While drawing, the chat shows *sending a photo*.
Sending the message is never cancelled half way, so none is left behind
when a job finishes while it is still being sent.
"""
from __future__ import annotations

import asyncio
import contextlib
import time

from telegram import Bot, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import TelegramError

from bot.chat.keyboards import cancel_keyboard
from bot.flow.kinds.registry import plan
from bot.flow.progress import Progress
from bot.flow.requests import Request
from bot.words.catalogue import t
from storage.journal import Journal

CHAT_ACTION_EVERY_S = 4.5  # Telegram shows an action for 5 s
EDIT_EVERY_S = 4.0  # the most often one status message is edited
LOOK_EVERY_S = 0.5
FAR = 10  # places beyond this are shown as "more than 10", and not followed


def reply_to(req: Request) -> ReplyParameters | None:
    """Thread a reply to the user's message, still answering if they deleted it."""
    return ReplyParameters(req.reply_to, allow_sending_without_reply=True) if req.reply_to else None


class Status:
    """The status message of one request, following its :class:`~bot.flow.progress.Progress`."""

    def __init__(self, bot: Bot, req: Request, journal: Journal, progress: Progress) -> None:
        self.bot = bot
        self.req = req
        self.journal = journal
        self.progress = progress
        self._sending: asyncio.Task[Message | None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        progress.on_first(self._start)

    def _start(self) -> None:
        self._sending = asyncio.create_task(self._send_first())
        self._watcher = asyncio.create_task(self._watch(self._sending))

    @property
    def _clip(self) -> bool:
        """Whether a clip is drawn: as its bytes turned out, not as the message said (a GIF file of
        one frame is a picture, and gets no Cancel button)."""
        return self.progress.clip

    def _markup(self) -> InlineKeyboardMarkup | None:
        return cancel_keyboard(self.req.job_id, self.req.lang) if self._clip else None

    def _text(self, ahead: int | None) -> str:
        """The status for ``ahead`` photos before this request's (None: drawing)."""
        lang, count = self.req.lang, len(self.req.items)
        frames = self.progress.frames
        if ahead is None and frames is not None:
            return t(lang, "clip_drawing", done=frames[0], total=frames[1])
        if words := plan(self.req).waiting_words:
            return t(lang, words)
        if len(self.req.drawn_styles) > 1:
            return t(lang, "styles_drawing" if ahead is None else "styles_queued", count=count)
        if count > 1:
            return t(lang, "album_drawing" if ahead is None else "album_queued", count=count)
        if ahead is None:
            return t(lang, "drawing")
        if ahead > FAR:
            return t(lang, "queued_far")
        return t(lang, "queued", count=ahead) if ahead else t(lang, "queued_next")

    async def _send_first(self) -> Message | None:
        await asyncio.sleep(0)  # let the other photos of an album queue first
        req = self.req
        try:
            message = await self.bot.send_message(req.chat_id, self._text(self.progress.ahead()),
                                                  reply_parameters=reply_to(req), reply_markup=self._markup())
        except TelegramError:
            return None
        await self.journal.set_status_message(req.job_id, message.message_id)  # removed after a crash
        return message

    async def _watch(self, sending: "asyncio.Task[Message | None]") -> None:
        """Follow the place, then switch to "drawing…" (a clip: its frames, with the Cancel button
        kept) and keep the chat action alive until cancelled."""
        message = await asyncio.shield(sending)
        if message is None:
            return
        shown, edited, acted = message.text, time.monotonic(), 0.0
        action = ChatAction.UPLOAD_VIDEO if self._clip else ChatAction.UPLOAD_PHOTO
        with contextlib.suppress(TelegramError):
            while True:
                ahead = self.progress.ahead()
                text = self._text(ahead)
                if text != shown and time.monotonic() - edited >= EDIT_EVERY_S:
                    await self.bot.edit_message_text(text, self.req.chat_id, message.message_id,
                                                     reply_markup=self._markup())
                    shown, edited = text, time.monotonic()
                if not self._clip and shown == self._text(None):  # "drawing…": nothing more to follow
                    break
                if ahead is None and time.monotonic() - acted >= CHAT_ACTION_EVERY_S:
                    await self.bot.send_chat_action(self.req.chat_id, action)
                    acted = time.monotonic()
                await asyncio.sleep(LOOK_EVERY_S)
            while True:
                await self.bot.send_chat_action(self.req.chat_id, action)
                await asyncio.sleep(CHAT_ACTION_EVERY_S)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self._sending is not None and (message := await self._sending) is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.req.chat_id, message.message_id)
