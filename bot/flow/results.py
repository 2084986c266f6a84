"""One photo's result in one style: from the cache, from the same drawing under way, or drawn.

Drawn means: downloaded once for all of a request's styles (bot/flow/fetching.py), hashed, and ordered
from a worker (bot/flow/orders.py), which stores it in the cache under a key made of the photo's hash,
the style and everything else that decides the pixels (:meth:`Results.version`, bot/flow/keys.py). A
photo forwarded to the bot by many people at once is drawn once: later requests wait for the drawing
under way. What is counted and logged of it, the telemetry says (bot/flow/telemetry.py).
"""
from __future__ import annotations

import asyncio
import hashlib
from dataclasses import replace

from bot.flow import fetching, previews
from bot.flow.admission import Admission
from bot.flow.drawn import Drawn
from bot.flow.equipment import Equipment
from bot.flow.errand import Errand
from bot.flow.fetching import Fetcher
from bot.flow.keys import drawing_version, key_of
from bot.flow.kinds.base import Work
from bot.flow.kinds.registry import plan
from bot.flow.orders import CLIP_ALLOWANCE, Order, Orders
from bot.flow.requests import Failed, Request, Source
from bot.flow.telemetry import Telemetry
from inference.clip_settings import ClipLimits
from inference.drawer import WorkOrder
from storage.cache import CachedResult


class DrawingStopped(Exception):
    """What a request waiting for another's drawing of the same result gets when that request was
    stopped: it draws the photo itself (its own stop is a CancelledError, as ever)."""


