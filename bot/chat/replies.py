"""Sending a request's answer: the drawn results, a sentence, or a refusal.

Results go by their remembered Telegram ``file_id`` when there is one (no
upload), and are uploaded when Telegram has forgotten it. A single result
carries its buttons; an album's results cannot, so a message after the
album carries a Full size button per photo. Refusals to a button press
are an alert on the button, not a chat message; refusals that repeat in a
chat within a minute edit one message with the count instead of sending
another.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from telegram import Bot, InlineKeyboardMarkup, InputMediaPhoto, Message
from telegram.error import BadRequest, TelegramError

from bot.chat.keyboards import album_keyboard, clip_keyboard, result_keyboard, style_keyboard, style_menu_text
from bot.chat.status import reply_to
from bot.chat.stickers import Stickers
from bot.flow.access import Refusal
from bot.flow.answering import Answer, Shape, unhandled
from bot.flow.drawn import Drawn
from bot.flow.previews import legend
from bot.flow.requests import Request
from bot.flow.retry import retrying
from bot.styles import Styles
from bot.words.catalogue import t
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons, ShownResult
from storage.cache import CachedResult
from storage.stores import Stores

log = logging.getLogger("animebot.replies")

NOTICE_WINDOW_S = 60.0  # refusals within this long of the last one edit it instead of adding one
# When a burst's photos not taken may be sent again, by the limit that refused them: once the user's waiting
# photos are back, after midnight UTC (the daily quota), or in a minute (the queue full, the rate limit).
NOT_TAKEN = {"per_user_limit": "not_taken", "clip_over_limit": "not_taken", "quota_reached": "not_taken_quota",
             "clip_over_quota": "not_taken_quota"}
FINAL = ("blocked", "not_allowed")  # refusals no "send them again" follows: the first notice says it for the burst
NOTICE_EDIT_EVERY_S = 2.0  # a burst's refusals are counted in one edit at most this often, not one edit each
# A face style (made for aligned face crops) says so under a photo whose largest face is smaller than this
# share of the photo's short side: a selfie's face fills half of it, group_3_faces' a fifth (drawn well),
# town_1280x854's a twelfth (the scene around it washes out).
SELFIE_NOTE_SHARE = 0.12
# What Telegram takes from a bot as a photo: up to 10 MB, its width and height adding up to 10000 (files:
# Offers.upload_limit).
PHOTO_LIMIT = 10 * 1024 * 1024
PHOTO_SIDES = 10_000


@dataclass
class _Notice:
    message_id: int
    skipped: int
    at: float
    edited_at: float = 0.0
    editing: asyncio.Task[None] | None = None  # the next edit, waiting for its turn


@dataclass(frozen=True)
class Offers:
    """What this bot offers under a result, and says of clips: the operator's choices, as the chat shows them."""

    clip_s: float = 10.0  # the longest clip drawn, for the note under one cut short
    webapp_url: str | None = None  # the Mini App's address: a button under each photo result opens it
    hd: bool = False  # HD is on and installed: a button under each photo result asks for it
    # The biggest file the Bot API takes from the bot: Telegram's 50 MB, or a local Bot API server's 2000 MB.
    upload_limit: int = 50 << 20


