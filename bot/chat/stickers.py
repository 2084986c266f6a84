"""A drawn sticker put into the user's own sticker set, and sent.

Telegram's sets belong to a user and are made by a bot: ``uploadStickerFile``
takes the WebP, ``createNewStickerSet`` makes the user's first set (named
``…_by_<bot username>``, as Telegram requires) and ``addStickerToSet`` the
rest. The reply is the sticker itself, with a button that opens the set to
add it in Telegram.

What can go wrong is Telegram's to say, and each is handled once:

- a set with 120 stickers is full: the next sticker starts the user's next set;
- a set its owner deleted (@Stickers ``/delpack``) is made again, as the next set;
- a set that exists though the bot forgot it (``/forget``, the retention sweep)
  is filled on;
- a user who never opened a private chat with the bot cannot own a set: in a
  group they get the sticker anyway, and a link that opens the private chat;
- any other refusal: the sticker is sent on its own, with one sentence saying
  why it is not in the set.

Set names carry a keyed hash of the user id, not the id itself: a set is
public by its name, and the name should not tell who made it.
"""
from __future__ import annotations

import asyncio
import base64
import hmac
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, InputSticker, Message
from telegram.error import BadRequest, Forbidden, TelegramError

from bot.words.catalogue import t
from bot.flow.retry import retrying
from bot.chat.status import reply_to
from bot.flow.requests import Request
from storage.cache import CachedResult
from storage.stickers import FULL, StickerBook, StickerSet

log = logging.getLogger("animebot.stickers")

EMOJI = "😊"  # every sticker's emoji: Telegram wants one, and suggests the sticker when it is typed
TAG_CHARS = 10  # of the keyed hash in a set's name: 50 bits, unique among any bot's users
GAP = 3  # sets missing in a row after which a forgotten user's later sets are not looked for
# What Telegram says when the bot may not act for a user who never opened a private chat with it.
NOT_STARTED = ("peer_id_invalid", "user_id_invalid", "user not found", "bot can't initiate", "chat not found")


def kind_of(result: CachedResult) -> str:
    """A sticker's format as Telegram names it: a WebM is a video sticker, a WebP a still one."""
    return "video" if result.path.suffix == ".webm" else "static"


class NotStarted(Exception):
    """The user has no private chat with the bot, so no set can be theirs yet."""


@dataclass(frozen=True)
class InSet:
    file_id: str
    set_name: str


