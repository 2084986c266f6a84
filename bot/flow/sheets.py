"""A preview sheet got for a /style request and sent: the cached one, or one composed from the
tiles just drawn (bot/flow/previews.py says what a sheet is: its settings, layout and key).

It lives apart from previews.py because it asks :class:`~bot.flow.results.Results` for the
photo and the cached tiles, while results asks previews.py for a sheet's key: kept in one module,
the two imported each other.
"""
from __future__ import annotations

import asyncio

from telegram import Message

from bot.chat.replies import Drawn, Replies
from bot.flow.previews import SHEET_STYLE, compose, sheet_key_of, tile_label
from bot.flow.requests import Failed, Request
from bot.flow.results import Fetched, Results
from bot.styles import Styles
from storage.cache import Cache, CachedResult


class Sheets:
    """Preview sheets: the cached one for a request, or one composed from its tiles and sent."""

    def __init__(self, cache: Cache, styles: Styles, replies: Replies, results: Results) -> None:
        self.cache = cache
        self.styles = styles
        self.replies = replies
        self.results = results

    async def cached(self, req: Request) -> CachedResult | None:
        sha = await self.results.known_sha(req.sources[0])
        return await self.results.known(sheet_key_of(self.styles, req, sha)) if sha else None

    async def send(self, req: Request, sheet: CachedResult | None, done: list[Drawn], failed: list[Failed],
                   fetched: Fetched) -> list[tuple[Drawn, Message]]:
        """Send the preview sheet: cached, or composed from the tiles just got (the original photo
        first). Styles that failed are left out and said so; such a sheet is not kept for next time.
        With no tile at all: the menu as text (the sample's), or why not (the user's photo)."""
        src = req.sources[0]
        if sheet is None:
            if not done:
                if not req.units:
                    await self.replies.style_menu(req)
                elif failed:
                    await self.replies.say(req, failed[0].text(req.lang))
                return []
            try:
                original = [("Photo", await self.results.data(req, src, fetched))]
            except Failed:  # the tiles came from the cache and the photo cannot be fetched now: tiles only
                original = []
            tiles = [(tile_label(self.styles, d.style), d.result.path) for d in done]
            data, w, h = await asyncio.to_thread(
                lambda: compose(original + [(label, path.read_bytes()) for label, path in tiles]))
            key = sheet_key_of(self.styles, req, done[0].sha256) + ("~partial" if failed else "")
            sheet = await self.cache.put(key, done[0].sha256, SHEET_STYLE, data, w, h)
        if not src.sample:  # a sheet of the user's photo holds a small copy of it: theirs, for /forget
            await self.cache.hold(req.user_id, sheet.key.split(":", 1)[0], sheet.key)
        message = await self.replies.sheet(req, sheet, missing=len(failed))
        return [(Drawn(src, sheet.key.split(":", 1)[0], SHEET_STYLE, sheet, from_cache=not done), message)]
