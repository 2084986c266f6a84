"""Photos and clips in, requests out: which messages are images or clips, and which the bot was asked to draw.

In a private chat every photo or image file is drawn; in a group only one
captioned, or replied to, with ``/anime``. Albums are collected first
(bot/updates/albums.py) and taken on part by part, each part once.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass

from telegram import Message, User

from bot.chat.context import Incoming
from bot.chat.needs import Drawings
from bot.words.catalogue import t
from bot.flow.kinds.base import Kind
from bot.flow.kinds.registry import PHOTO, STICKER
from bot.flow.requests import Request, Source

log = logging.getLogger("animebot.handlers")

CLIP_SUFFIXES = (".mp4", ".mov", ".webm", ".mkv", ".m4v")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff", ".gif", ".heic", ".heif", ".hif", ".avif",
                  ".jfif")
# The command, whom it is addressed to, and the rest of its line: a style's id or its name ("Anime face").
ANIME_COMMAND = re.compile(r"^/anime(?:@(\w+))?(?=\s|$)(?:[ \t]+([^\n]*\S))?", re.IGNORECASE)
STICKER_COMMAND = re.compile(r"^/sticker(?:@(\w+))?(?=\s|$)(?:[ \t]+([^\n]*\S))?", re.IGNORECASE)


def source_of(message: Message) -> Source | None:
    """The picture or clip a message carries: its largest photo size, an animation, a video, a video
    note, or a document that may be an image or a clip.

    A document is refused here only when it says it is something else (a
    PDF, a song); one that names no type is fetched and its bytes decide.
    """
    album_part = message.message_id if message.media_group_id else None
    if message.photo:
        p = message.photo[-1]
        return Source(p.file_id, p.file_unique_id, p.file_size, message_id=album_part,
                      spoiler=bool(message.has_media_spoiler))
    clip = message.animation or message.video or message.video_note
    if clip is not None:
        kind = "animation" if message.animation else "video" if message.video else "video_note"
        return Source(clip.file_id, clip.file_unique_id, clip.file_size, message_id=album_part,
                      spoiler=bool(message.has_media_spoiler), kind=kind, seconds=_seconds(clip.duration))
    doc = message.document
    if doc is None:
        return None
    mime = doc.mime_type or "application/octet-stream"
    name = (doc.file_name or "").lower()
    if mime.startswith("video/") or name.endswith(CLIP_SUFFIXES):
        return Source(doc.file_id, doc.file_unique_id, doc.file_size, message_id=album_part, kind="video")
    if mime == "image/gif" or name.endswith(".gif"):  # a clip, unless its bytes hold one frame
        return Source(doc.file_id, doc.file_unique_id, doc.file_size, message_id=album_part, kind="animation")
    if mime.startswith("image/") or mime == "application/octet-stream" or name.endswith(IMAGE_SUFFIXES):
        return Source(doc.file_id, doc.file_unique_id, doc.file_size, message_id=album_part)
    return None


def _seconds(duration: object) -> float | None:
    """Telegram's duration of a clip (whole seconds, or a timedelta), None when it did not say."""
    if isinstance(duration, dt.timedelta):
        return duration.total_seconds() or None
    return float(duration) if isinstance(duration, (int, float)) and duration > 0 else None


def anime_command(text: str | None, bot_username: str | None, command: re.Pattern[str] = ANIME_COMMAND
                  ) -> tuple[bool, str | None]:
    """Whether ``text`` is ``/anime`` (or ``command``) addressed to us, and the style it names, if any."""
    m = command.match(text or "")
    if not m or (m.group(1) and (bot_username or "").lower() != m.group(1).lower()):
        return False, None
    return True, m.group(2)


async def anime(incoming: Incoming, drawings: Drawings) -> None:
    """``/anime [style]`` as a reply to a photo, in a group or a private chat."""
    message = incoming.message
    asked, style_arg = anime_command(message.text, incoming.bot.username)
    if not asked:
        return  # /anime@SomeOtherBot
    target = message.reply_to_message
    if target is None or (src := source_of(target)) is None:
        await message.reply_text(t(incoming.lang, "anime_needs_photo"), do_quote=True)
        return
    await convert(incoming, drawings, [src], target.message_id, style_arg)


async def sticker(incoming: Incoming, drawings: Drawings) -> None:
    """``/sticker [style]`` as a reply to a photo or clip: its person as a sticker, into the user's own set,
    as the Sticker button under a result makes one. In a group, only of a photo the user sent: a sticker
    of someone else's would go into the asker's public set, out of reach of that person's /forget."""
    message = incoming.message
    asked, style_arg = anime_command(message.text, incoming.bot.username, STICKER_COMMAND)
    if not asked:
        return
    target = message.reply_to_message
    if target is None or (src := source_of(target)) is None:
        await message.reply_text(t(incoming.lang, "sticker_needs_photo"), do_quote=True)
        return
    sender = target.from_user.id if target.from_user is not None else None
    if incoming.chat.type != "private" and sender != incoming.user.id:
        await message.reply_text(t(incoming.lang, "sticker_own_photo"), do_quote=True)
        return
    await request(drawings, Asking.of(incoming), [src], target.message_id, style_arg, kind=STICKER)