class Stickers:
    def __init__(self, bot: Bot, book: StickerBook, secret: Callable[[], Awaitable[bytes]]) -> None:
        self.bot = bot
        self.book = book
        self._secret = secret

    async def send(self, req: Request, result: CachedResult) -> Message:
        """The result's sticker, from the user's set when it can be put there, else on its own."""
        try:
            placed = await self._in_set(req, result)
        except NotStarted:
            log.info("job %s: no private chat with the user, so no sticker set: the sticker goes alone", req.job_id)
            sent = await self._alone(req, result)
            link = InlineKeyboardMarkup([[InlineKeyboardButton(
                t(req.lang, "sticker_start_button"), url=f"https://t.me/{self.bot.username}?start=sticker")]])
            text = t(req.lang, "sticker_needs_start", name=await self._name_of(req))
            await retrying(f"job {req.job_id}: sendMessage", lambda: self.bot.send_message(
                req.chat_id, text, reply_parameters=reply_to(req), reply_markup=link))
            return sent
        except (BadRequest, Forbidden) as exc:
            log.warning("job %s: Telegram refused the sticker set: %s", req.job_id, exc.message)
            sent = await self._alone(req, result)
            await retrying(f"job {req.job_id}: sendMessage", lambda: self.bot.send_message(
                req.chat_id, t(req.lang, "sticker_set_refused"), reply_parameters=reply_to(req)))
            return sent
        markup = InlineKeyboardMarkup([[InlineKeyboardButton(
            t(req.lang, "sticker_open_set"), url=f"https://t.me/addstickers/{placed.set_name}")]])
        return await retrying(f"job {req.job_id}: sendSticker", lambda: self.bot.send_sticker(
            req.chat_id, placed.file_id, reply_parameters=reply_to(req), reply_markup=markup))

    async def _name_of(self, req: Request) -> str:
        """The presser's first name, so that a note in a group says whom it is for."""
        try:
            member = await self.bot.get_chat_member(req.chat_id, req.user_id)
        except TelegramError:
            return "👤"
        return member.user.first_name

    async def _alone(self, req: Request, result: CachedResult) -> Message:
        """The sticker sent by itself, not in a set (by the file id Telegram gave it, if it has one)."""
        if (known := result.media_file_id) is not None:
            try:
                return await retrying(f"job {req.job_id}: sendSticker", lambda: self.bot.send_sticker(
                    req.chat_id, known, reply_parameters=reply_to(req)))
            except BadRequest:
                pass
        data = await asyncio.to_thread(result.path.read_bytes)
        return await retrying(f"job {req.job_id}: sendSticker", lambda: self.bot.send_sticker(
            req.chat_id, data, reply_parameters=reply_to(req)))

    def set_name(self, user_id: int, kind: str, number: int, secret: bytes) -> str:
        """``anime1_<tag>_by_<bot>`` (``animeclip1_…`` for video stickers): ``tag`` a keyed hash of the user."""
        digest = hmac.new(secret, f"stickers:{user_id}".encode(), "sha256").digest()
        tag = base64.b32encode(digest).decode().lower()[:TAG_CHARS]
        return f"anime{'clip' if kind == 'video' else ''}{number}_{tag}_by_{self.bot.username}"

    def title(self, kind: str, number: int, lang: str) -> str:
        key = "sticker_set_title_video" if kind == "video" else "sticker_set_title"
        return t(lang, key, bot=self.bot.username) + (f" {number}" if number > 1 else "")

    async def _in_set(self, req: Request, result: CachedResult) -> InSet:
        """The result's sticker in the user's set: the one put there before, or added now."""
        user, key = req.user_id, result.key
        placed = await self.book.placed(user, key)
        if placed is not None and placed.file_id:
            stickers = await self._stickers_of(req, placed.set_name)
            if stickers is not None and placed.file_id in stickers:
                return InSet(placed.file_id, placed.set_name)
            await self.book.drop(user, key)  # taken out of its set, or the set deleted: add it again
            placed = None
        if placed is not None:  # being added when the bot stopped: did it land?
            stickers = await self._stickers_of(req, placed.set_name)
            if stickers is not None and len(stickers) > placed.position:
                await self.book.added(user, key, stickers[placed.position], len(stickers))
                return InSet(stickers[placed.position], placed.set_name)
        kind = kind_of(result)
        uploaded = await self._upload(req, result, kind)
        sticker = InputSticker(uploaded, [EMOJI], format=kind)
        current = await self.book.current(user, kind)
        if current is None:  # none known: a new user's first, or sets the bot forgot (/forget, the sweep)
            current = await self._latest(req, kind, 1)
            if current is not None:
                await self.book.made(user, current)
        for _ in range(3):  # at most: the set is gone, then its successor's name is taken
            if current is not None and not current.full:
                stickers = await self._stickers_of(req, current.name)
                if stickers is None:  # its owner deleted it: the next sticker starts a new one
                    log.info("job %s: the user's %s sticker set %d is gone; making the next", req.job_id, kind,
                             current.number)
                    await self.book.gone(current.name)
                    current = replace(current, count=FULL)
                    continue
                if len(stickers) >= FULL:
                    current = replace(current, count=FULL)
                    await self.book.made(user, current)
                    continue
                name = current.name
                await self.book.adding(user, key, name, len(stickers))
                await retrying(f"job {req.job_id}: addStickerToSet", lambda: self.bot.add_sticker_to_set(
                    user, name, sticker))
                return await self._landed(req, key, name)
            number = current.number + 1 if current is not None else 1
            name = self.set_name(user, kind, number, await self._secret())
            await self.book.adding(user, key, name, 0)
            try:
                await retrying(f"job {req.job_id}: createNewStickerSet", lambda: self.bot.create_new_sticker_set(
                    user, name, self.title(kind, number, req.lang), [sticker]))
            except BadRequest as exc:
                if "occupied" not in exc.message.lower():
                    raise
                # It exists, though the bot had forgotten it: fill on the user's latest set.
                current = await self._latest(req, kind, number) or StickerSet(name, kind, number, FULL)
                await self.book.made(user, current)
                continue
            await self.book.made(user, StickerSet(name, kind, number, 1))
            return await self._landed(req, key, name)
        raise BadRequest("no sticker set could be made or found")

    async def _latest(self, req: Request, kind: str, number: int) -> StickerSet | None:
        """The user's latest set of ``kind`` on Telegram from set ``number`` on, None if there is none:
        the numbers are looked up until ``GAP`` in a row are missing (sets their owner deleted), so a
        forgotten user's stickers go on in their newest set, not into one they deleted earlier."""
        secret = await self._secret()
        latest: StickerSet | None = None
        missing, n = 0, number
        while missing < GAP and n < number + 100:
            name = self.set_name(req.user_id, kind, n, secret)
            stickers = await self._stickers_of(req, name)
            if stickers is None:
                missing += 1
            else:
                missing, latest = 0, StickerSet(name, kind, n, len(stickers))
            n += 1
        return latest

    async def _upload(self, req: Request, result: CachedResult, kind: str) -> str:
        """The sticker's file, uploaded for the user; NotStarted when Telegram does not know them."""
        data = await asyncio.to_thread(result.path.read_bytes)
        try:
            file = await retrying(f"job {req.job_id}: uploadStickerFile", lambda: self.bot.upload_sticker_file(
                req.user_id, data, kind))
        except (BadRequest, Forbidden) as exc:
            if any(words in exc.message.lower() for words in NOT_STARTED):
                raise NotStarted from None
            raise
        return file.file_id

    async def _stickers_of(self, req: Request, name: str) -> list[str] | None:
        """The file ids of a set's stickers in order; None when the set does not exist."""
        try:
            found = await retrying(f"job {req.job_id}: getStickerSet", lambda: self.bot.get_sticker_set(name))
        except BadRequest as exc:
            if "stickerset_invalid" in exc.message.lower() or "not found" in exc.message.lower():
                return None
            raise
        return [s.file_id for s in found.stickers]

    async def _landed(self, req: Request, key: str, name: str) -> InSet:
        """The sticker just added, as the set now lists it: its last."""
        stickers = await self._stickers_of(req, name)
        if not stickers:
            raise BadRequest("the sticker set is empty after adding to it")
        await self.book.added(req.user_id, key, stickers[-1], len(stickers))
        return InSet(stickers[-1], name)