class Replies:
    def __init__(self, bot: Bot, stores: Stores, buttons: ResultButtons[ConvertSettings], styles: Styles, stickers: Stickers,
                 offers: Offers = Offers()) -> None:
        self.bot = bot
        self.offers = offers
        self.stickers = stickers
        self._told_oval: set[int] = set()  # chats told this run that stickers are cut as an oval
        self.stores = stores
        self.buttons = buttons
        self.styles = styles
        self._notices: dict[tuple[int, str], _Notice] = {}
        self._notice_locks: dict[tuple[int, str], asyncio.Lock] = {}  # a burst's refusals come at once

    async def answer(self, req: Request, answer: Answer) -> list[tuple[Drawn, Message]]:
        """Send the answer in the form its shape takes in a chat, then its sentences; returns each
        drawing sent with the message that carried it (for :meth:`remember`)."""
        sent: list[tuple[Drawn, Message]] = []
        if answer.shape is Shape.MENU:
            await self.style_menu(req)  # the menu alone is no answer to a preview: the job failed
        elif answer.shape is Shape.SHEET:
            if answer.sheet is not None:
                sent = [(answer.sheet, await self.sheet(req, answer.sheet.result, missing=answer.missing))]
        elif answer.done:
            sent = await self._results(req, answer.shape, answer.done)
        for sentence in answer.sentences:
            await self.say(req, sentence)
        return sent

    async def _results(self, req: Request, shape: Shape, done: Sequence[Drawn]) -> list[tuple[Drawn, Message]]:
        """Drawings in the form their shape takes in a chat. Every shape is named here: one added to
        :class:`Shape` and not to this match is a type error (:func:`unhandled`)."""
        one = done[0] if len(done) == 1 else None
        match shape:
            case Shape.FILES:
                return [(d, await self._document(req, d)) for d in done]
            case Shape.LARGE if one is not None:
                return await self._large(req, one)
            case Shape.STICKER if one is not None:
                return [(one, await self._sticker(req, one))]
            case Shape.PICTURE_AND_FILE if one is not None:  # a profile photo (or clip) to look at, and its file
                shown = await self._clip(req, one) if one.source.clip else await self._photo(req, one, shape)
                return [(one, shown), (one, await self._document(req, one))]
            case Shape.PICTURES | Shape.STYLES | Shape.TILES | Shape.LARGE | Shape.STICKER | Shape.PICTURE_AND_FILE:
                if one is not None:
                    return [(one, await self._clip(req, one) if one.source.clip else await self._photo(req, one, shape))]
                return await self._album(req, done, shape)
            case Shape.SHEET | Shape.MENU:  # answered by answer() itself, never with drawings of their own
                return []
            case _:
                unhandled(shape)

    async def _sticker(self, req: Request, d: Drawn) -> Message:
        sent = await self.stickers.send(req, d.result)
        if self.styles.cutter is None and req.chat_id not in self._told_oval:
            self._told_oval.add(req.chat_id)
            await self.say(req, t(req.lang, "sticker_oval"))
        return sent

    async def remember(self, sent: Sequence[tuple[Drawn, object]]) -> None:
        """Keep what Telegram calls our uploads, so a repeat is sent by reference."""
        for d, msg in sent:
            assert isinstance(msg, Message)
            res = d.result
            media = sent_as(msg)
            if media is not None and media[0] != res.media_file_id:
                await self.stores.results.set_media(res.key, *media)
            if msg.document and msg.document.file_id != res.document_file_id:
                await self.stores.results.set_document(res.key, msg.document.file_id)

    async def say(self, req: Request, text: str, markup: InlineKeyboardMarkup | None = None) -> Message:
        return await retrying(f"job {req.job_id}: sendMessage", lambda: self.bot.send_message(
            req.chat_id, text, reply_parameters=reply_to(req), reply_markup=markup))

    async def refuse(self, req: Request, refusal: Refusal) -> None:
        """Tell the user a request was not taken on, once, however many came at once."""
        text = t(req.lang, refusal.code, **refusal.values)
        if req.query_id is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.answer_callback_query(req.query_id, text, show_alert=True)
            return
        key = (req.chat_id, refusal.code)
        async with self._notice_locks.setdefault(key, asyncio.Lock()):
            now, notice = time.monotonic(), self._notices.get(key)
            if notice is not None and now - notice.at < NOTICE_WINDOW_S:
                notice.skipped += len(req.sources)
                notice.at = now
                if notice.editing is None and refusal.code not in FINAL:  # one edit says the count so far
                    delay = max(0.0, notice.edited_at + NOTICE_EDIT_EVERY_S - now)
                    then = NOT_TAKEN.get(refusal.code, "not_taken_later")
                    notice.editing = asyncio.create_task(self._count_in(req, text, then, notice, delay))
                return
            for old in [k for k, n in self._notices.items() if now - n.at >= NOTICE_WINDOW_S]:
                del self._notices[old]  # a chat's burst is over: forget its notice, and its lock if idle
                if old != key and not self._notice_locks[old].locked():
                    del self._notice_locks[old]
            with contextlib.suppress(TelegramError):
                msg = await self.say(req, text)
                self._notices[key] = _Notice(msg.message_id, len(req.sources), now, edited_at=now)

    async def _count_in(self, req: Request, text: str, then: str, notice: _Notice, delay: float) -> None:
        """Edit the notice, after ``delay``, with the number of photos not taken by then, and when to send them
        again (the sentence ``then``)."""
        await asyncio.sleep(delay)
        notice.editing, notice.edited_at = None, time.monotonic()
        with contextlib.suppress(TelegramError):  # deleted meanwhile: the first message said it
            await self.bot.edit_message_text(f"{text}\n{t(req.lang, then, count=notice.skipped)}", req.chat_id,
                                             notice.message_id)

    # --- the style menu and its previews ------------------------------------------------

    async def _style_markup(self, req: Request, offer_own: bool) -> tuple[InlineKeyboardMarkup, bool]:
        own = offer_own and await self.stores.users.last_photo(req.user_id) is not None
        return style_keyboard(self.styles, req.style, req.user_id, req.lang, own), own

    async def sheet(self, req: Request, sheet: CachedResult, missing: int) -> Message:
        """A preview sheet with the style menu under it (and, under the sample's, the offer to preview
        the user's own last photo); by its file_id once Telegram has it. The picture numbers its tiles;
        the caption names the numbers in the user's language."""
        sample = any(src.sample for src in req.sources)
        markup, _ = await self._style_markup(req, offer_own=sample)
        tiles = legend(self.styles, [n for n in self.styles.ordered if n in req.drawn_styles], req.lang)
        caption = t(req.lang, "preview_sample" if sample else "preview_own",
                    style=self.styles.display(req.style, req.lang)) + "\n" + t(req.lang, "sheet_legend", tiles=tiles)
        if missing:
            caption += "\n" + t(req.lang, "preview_missing", count=missing)
        spoiler = any(src.spoiler for src in req.sources)
        return await self._send_or_upload(req, sheet.media_file_id, sheet, lambda photo: self.bot.send_photo(
            req.chat_id, photo, caption=caption, reply_parameters=reply_to(req), reply_markup=markup,
            has_spoiler=spoiler))

    async def style_menu(self, req: Request) -> Message:
        """The style menu as text: each style with its description (no preview picture could be made)."""
        markup, own = await self._style_markup(req, offer_own=True)
        return await self.say(req, style_menu_text(self.styles, req.style, req.lang, own), markup)

    # --- one result ---------------------------------------------------------------

    def _caption(self, req: Request, done: Sequence[Drawn]) -> str | None:
        trimmed = any("trimmed" in d.notes for d in done)
        notes = ([t(req.lang, "fast_mode", style=self.styles.display(req.style, req.lang))] if req.fast else []) + \
            ([t(req.lang, "first_frame")] if any(d.animated for d in done) else []) + \
            ([t(req.lang, "clip_trimmed", seconds=self.offers.clip_s)] if trimmed else []) + \
            ([t(req.lang, "clip_silent")] if any("silent" in d.notes for d in done) else []) + \
            list(dict.fromkeys(note for d in done if (note := self._selfie_note(req, d))))
        return "\n".join(notes) or None

    def _selfie_note(self, req: Request, d: Drawn) -> str | None:
        """A face style on a photo whose faces are small (or absent): say it is made for selfies, and
        name a scene style to try instead."""
        if d.style not in self.styles.names or self.styles.entry(d.style).look != "face":
            return None
        share = d.result.face_share
        if share is None or share >= SELFIE_NOTE_SHARE:
            return None
        name = self.styles.display(d.style, req.lang)
        key = "selfie_no_face" if share == 0 else "selfie_only"
        scenes = [n for n in self.styles.ordered if self.styles.entry(n).look == "scene"]
        if not scenes:
            return t(req.lang, f"{key}_plain", style=name)
        scene = self.styles.default if self.styles.default in scenes else scenes[0]
        return t(req.lang, key, style=name, scene=self.styles.display(scene, req.lang))

    async def _button_id(self, req: Request, d: Drawn) -> str:
        return await self.buttons.id_for(ShownResult(req.chat_id, d.sha256, d.style, req.settings, d.source.spoiler))

    def _named_caption(self, req: Request, d: Drawn) -> str:
        """The caption of one style's result among several of one photo: the style's name, then its notes."""
        notes = self._caption(req, [d])
        return self.styles.display(d.style, req.lang) + (f"\n{notes}" if notes else "")

    async def _photo(self, req: Request, d: Drawn, shape: Shape) -> Message:
        s = req.settings
        # Telegram takes Mini App buttons in private chats only; the page shows whole drawings, not an avatar's square
        webapp = self.offers.webapp_url if req.chat_id > 0 and not s.avatar and not s.cut else None
        markup = result_keyboard(self.styles, d.style, await self._button_id(req, d), req.lang, webapp, self.offers.hd)
        # "All styles" with only one style drawn still says which style it is
        caption = self._named_caption(req, d) if shape == Shape.STYLES else self._caption(req, [d])
        return await self._send_or_upload(req, d.result.media_file_id, d.result, lambda photo: self.bot.send_photo(
            req.chat_id, photo, caption=caption, reply_parameters=reply_to(req), reply_markup=markup,
            has_spoiler=d.source.spoiler))

    async def _clip(self, req: Request, d: Drawn) -> Message:
        """A clip, sent back as what it came as: an animation (silent), a video, or a round video note
        (which takes no caption or buttons, so its notes and buttons follow as a message); an animated
        avatar, whatever it came as, as a silent animation."""
        caption = self._caption(req, [d])
        res = d.result
        replying = reply_to(req)
        markup = clip_keyboard(await self._button_id(req, d), req.lang)
        kind = "animation" if req.settings.avatar else d.kind
        if kind == "video_note":
            sent = await self._send_or_upload(req, res.media_file_id, res, lambda clip: self.bot.send_video_note(
                req.chat_id, clip, length=min(res.width, res.height), reply_parameters=replying))
            await self.say(req, caption or t(req.lang, "clip_buttons"), markup)
            return sent
        if kind == "animation":
            return await self._send_or_upload(req, res.media_file_id, res, lambda clip: self.bot.send_animation(
                req.chat_id, clip, width=res.width, height=res.height, caption=caption, has_spoiler=d.source.spoiler,
                filename=f"anime-{d.style}.mp4", reply_parameters=replying, reply_markup=markup))
        return await self._send_or_upload(req, res.media_file_id, res, lambda clip: self.bot.send_video(
            req.chat_id, clip, width=res.width, height=res.height, caption=caption, supports_streaming=True,
            has_spoiler=d.source.spoiler, filename=f"anime-{d.style}.mp4", reply_parameters=replying,
            reply_markup=markup))

    async def _large(self, req: Request, d: Drawn) -> list[tuple[Drawn, Message]]:
        """A big drawing (HD): as a photo too where it fits Telegram's photo limits, then the file; over
        what a bot may upload at all, one sentence instead (Full size still sends the drawing itself)."""
        size = d.result.path.stat().st_size
        if size > self.offers.upload_limit:
            await self.say(req, t(req.lang, "hd_too_big"))
            return []
        sent = []
        if size <= PHOTO_LIMIT and d.result.width + d.result.height <= PHOTO_SIDES:
            caption = self._caption(req, [d])
            sent.append((d, await self._send_or_upload(req, d.result.media_file_id, d.result, lambda photo: (
                self.bot.send_photo(req.chat_id, photo, caption=caption, reply_parameters=reply_to(req),
                                    has_spoiler=d.source.spoiler)))))
        return [*sent, (d, await self._document(req, d))]

    async def _document(self, req: Request, d: Drawn) -> Message:
        name = f"anime-{d.style}{d.result.path.suffix}"
        return await self._send_or_upload(req, d.result.document_file_id, d.result, lambda doc: self.bot.send_document(
            req.chat_id, doc, filename=name, reply_parameters=reply_to(req)))

    async def _album(self, req: Request, done: Sequence[Drawn], shape: Shape) -> list[tuple[Drawn, Message]]:
        """An album: of photos (the notes under the first), or of one photo in many styles (each
        captioned with its style's name, and its own notes)."""
        styles = shape == Shape.STYLES
        caption = self._caption(req, done)

        def caption_of(i: int, d: Drawn) -> str | None:
            if not styles:
                return caption if i == 0 else None
            return self._named_caption(req, d)

        async def photo(d: Drawn, by_reference: bool) -> str | bytes:
            if by_reference and d.result.media_file_id:
                return d.result.media_file_id
            return await asyncio.to_thread(d.result.path.read_bytes)

        async def media(by_reference: bool) -> list[InputMediaPhoto]:
            return [InputMediaPhoto(await photo(d, by_reference), caption=caption_of(i, d), has_spoiler=d.source.spoiler)
                    for i, d in enumerate(done)]

        what = f"job {req.job_id}: sendMediaGroup"
        items = await media(by_reference=True)
        try:
            msgs = await retrying(what, lambda: self.bot.send_media_group(req.chat_id, items,
                                                                          reply_parameters=reply_to(req)))
        except BadRequest:  # a remembered file_id Telegram no longer knows: upload them all
            items = await media(by_reference=False)
            msgs = await retrying(what, lambda: self.bot.send_media_group(req.chat_id, items,
                                                                          reply_parameters=reply_to(req)))
        ids = [await self._button_id(req, d) for d in done]
        if styles:
            labels = [self.styles.display(d.style, req.lang) for d in done]
            await self.say(req, t(req.lang, "styles_buttons"), album_keyboard(ids, req.lang, labels))
        else:
            await self.say(req, t(req.lang, "album_buttons"), album_keyboard(ids, req.lang))
        return list(zip(done, msgs))

    @staticmethod
    async def _send_or_upload(req: Request, file_id: str | None, res: CachedResult,
                              send: Callable[[str | bytes], Awaitable[Message]]) -> Message:
        """Send by the remembered file_id when there is one, uploading if Telegram forgot it."""
        what = f"job {req.job_id}: send"
        if file_id:
            try:
                return await retrying(what, lambda: send(file_id))
            except BadRequest as exc:
                log.info("job %s: %s's file_id refused (%s); uploading", req.job_id, res.key.split(":")[1], exc.message)
        data = await asyncio.to_thread(res.path.read_bytes)
        return await retrying(what, lambda: send(data))


def sent_as(msg: Message) -> tuple[str, str] | None:
    """The file id of what a message shows, and what Telegram took it as: a photo, a sticker or a clip (an
    animation, a video, a video note); None for a message with none of these (a file, a text)."""
    if msg.photo:
        return msg.photo[-1].file_id, "photo"
    for kind in ("sticker", "animation", "video", "video_note"):
        if (media := getattr(msg, kind)) is not None:
            return media.file_id, kind
    return None
