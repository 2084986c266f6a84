"""A preview sheet (/style): one photo drawn small in every style, answered as one labelled picture.

It costs one photo of the quota and of the waiting limit however many styles it
shows (its tiles are small), and none for the registry's sample, which is the
bot's own. It is all or nothing: a sheet missing styles for want of room would
not help anyone choose. A sheet already made is sent without drawing anything.
"""
from __future__ import annotations

from collections.abc import Sequence

from bot.flow.access import Refusal
from bot.flow.answering import Answer, Shape
from bot.flow.drawn import Drawn
from bot.flow.kinds.base import Bench, Kind
from bot.flow.requests import Failed, Request


class Preview(Kind):
    name = "preview"
    shape = Shape.SHEET
    lite = False
    divisible = False
    keeps_photo = False  # previewing styles on a photo does not make it the one to preview next
    stills_only = True
    sheet = True
    waiting_words = "preview_drawing"

    def units(self, req: Request) -> int:
        return 0 if any(src.sample for src in req.sources) else 1

    def weighed(self, req: Request, needs: Sequence[bool]) -> int:
        return int(any(needs))

    def drawn(self, req: Request, done: Sequence[Drawn]) -> int:
        return min(super().drawn(req, done), self.units(req))

    def refused(self, req: Request, refusal: Refusal) -> Answer | None:
        """The sample's previews cannot be drawn now: the menu as text instead."""
        return None if self.units(req) else Answer(Shape.MENU)

    async def ready(self, req: Request, bench: Bench) -> Answer | None:
        sheet = await bench.cached_sheet(req)
        return Answer(Shape.SHEET, sheet=sheet) if sheet is not None else None

    async def answer(self, req: Request, done: Sequence[Drawn], failed: Sequence[Failed], bench: Bench) -> Answer:
        """The sheet of the tiles got (the original photo first), missing the styles that failed; with no
        tile at all, the menu as text (the sample's) or why not (the user's photo)."""
        sheet = await bench.compose_sheet(req, done, failed)
        if sheet is not None:
            return Answer(Shape.SHEET, sheet=sheet, missing=len(failed))
        if not self.units(req):
            return Answer(Shape.MENU)
        return Answer(Shape.SHEET, sentences=[failed[0].text(req.lang)] if failed else [])


class Tiles(Preview):
    """The Mini App's previews: the same tiles, each kept for the page, which shows them one by one."""

    name = "tiles"
    shape = Shape.TILES

    async def ready(self, req: Request, bench: Bench) -> Answer | None:
        return None

    async def answer(self, req: Request, done: Sequence[Drawn], failed: Sequence[Failed], bench: Bench) -> Answer:
        return Answer(Shape.TILES, done)
