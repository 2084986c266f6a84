"""HD: a result doubled by Real-CUGAN 2x, an anime super-resolution net (inference/upscale.py).

The result is got as any redraw is (from the cache, or drawn again at its
settings), then its very file is doubled on a worker, so that HD is that
picture, sharper, never a new drawing. It costs one photo of the quota, none
when the HD is cached. It is sent as the file, and as a photo too where it
fits Telegram's photo limits (bot/chat/replies.py).
"""
from __future__ import annotations

from bot.flow.answering import Shape
from bot.flow.drawn import Drawn
from bot.flow.errand import Errand
from bot.flow.kinds.base import Drawing, Kind, Work
from bot.flow.requests import Failed, Source

HD_REVISION = 1  # raise when a change to the doubling changes its bytes (a new cache key)


class HD(Kind):
    name = "hd"
    shape = Shape.LARGE
    lite = False  # the drawing it doubles is the one the user has, in its own style
    waiting_words = "hd_making"  # not "Drawing…": the picture is drawn already
    # Doubling costs about twice drawing at the same size (docs/benchmarks.md, "HD"), and a result drawn with a
    # large ANIMEBOT_MAX_SIDE took most of the job timeout: four of them.
    work = Work("double", allowance=4)

    async def draw(self, drawing: Drawing, errand: Errand, src: Source, style: str) -> Drawn:
        base = await drawing.result(errand, src, style)
        if base.source.clip:
            raise Failed("hd_no_clip")
        return await drawing.further(errand, base, self.work)

    def version(self, version: str) -> str:
        return f"{version}|hd2x-r{HD_REVISION}"