async def private_media(incoming: Incoming, drawings: Drawings) -> None:
    """Any photo or file in a private chat: convert it, or say why not."""
    message = incoming.message
    if message.media_group_id:
        await drawings.albums.add(message)
        return
    src = source_of(message)
    if src is None:
        await message.reply_text(t(incoming.lang, "not_an_image_file"), do_quote=True)
        return
    _, style = anime_command(message.caption, incoming.bot.username)
    await convert(incoming, drawings, [src], message.message_id, style)


async def group_media(incoming: Incoming, drawings: Drawings) -> None:
    """A photo in a group: converted only when its caption is ``/anime`` for us."""
    message = incoming.message
    if message.media_group_id:
        await drawings.albums.add(message)  # the album decides once it is complete
        return
    asked, style = anime_command(message.caption, incoming.bot.username)
    src = source_of(message)
    if asked and src is not None:
        await convert(incoming, drawings, [src], message.message_id, style)


async def on_album(drawings: Drawings, messages: list[Message]) -> None:
    """The album collector's callback: answer the album's parts that came together as one request.

    Telegram may deliver an album's parts seconds apart, so one album can
    come in several batches; each part is taken on once (the journal keeps
    which), and a group album asked for by the caption of one part has its
    later parts drawn too, in the same style.
    """
    group = messages[0].media_group_id
    assert group is not None
    taken, album_style = await drawings.runner.album_taken(messages[0].chat_id, group)
    fresh = [m for m in messages if m.message_id not in taken]
    if not fresh:
        log.info("album %s: every part already taken on; its updates came again", group)
        return
    first = fresh[0]
    asks = [anime_command(m.caption, first.get_bot().username) for m in fresh]
    if first.chat.type != "private" and not taken and not any(asked for asked, _ in asks):
        return  # a group album nobody asked about
    style_arg = next((s for asked, s in asks if asked and s), None) or album_style
    # An album's clips are left out (an album comes back as an album of pictures), and said so.
    found = [s for s in (source_of(m) for m in fresh) if s is not None]
    sources = [s for s in found if not s.clip]
    lang = await drawings.choices.lang(first.from_user)
    if len(sources) < len(found):
        await first.reply_text(t(lang, "album_clips"), do_quote=True)
    if not sources:
        if not found:
            await first.reply_text(t(lang, "not_an_image_file"), do_quote=True)
        return
    asking = Asking(f"album-{group}-{first.message_id}", first, first.from_user, lang)
    await request(drawings, asking, sources, first.message_id, style_arg, album=group)


async def convert(incoming: Incoming, drawings: Drawings, sources: list[Source], reply_to: int, style_arg: str | None
                  ) -> None:
    await request(drawings, Asking.of(incoming), sources, reply_to, style_arg)


@dataclass(frozen=True)
class Asking:
    """Who asks for a drawing, and where: the message (its chat; a refusal goes under it), its sender, their
    language, and the id the job gets (the update's; an album's, for all of its parts)."""

    job_id: str
    message: Message
    user: User | None
    lang: str

    @classmethod
    def of(cls, incoming: Incoming) -> Asking:
        return cls(str(incoming.update_id), incoming.message, incoming.user, incoming.lang)


async def request(drawings: Drawings, asking: Asking, sources: list[Source], reply_to: int, style_arg: str | None,
                  album: str | None = None, kind: Kind = PHOTO) -> None:
    """Hand ``sources`` to the runner as a ``kind`` of job (bot/flow/kinds/), in the asked (or the user's)
    style, at the chat's settings; the results go under ``reply_to``, and every word to the user is in the
    asker's language.

    What follows ``/anime`` names a style when the whole of it, or its first word, is a style's id or
    name in any language ("/anime Anime face", "/anime hayao please"). One unknown word is answered
    (under ``message``) with the styles there are; a longer text is a caption's prose, not a style
    ("/anime my cat"), and gets the user's style.
    """
    message, user, lang = asking.message, asking.user, asking.lang
    choices, styles = drawings.choices, drawings.choices.styles
    style = (styles.resolve(style_arg) or styles.resolve(style_arg.split()[0])) if style_arg else None
    if style_arg and style is None and len(style_arg.split()) == 1:
        await message.reply_text(t(lang, "unknown_style", style=style_arg[:32], styles=styles.listed(lang)),
                                 do_quote=True)
        return
    style = style or await choices.style(user)
    settings = await choices.settings(message.chat_id)
    await drawings.runner.run(Request(
        job_id=asking.job_id, chat_id=message.chat_id, user_id=user.id if user else 0, reply_to=reply_to, lang=lang,
        style=style, sources=tuple(sources), settings=settings, kind=kind.name, album=album,
    ))
