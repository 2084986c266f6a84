"""A preview sheet got for a /style request: the cached one, or one composed from the tiles just drawn
(bot/flow/previews.py says what a sheet is: its settings, layout and key).

It lives apart from previews.py because it asks :class:`~bot.flow.results.Results` for the
photo and the cached tiles, while results asks previews.py for a sheet's key: kept in one module,
the two imported each other.
"""
from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bot.flow.drawn import Drawn
from bot.flow.previews import SHEET_STYLE, compose, sheet_key_of, tile_label
from bot.flow.requests import Failed, Request
from bot.flow.errand import Fetched
from bot.flow.results import Results
from bot.styles import Styles
from storage.cache import CachedResult, ResultFile
from storage.stores import Stores


class Sheets:
    """Preview sheets: the cached one for a request, or one composed from its tiles and kept."""

    def __init__(self, stores: Stores, styles: Styles, results: Results) -> None:
        self.stores = stores
        self.styles = styles
        self.results = results

    async def cached(self, req: Request) -> Drawn | None:
        sha = await self.results.known_sha(req.sources[0])
        sheet = await self.results.known(sheet_key_of(self.styles, req, sha)) if sha else None
        return await self._held(req, sheet, from_cache=True) if sheet is not None else None

    async def composed(self, req: Request, done: Sequence[Drawn], failed: Sequence[Failed],
                       fetched: Fetched) -> Drawn | None:
        """The sheet of the tiles got (the original photo first), cached; styles that failed are left
        out, and such a sheet is not kept for next time. None without a tile."""
        if not done:
            return None
        try:
            original = [("", await self.results.fetcher.data(req, req.sources[0], fetched))]
        except Failed:  # the tiles came from the cache and the photo cannot be fetched now: tiles only
            original = []
        tiles = [(tile_label(self.styles, d.style), d.result.path) for d in done]
        data, w, h = await asyncio.to_thread(
            lambda: compose(original + [(label, path.read_bytes()) for label, path in tiles]))
        key = sheet_key_of(self.styles, req, done[0].sha256) + ("~partial" if failed else "")
        sheet = await self.stores.results.put(key, done[0].sha256, SHEET_STYLE, ResultFile(data, w, h))
        return await self._held(req, sheet, from_cache=False)

    async def _held(self, req: Request, sheet: CachedResult, from_cache: bool) -> Drawn:
        src = req.sources[0]
        if not src.sample:  # a sheet of the user's photo holds a small copy of it: theirs, for /forget
            await self.stores.holdings.hold(req.user_id, sheet.key.split(":", 1)[0], sheet.key)
        return Drawn(src, sheet.key.split(":", 1)[0], SHEET_STYLE, sheet, from_cache=from_cache)
