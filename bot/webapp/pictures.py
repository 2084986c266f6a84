"""Which file each picture of a result is, and the list's thumbnails.

A result (what the page calls one: a drawing shown in the user's chat) has
several pictures: ``image`` (the drawing), ``thumb`` (a small square of it for
the list), ``photo`` (the "before", bot/webapp/photos.py), ``base`` (the same
drawing at full strength without keep colours, which the page's preview blends
from), ``hd`` (the drawing doubled by Real-CUGAN, once the page has asked for it:
bot/flow/kinds/hd.py) and ``s.STYLE`` (the photo small in another style, as
/style's sheet draws it). Each is a cached result of its own; none is drawn here.
"""
from __future__ import annotations

import asyncio
import io
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps

from bot.flow.keys import picture_key
from bot.flow.kinds.registry import DOUBLED
from bot.flow.previews import PREVIEW_SETTINGS
from bot.styles import Styles
from bot.webapp.photos import Originals
from inference.pipeline import ConvertSettings
from storage.buttons import ShownResult
from storage.cache import CachedResult, ResultCache

THUMB_SIDE = 240  # a list tile is a third of a phone's width, at twice its pixels
THUMBS_KEPT = 512  # about 10 KB each


def drawing_key(styles: Styles, shown: ShownResult[ConvertSettings], **change: Any) -> str:
    """The cache key of the drawing a result's buttons name, with ``change`` made to its settings."""
    return picture_key(styles, shown.content_sha256, shown.style, replace(shown.settings, **change))


def tile_key(styles: Styles, content_sha256: str, style: str) -> str:
    """The cache key of a photo's small drawing in ``style``: a tile of /style's sheet, and of the page's styles."""
    return picture_key(styles, content_sha256, style, PREVIEW_SETTINGS)


def hd_key(styles: Styles, shown: ShownResult[ConvertSettings]) -> str:
    """The cache key of a result's HD."""
    return picture_key(styles, shown.content_sha256, shown.style, shown.settings, DOUBLED)


class Pictures:
    def __init__(self, cache: ResultCache, styles: Styles, originals: Originals) -> None:
        self.cache = cache
        self.styles = styles
        self.originals = originals
        self.thumbnails = Thumbnails()

    async def of(self, user_id: int, shown: ShownResult[ConvertSettings], variant: str) -> CachedResult | None:
        """The file of one picture of ``shown``; None when it is not cached (or the photo not fetched)."""
        if variant in ("image", "thumb"):
            return await self.cache.get(drawing_key(self.styles, shown))
        if variant == "base":
            return await self.cache.get(drawing_key(self.styles, shown, strength=100, keep_colours=False))
        if variant == "hd":
            return await self.cache.get(hd_key(self.styles, shown))
        if variant.startswith("s.") and (style := variant[2:]) in self.styles.names:
            return await self.cache.get(tile_key(self.styles, shown.content_sha256, style))
        if variant == "photo" and (drawn := await self.cache.peek([drawing_key(self.styles, shown)])):
            size = next(iter(drawn.values()))
            return await self.originals.photo(user_id, shown.content_sha256, size.width, size.height)
        return None


class Thumbnails:
    """The list's small pictures: a phone on mobile data should not fetch 24 drawings of 130 KB for a grid of
    tiles a third of its width. Made from the drawing when asked, kept for the last :data:`THUMBS_KEPT`."""

    def __init__(self) -> None:
        self._made: OrderedDict[Path, bytes] = OrderedDict()

    async def of(self, path: Path) -> bytes:
        if (made := self._made.get(path)) is not None:
            self._made.move_to_end(path)
            return made
        made = self._made[path] = await asyncio.to_thread(_thumbnail, path)
        while len(self._made) > THUMBS_KEPT:
            self._made.popitem(last=False)
        return made


def _thumbnail(path: Path) -> bytes:
    with Image.open(path) as drawing:
        drawing.draft("RGB", (THUMB_SIDE * 2, THUMB_SIDE * 2))  # a JPEG decoded at a fraction of its size
        small = ImageOps.fit(drawing.convert("RGB"), (THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.save(out, "JPEG", quality=85)
    return out.getvalue()
