"""A request's photos fetched: each downloaded from Telegram once for all of its drawings, and read for what it is.

Only the bytes say what a file is: a GIF or a video sent as a file is a clip, a one-frame GIF a photo,
whatever the message called it; and a clip whose length the message did not give has it read from its
header. Downloads keep to the Bot API's 20 MB and go through network trouble (bot/flow/retry.py);
what cannot be fetched is a :class:`~bot.flow.requests.Failed`. The Mini App fetches a photo again
with :func:`download` too (bot/webapp/photos.py).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from telegram import Bot
from telegram.error import BadRequest, NetworkError

from bot.flow.errand import Fetched
from bot.flow.requests import Failed, Request, Source
from bot.flow.retry import retrying
from bot.styles import Styles
from inference import clip_io
from inference.clips import is_clip
from storage.errors import AnimebotError

log = logging.getLogger("animebot.jobs")

DOWNLOAD_LIMIT = 20 * 1024 * 1024  # the Bot API's getFile limit


class Fetcher:
    """The bytes of a request's photos, from Telegram (the registry's sample photo from the model store)."""

    def __init__(self, bot: Bot, styles: Styles) -> None:
        self.bot = bot
        self.styles = styles

    async def data(self, req: Request, src: Source, fetched: Fetched) -> bytes:
        """The photo's bytes, downloaded once for all of a request's drawings of it."""
        if src not in fetched:
            fetched[src] = asyncio.ensure_future(self._download(req, src))
        return await fetched[src]

    async def _download(self, req: Request, src: Source) -> bytes:
        """The photo's bytes; network trouble is retried, and what cannot be fetched is a Failed."""
        if src.sample:  # the registry's sample photo, from the model store
            if self.styles.sample is None:
                raise Failed("internal")
            return await asyncio.to_thread(self.styles.sample.read_bytes)
        return await download(self.bot, src.file_id, f"job {req.job_id}", src.file_size)


async def download(bot: Bot, file_id: str, what: str, size: int | None = None) -> bytes:
    """A file's bytes from Telegram, within the Bot API's 20 MB (``size``: what the message said, when it
    did); network trouble is retried, and what cannot be fetched is a Failed. ``what`` names it in the log."""
    if size and size > DOWNLOAD_LIMIT:
        raise Failed("file_too_big", size_mb=size / 2**20)
    try:
        file = await retrying(f"{what}: getFile", lambda: bot.get_file(file_id))
        if file.file_size and file.file_size > DOWNLOAD_LIMIT:
            raise Failed("file_too_big", size_mb=file.file_size / 2**20)
        data = bytes(await retrying(f"{what}: download", file.download_as_bytearray))
    except BadRequest as exc:
        if "too big" in exc.message.lower():
            raise Failed("file_too_big", size_mb=(size or DOWNLOAD_LIMIT) / 2**20) from None
        log.warning("%s: getFile refused: %s", what, exc.message)
        raise Failed("download_failed") from None
    except NetworkError as exc:
        log.warning("%s: download failed: %s", what, exc.message)
        raise Failed("download_failed") from None
    if len(data) > DOWNLOAD_LIMIT:  # sizes given beforehand are optional: the bytes decide, for every pool
        raise Failed("file_too_big", size_mb=len(data) / 2**20)
    return data


def kind_of(src: Source, data: bytes) -> str:
    """What a downloaded file is: a still picture, or a clip (sent back as a video, or as a silent
    animation if it came as a GIF); Telegram's own clips keep the kind Telegram gave them."""
    if src.kind in ("video", "video_note"):
        return src.kind
    if not is_clip(data):
        return "photo"
    return "animation" if src.kind == "animation" or data[:3] == b"GIF" else "video"


async def measured(src: Source, data: bytes, cap: float) -> Source:
    """A clip whose length Telegram did not give (one sent as a file), with the length its header gives,
    at most ``cap`` seconds (all of ``cap`` when the header says none); a header that cannot be read is a
    :class:`Failed`."""
    try:
        info = await asyncio.to_thread(clip_io.probe, data)
    except AnimebotError as exc:
        raise Failed(exc.code, exc.message, **exc.values) from None
    return replace(src, seconds=min(info.seconds, cap) if info.seconds > 0 else cap)
