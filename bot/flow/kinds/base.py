"""What every kind of job shares: the planner's questions, with the answers most kinds give.

A planner is asked, for one request: which drawings it needs
(:meth:`Kind.items`), what it costs against the quota and the waiting limit,
whether it may be cut short, and, once drawn, what its :class:`Answer` is.
It never sends anything: a way of answering does (bot/flow/answering.py).
The :class:`Bench` is what the runner lends a planner to do that: the
limits to name in a sentence, and the preview sheets.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from bot.flow.access import Refusal
from bot.flow.answering import Answer, Shape
from bot.flow.drawn import Drawn
from bot.flow.errand import Errand
from bot.flow.requests import Failed, Request, Source
from bot.words.catalogue import t
from inference.drawer import Operation
from inference.pipeline import ConvertSettings


@dataclass(frozen=True)
class Work:
    """What a kind asks a worker to do with a drawing's file, beyond drawing it (HD: double it)."""

    operation: Operation  # what the worker does (inference/drawer.py, ``Drawer.draw``)
    allowance: float  # how many job timeouts it may take (bot/drawing/pool.py, ``time_limit``)


class Drawing(Protocol):
    """What the flow's results (bot/flow/results.py) do for a planner."""

    async def result(self, errand: Errand, src: Source, style: str) -> Drawn:
        """The photo drawn in the style: from the cache, from the same drawing under way, or drawn."""

    async def further(self, errand: Errand, base: Drawn, work: Work) -> Drawn:
        """``work`` done on a drawing's file: from the cache, from the same work under way, or on a worker."""


class Bench(Protocol):
    """What the runner lends the planners."""

    @property
    def per_user_limit(self) -> int:
        """Photos one user may have waiting."""

    @property
    def per_day(self) -> int:
        """Photos one user may have drawn a day (0: no quota)."""

    async def cached_sheet(self, req: Request) -> Drawn | None:
        """The preview sheet this request asks for, if one is cached."""

    async def compose_sheet(self, req: Request, done: Sequence[Drawn], failed: Sequence[Failed]) -> Drawn | None:
        """The preview sheet made of the tiles got, kept in the cache; None without tiles."""


class Kind:
    """The planner's questions, answered as for a photo drawn and shown as itself; each kind (a module
    of this folder) changes the answers where it differs."""

    name: ClassVar[str]
    shape: ClassVar[Shape] = Shape.PICTURES
    lite: ClassVar[bool] = True  # a long queue may draw it in the style's lite version instead
    divisible: ClassVar[bool] = True  # over a limit, its first drawings are drawn and the rest left out
    keeps_photo: ClassVar[bool] = True  # its photo becomes the user's last, which /style previews
    stills_only: ClassVar[bool] = False  # a clip is refused, not drawn
    sheet: ClassVar[bool] = False  # its tiles make a preview sheet: once that is cached, nothing needs drawing
    waiting_words: ClassVar[str | None] = None  # what its status says, in queue or drawing, if not the photos' count
    in_styles: ClassVar[bool] = False  # its drawings are one photo's styles: a partial answer counts styles

    async def draw(self, drawing: Drawing, errand: Errand, src: Source, style: str) -> Drawn:
        """One of its drawings (:meth:`items`), got."""
        return await drawing.result(errand, src, style)

    def version(self, version: str) -> str:
        """The cache version of its result, from the drawing's (what else makes its bytes)."""
        return version

    def settings(self, base: ConvertSettings) -> ConvertSettings:
        """The settings it is drawn at, made from the result's or the chat's (a preset for some kinds). The
        flow applies it as it takes a request on (bot/flow/runner.py), so a preset is never the caller's."""
        return base

    def aim(self, style: str, album: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
        """The style a press on a result in ``style`` draws, and the styles it draws in beside (``album``:
        the styles an album of this result would hold, as the chat lays them out). Most kinds: that style."""
        return style, ()

    def items(self, req: Request) -> list[tuple[Source, str]]:
        """Every drawing the request asks for: each photo in each style (never both more than one)."""
        return req.items

    def units(self, req: Request) -> int:
        """What it counts as against the rate limit and the daily quota: a photo per drawing, a clip
        one per second (:attr:`Source.units`)."""
        return sum(src.units for src, _ in self.items(req))

    def weighed(self, req: Request, needs: Sequence[bool]) -> int:
        """What it counts against the quota and the waiting limit, ``needs`` saying which drawings must
        be drawn (the rest are cached or under way)."""
        return sum(src.units for (src, _), need in zip(self.items(req), needs) if need)

    def drawn(self, req: Request, done: Sequence[Drawn]) -> int:
        """The photos of the quota its answer used: what was drawn for it, not got from the cache."""
        return sum(d.units for d in done if not d.from_cache)

    def refused(self, req: Request, refusal: Refusal) -> Answer | None:
        """What to show instead of the refusal's sentence, if anything."""
        return None

    async def ready(self, req: Request, bench: Bench) -> Answer | None:
        """An answer that needs no drawing at all (a cached sheet), looked for before any."""
        return None

    async def answer(self, req: Request, done: Sequence[Drawn], failed: Sequence[Failed], bench: Bench) -> Answer:
        """The answer once every drawing was got or failed."""
        return Answer(self.shape, done, self.sentences(req, failed, bench))

    def sentences(self, req: Request, failed: Sequence[Failed], bench: Bench) -> list[str]:
        """What is said after the results: why a drawing failed, and what was left out."""
        said = []
        count = len(self.items(req))
        if failed and count == 1:
            said.append(failed[0].text(req.lang))
        elif failed:
            partial = "styles_partial" if self.in_styles else "album_partial"
            said.append(t(req.lang, partial, failed=len(failed), count=count, reason=failed[0].text(req.lang)))
        if req.left_out:
            said.append(self.left_out(req, bench))
        return said

    def left_out(self, req: Request, bench: Bench) -> str:
        taken, count = len(self.items(req)), len(self.items(req)) + req.left_out
        styles = self.in_styles  # "All styles" cut short: say it in styles, not photos
        if req.left_out_why == "limit":
            return t(req.lang, "styles_limit_partial" if styles else "limit_partial", taken=taken, count=count,
                     left_out=req.left_out, limit=bench.per_user_limit)
        if req.left_out_why == "busy":
            return t(req.lang, "styles_busy_partial" if styles else "busy_partial", taken=taken, count=count,
                     left_out=req.left_out)
        if styles:
            return t(req.lang, "styles_quota_partial", left_out=req.left_out, count=count, limit=bench.per_day)
        return t(req.lang, "quota_partial", left_out=req.left_out, count=bench.per_day)
