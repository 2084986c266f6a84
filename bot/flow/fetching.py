"""A request's photos fetched: each downloaded from Telegram once for all of its drawings, and read for what it is.

Only the bytes say what a file is: a GIF or a video sent as a file is a clip, a one-frame GIF a photo,
whatever the message called it; and a clip whose length the message did not give has it read from its
header. Downloads keep to the operator's limit and the Bot API's, and go through network trouble
(bot/flow/retry.py); what cannot be fetched is a :class:`~bot.flow.requests.Failed`. The Mini App fetches
a photo again through :class:`Downloads` too (bot/webapp/photos.py).
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
from dataclasses import replace
from pathlib import Path

from telegram import Bot, File
from telegram.error import BadRequest, NetworkError

from bot.flow.errand import Fetched
from bot.flow.requests import Failed, Request, Source
from bot.flow.retry import retrying
from bot.service.config import CLOUD_DOWNLOAD_MB
from bot.styles import Styles
from inference import clip_io
from inference.clips import is_clip
from storage.errors import AnimebotError

log = logging.getLogger("animebot.jobs")


class Downloads:
    """Telegram's files, fetched through the Bot API the bot talks to, up to ``limit`` bytes (the operator's
    ANIMEBOT_MAX_FILE_MB, within the Bot API's own 20 MB unless it is a server of the operator's own run with
    --local). A local server's getFile gives a path on a disk this bot shares, which is read in a thread."""

    def __init__(self, bot: Bot, limit: int) -> None:
        self.bot = bot
        self.limit = limit

    async def fetch(self, file_id: str, what: str, size: int | None = None) -> bytes:
        """A file's bytes (``size``: what the message said, when it did); network trouble is retried, and
        what cannot be fetched is a Failed. ``what`` names it in the log."""
        if size and size > self.limit:
            raise self._too_big(size)
        try:
            file = await retrying(f"{what}: getFile", lambda: self.bot.get_file(file_id))
            if file.file_size and file.file_size > self.limit:
                raise self._too_big(file.file_size)
            data = await self._bytes_of(file, what)
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                raise self._refused_as_too_big(what, size) from None
            log.warning("%s: getFile refused: %s", what, exc.message)
            raise Failed("download_failed") from None
        except NetworkError as exc:
            log.warning("%s: download failed: %s", what, exc.message)
            raise Failed("download_failed") from None
        if len(data) > self.limit:  # sizes given beforehand are optional: the bytes decide, for every pool
            raise self._too_big(len(data))
        return data

    async def _bytes_of(self, file: File, what: str) -> bytes:
        """The bytes behind a getFile: over HTTP from Telegram, or from the local server's disk."""
        path = self._on_disk(file.file_path or "")
        if path is None:
            return bytes(await retrying(f"{what}: download", file.download_as_bytearray))
        try:
            return await asyncio.to_thread(_read_within, path, self.limit)
        except OSError as exc:
            # The path holds the bot's token (the server keeps each bot's files under it): never logged.
            log.warning("%s: the Bot API server's file cannot be read here (%s); its data folder must be "
                        "mounted in the bot at the same path", what, exc.strerror or type(exc).__name__)
            raise Failed("download_failed") from None

    def _on_disk(self, file_path: str) -> Path | None:
        """Where a local server put the file: the absolute path its getFile gave. python-telegram-bot puts
        its file URL in front of a path it finds no file at, so that is taken off again; never a URL."""
        if not self.bot.local_mode:
            return None
        path = file_path.removeprefix(self.bot.base_file_url + "/")
        return Path(path) if os.path.isabs(path) else None

    def _too_big(self, size: int, limit: int | None = None) -> Failed:
        """The refusal, its size rounded up: a file a little over a 20 MB limit is "21 MB", never "20 MB"."""
        return Failed("file_too_big", size_mb=_megabytes(size), limit_mb=(limit or self.limit) >> 20)

    def _refused_as_too_big(self, what: str, size: int | None) -> Failed:
        """The Bot API's own "file is too big". Within our limit, the server is not in local mode (Telegram's
        own, or one run without --local): the user hears Telegram's 20 MB, and the operator why."""
        if size and size <= self.limit and self.bot.local_mode:
            log.warning("%s: the Bot API refused a %d MB file as too big, within ANIMEBOT_MAX_FILE_MB: "
                        "TELEGRAM_API_LOCAL=true needs a Bot API server run with --local", what, _megabytes(size))
            return self._too_big(size, CLOUD_DOWNLOAD_MB << 20)
        return self._too_big(size or self.limit)


class Fetcher:
    """The bytes of a request's photos, from Telegram (the registry's sample photo from the model store)."""

    def __init__(self, downloads: Downloads, styles: Styles) -> None:
        self.downloads = downloads
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
        return await self.downloads.fetch(src.file_id, f"job {req.job_id}", src.file_size)


def _megabytes(size: int) -> int:
    """A size in MB, rounded up: what the user and the log are told a file weighs."""
    return math.ceil(size / 2**20)


def _read_within(path: Path, limit: int) -> bytes:
    """A local file's bytes, at most ``limit`` + 1 of them: enough to tell one that grew past the limit."""
    with path.open("rb") as f:
        return f.read(limit + 1)


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
