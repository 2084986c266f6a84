"""The "before" of the Mini App's before-and-after: the user's photo, at exactly its drawing's size.

The bot keeps no photos, only Telegram's ``file_id`` to fetch one again
(storage/cache.py). The page compares and blends the photo and the drawing
pixel by pixel, so the photo is fetched once, turned upright and scaled to
the drawing's width and height, and kept as a result of its own (style
:data:`PHOTO_STYLE`), held by the user: the size cap, the retention sweep
and ``/forget`` treat it like any other picture of theirs.
"""
from __future__ import annotations

import asyncio
import io
import logging

from PIL import Image
from telegram.error import TelegramError

from storage.errors import AnimebotError
from bot.flow.requests import Failed
from bot.flow.fetching import Downloads
from inference.imageio import decode
from storage.cache import CachedResult, ResultFile, result_key
from storage.stores import Stores

log = logging.getLogger("animebot.webapp")

PHOTO_STYLE = "@photo"  # no style's name can hold an "@"
JPEG_QUALITY = 95  # the page blends it with the drawing pixel by pixel: kept close to what the worker saw


class Originals:
    def __init__(self, downloads: Downloads, stores: Stores) -> None:
        self.downloads = downloads
        self.stores = stores
        self._making: dict[str, asyncio.Task[CachedResult | None]] = {}  # asked for twice at once: fetched once

    async def photo(self, user_id: int, content_sha256: str, width: int, height: int) -> CachedResult | None:
        """The photo of this hash at ``width`` x ``height``; None when Telegram no longer gives it."""
        key = result_key(content_sha256, PHOTO_STYLE, f"{width}x{height}q{JPEG_QUALITY}")
        if (hit := await self.stores.results.get(key)) is not None:
            await self.stores.holdings.hold(user_id, content_sha256, key)
            return hit
        making = self._making.get(key)
        if making is None:
            making = self._making[key] = asyncio.ensure_future(self._make(key, content_sha256, width, height))
            making.add_done_callback(lambda _: self._making.pop(key, None))
        result = await asyncio.shield(making)
        if result is not None:
            await self.stores.holdings.hold(user_id, content_sha256, key)
        return result

    async def _make(self, key: str, content_sha256: str, width: int, height: int) -> CachedResult | None:
        data = await self._fetch(content_sha256)
        if data is None:
            return None
        try:
            scaled = await asyncio.to_thread(_scaled, data, width, height)
        except AnimebotError as exc:  # it was drawn, so it decoded once; a decoder changed since, say
            log.warning("photo %s… cannot be shown again: %s", content_sha256[:12], exc)
            return None
        return await self.stores.results.put(key, content_sha256, PHOTO_STYLE, ResultFile(scaled, width, height))

    async def _fetch(self, content_sha256: str) -> bytes | None:
        file_id = await self.stores.uploads.file_id_of(content_sha256)
        if file_id is None:
            return None
        try:
            return await self.downloads.fetch(file_id, f"photo {content_sha256[:12]}… for the Mini App")
        except (Failed, TelegramError) as exc:  # fetch() logged why, or Telegram refused outright
            log.info("photo %s… not fetched again (%s)", content_sha256[:12], exc.__class__.__name__)
            return None


def _scaled(data: bytes, width: int, height: int) -> bytes:
    photo = decode(data, at_least=max(width, height))
    out = io.BytesIO()
    photo.resize((width, height), Image.Resampling.LANCZOS).save(out, "JPEG", quality=JPEG_QUALITY)
    return out.getvalue()