class Results:
    """Looks results up in the cache, and has the workers draw the rest."""

    def __init__(self, equipment: Equipment, clip_limits: ClipLimits, admission: Admission) -> None:
        self.stores = equipment.stores
        self.styles = equipment.styles
        self.admission = admission
        self.telemetry = Telemetry()
        self.fetcher = Fetcher(equipment.downloads, equipment.styles)
        self.orders = Orders(equipment, clip_limits, self.telemetry)
        self._drawing: dict[str, asyncio.Future[CachedResult]] = {}  # result key -> its drawing, shared

    async def needs(self, req: Request) -> list[bool]:
        """For each drawing of the request, whether it must be drawn (neither cached nor being drawn);
        none for a preview whose sheet is cached."""
        shas = {src: await self.known_sha(src) for src in req.sources}
        if plan(req).sheet and (sha := shas[req.sources[0]]) and await self.stores.results.has(
                previews.sheet_key_of(self.styles, req, sha)):
            return [False] * len(req.items)
        needs = []
        for src, style in req.items:
            sha = shas[src]
            if style not in self.styles.names:  # uninstalled since the request was made: it will fail, not draw
                needs.append(False)
                continue
            key = key_of(sha, style, self.version(src, style, req), plan(req)) if sha else None
            needs.append(key is None or (key not in self._drawing and not await self.stores.results.has(key)))
        return needs

    async def known_sha(self, src: Source) -> str | None:
        """The photo's content hash without downloading it: given (a redraw), or from a file Telegram
        sent us before (same ``file_unique_id``)."""
        return src.sha256 or (await self.stores.uploads.content_of(src.file_unique_id) if src.file_unique_id else None)

    async def known(self, key: str) -> CachedResult | None:
        """The result for ``key`` from the cache, or from the same photo being drawn right now
        (a photo forwarded to the bot by many people at once is drawn once)."""
        hit = await self.stores.results.get(key)
        if hit is None and (drawing := self._drawing.get(key)) is not None:
            try:
                hit = await asyncio.shield(drawing)
            except DrawingStopped:
                return None  # the request drawing it was stopped (/forget, a stop), not this one: draw it here
        if hit is not None:
            await self.stores.counters.bump("cache_hits")
            self.telemetry.cache_hit()
        return hit

    async def result(self, errand: Errand, src: Source, style: str) -> Drawn:
        """One photo's result in one style, from the cache, from the same drawing under way, or drawn;
        noted as the user's (their photo and this result of it), for /forget.

        A new request has its queue places reserved (at take-on); a
        recovered one was promised an answer, so it waits for room instead.
        """
        drawn = await self._result(errand, src, style)
        if not src.sample:  # the registry's sample photo is the bot's own, nobody's to forget
            await self.stores.holdings.hold(errand.req.user_id, drawn.sha256, drawn.result.key)
        return drawn

    async def _result(self, errand: Errand, src: Source, style: str) -> Drawn:
        req = errand.req
        if style not in self.styles.names:  # a recovered request of a style uninstalled since
            raise Failed("style_unavailable")
        sha = await self.known_sha(src)
        version = self.version(src, style, req)
        if sha and (known := await self.known(key_of(sha, style, version))):
            await self._received(req, src, sha)
            return Drawn.of(src, sha, style, known)
        data = await self.fetcher.data(req, src, errand.fetched)
        sha = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        await self._received(req, src, sha)
        media = await asyncio.to_thread(fetching.kind_of, src, data)  # a photo, an animation or a video
        if plan(req).stills_only and media != "photo":  # a last "photo" remembered by an older release: a clip
            raise Failed("preview_needs_photo")
        if media != src.kind:  # a GIF or video sent as a file, or a one-frame GIF: its bytes decide
            src = replace(src, kind=media, seconds=None)  # a clip's length is read from its header, below
            version = self.version(src, style, req)
        key = key_of(sha, style, version)
        if known := await self.known(key):
            return Drawn.of(src, sha, style, known)
        self.telemetry.cache_miss()
        measured = await self._measured(req, src, data) if src.clip and src.seconds is None else src
        with self.admission.counted(req.user_id, measured.units - src.units if plan(req).units(req) else 0):
            clip = self.orders.clip_settings(measured, req) if measured.clip else None
            order = Order(WorkOrder(req.job_id, data, style, req.settings, clip), key, sha,
                          CLIP_ALLOWANCE if clip else 1.0)
            return await self._draw_shared(errand, measured, order)

    async def _measured(self, req: Request, src: Source, data: bytes) -> Source:
        """A clip whose length Telegram did not give (one sent as a file), with the length its header
        gives, once that fits what is left of the user's quota and waiting limit; :class:`Failed`
        with the numbers when it does not."""
        measured = await fetching.measured(src, data, self.orders.clip_limits(req).max_seconds)
        await self.admission.weigh_clip(req, src, measured)
        return measured

    async def _received(self, req: Request, src: Source, sha: str) -> None:
        """The user sent these bytes as this Telegram file (not a redraw of a result): the file and the
        photo are theirs, even if it is never drawn, and their /forget erases both. Noted on a cache hit
        too: a file forwarded from someone who later says /forget stays fetchable for this user."""
        if src.file_unique_id:
            await self.stores.uploads.remember_upload(req.user_id, src.file_unique_id, sha, src.file_id)
            await self.stores.holdings.hold(req.user_id, sha)

    def version(self, src: Source, style: str, req: Request) -> str:
        """What besides the bytes and the style decides the result: the drawing settings, and for a
        clip how it is sent and the limits it is drawn under."""
        return drawing_version(self.styles, style, req.settings, src, self.orders.clip_limits(req))

    async def further(self, errand: Errand, base: Drawn, work: Work) -> Drawn:
        """``work`` done on ``base`` (HD's doubling, bot/flow/kinds/hd.py): from the cache, from the same work
        under way, or on a worker from the very file the user has, so that it is that picture, made further."""
        req = errand.req
        key = key_of(base.sha256, base.style, self.version(base.source, base.style, req), plan(req))
        if known := await self.known(key):
            drawn = Drawn.of(base.source, base.sha256, base.style, known)
        else:
            data = await asyncio.to_thread(base.result.path.read_bytes)
            order = WorkOrder(req.job_id, data, base.style, req.settings, operation=work.operation)
            drawn = await self._draw_shared(errand, base.source, Order(order, key, base.sha256, work.allowance))
        if not base.source.sample:
            await self.stores.holdings.hold(req.user_id, drawn.sha256, drawn.result.key)
        return drawn

    async def _draw_shared(self, errand: Errand, src: Source, order: Order) -> Drawn:
        """Draw it, letting any request that wants the same result meanwhile wait for this drawing."""
        drawing = asyncio.get_running_loop().create_future()
        drawing.add_done_callback(lambda f: f.cancelled() or f.exception())  # followers may be gone
        self._drawing[order.key] = drawing
        try:
            drawn = await self.orders.draw(errand, src, order)
            drawing.set_result(drawn.result)
            return drawn
        except asyncio.CancelledError:
            drawing.set_exception(DrawingStopped())
            raise
        except BaseException as exc:
            drawing.set_exception(exc)
            raise
        finally:
            del self._drawing[order.key]
