"""One order's way through the workers: submitted to the pool, waited for, its result stored, its cost settled.

bot/flow/results.py decides what must be drawn and shares one drawing between the requests that want
it; this draws one order (a WorkOrder, inference/drawer.py) on a worker of bot/drawing/'s pool and keeps
what came of it: the file in the cache, with what its answer must say beside it, and the work the worker
really did charged to its user's line (the pool's ``settle``). It also says what a clip is drawn under.
"""
from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import PoolBusy
from bot.flow.drawn import Drawn
from bot.flow.equipment import Equipment
from bot.flow.errand import Errand
from bot.flow.requests import Failed, Request, Source
from bot.flow.telemetry import Telemetry
from inference import sticker
from inference.clip_settings import ClipLimits, ClipSettings
from inference.drawer import WorkOrder
from inference.pipeline import Converted
from storage.cache import CachedResult, ResultFile
from storage.errors import AnimebotError

# A clip may take this many job timeouts: 150 frames at 480 px cost about 30 photos at 720 (docs/clips.md).
CLIP_ALLOWANCE = 10


@dataclass(frozen=True)
class Order:
    """A worker's order, and what its result is kept by: the result's cache key (it names the ticket on the
    broker too, so that an order sent again is the same ticket), the photo's hash, and how many job timeouts
    the worker may take (bot/drawing/pool.py, ``time_limit``)."""

    work: WorkOrder
    key: str
    sha256: str
    allowance: float = 1.0


class Orders:
    """Has the workers draw orders, and stores what they drew."""

    def __init__(self, equipment: Equipment, clip_limits: ClipLimits, telemetry: Telemetry) -> None:
        self.pool = equipment.pool
        self.stores = equipment.stores
        self.journal = equipment.journal
        self.limits = clip_limits  # the operator's (bot/service/config.py)
        self.telemetry = telemetry

    async def draw(self, errand: Errand, src: Source, order: Order) -> Drawn:
        """The order drawn for the errand's request and stored, counted as the photos of the quota it is worth
        (a clip: one a second)."""
        ticket = self._submitted(errand, order)
        converted = await self._waited(errand, ticket)
        self.telemetry.drawn(ticket, converted)
        stored = await self._stored(order, converted)
        clip = converted.clip
        await self.stores.counters.bump("converted")
        await self.stores.counters.bump_today("clips" if clip else "photos" if order.work.operation == "draw" else "hd")
        self.pool.settle(ticket, converted.face_passes, clip.drawn if clip else None)
        return Drawn.of(src, order.sha256, order.work.style, stored, from_cache=False,
                        units=max(1, math.ceil(clip.seconds)) if clip else 1)

    def clip_limits(self, req: Request) -> ClipLimits:
        """What a clip is drawn under: the operator's limits, and for a video sticker Telegram's too
        (at most 3 s and 30 fps; its 512 px side is set by the drawing)."""
        if not req.settings.cut:
            return self.limits
        return ClipLimits(min(self.limits.max_seconds, sticker.VIDEO_SECONDS),
                          min(self.limits.max_fps, sticker.VIDEO_FPS), sticker.SIDE)

    def clip_settings(self, src: Source, req: Request) -> ClipSettings:
        """How a worker draws the clip ``src`` and sends it back."""
        if req.settings.cut:  # a video sticker: silent WebM with alpha (inference/sticker.py)
            return ClipSettings(self.clip_limits(req), "webm", sound=False, strength=req.settings.strength,
                                keep_colours=req.settings.keep_colours, cut="sticker")
        # An animated avatar is a silent square: Telegram plays a profile video without sound.
        return ClipSettings(self.limits, "mp4", sound=src.kind != "animation" and not req.settings.avatar,
                            strength=req.settings.strength, keep_colours=req.settings.keep_colours,
                            avatar=req.settings.avatar)

    def _submitted(self, errand: Errand, order: Order) -> Ticket:
        """The order queued: in the queue places reserved at take-on, or, for a request recovered after a
        restart (it was taken on before it, and promised an answer), whatever the queue's bound."""
        req = errand.req
        try:
            if errand.reservation is None:
                ticket = self.pool.requeue(order.work, req.user_id, order.key, order.allowance)
            else:
                ticket = errand.reservation.submit(order.work, req.user_id, order.key, order.allowance)
        except PoolBusy:
            raise Failed("busy") from None
        errand.job.tickets.append(ticket)
        if req.chat_id > 0:  # private chats only: in a group it would be noise, and eat
            errand.progress.add(ticket)  # into Telegram's 20 messages a minute per group
        return ticket

    async def _waited(self, errand: Errand, ticket: Ticket) -> Converted:
        """What the worker made of the ticket's order, the job marked running once a worker took it; a
        failure is a :class:`Failed`, and so is Cancel pressed while it waited."""
        job = errand.job
        marking = asyncio.create_task(self._mark_running(errand.req.job_id, ticket))
        try:
            return await ticket.result
        except AnimebotError as exc:
            await self.stores.counters.bump(f"error:{exc.code}")
            self.telemetry.failed(ticket.order, exc.code)
            raise Failed(exc.code, exc.message, **exc.values) from None
        except asyncio.CancelledError:
            if ticket.result.cancelled() and job.cancelled:  # Cancel pressed while it waited
                raise Failed("cancelled") from None
            if job.forgotten and ticket.started.is_set():  # /forget, mid-drawing
                self.telemetry.stopped(ticket.order)
            raise
        finally:
            marking.cancel()

    async def _stored(self, order: Order, converted: Converted) -> CachedResult:
        """The result in the cache, with what its answer must say beside it: an animated picture's first frame
        drawn; a clip cut short, or its sound lost."""
        w, h = converted.output_size
        clip, settings = converted.clip, order.work.settings
        suffix = (".webm" if settings.cut else ".mp4") if clip else f".{settings.fmt}"
        notes = ((("trimmed",) if clip.trimmed else ()) + (("silent",) if clip.sound == "damaged" else ()) if clip
                 else ("animated",) if converted.frames > 1 else ())
        file = ResultFile(converted.data, w, h, suffix, face_share(converted), notes)
        return await self.stores.results.put(order.key, order.sha256, order.work.style, file)

    async def _mark_running(self, job_id: str, ticket: Ticket) -> None:
        await ticket.started.wait()
        await self.journal.job_running(job_id)


def face_share(converted: Converted) -> float | None:
    """How much of the photo its largest face fills: the face box's long side over the photo's short
    side (0: no face found); None when no detector looked (the face pass off, or not installed)."""
    if "detect_s" not in converted.timings:
        return None
    sides = []
    for face in converted.faces:
        box = face.get("box")
        if isinstance(box, (list, tuple)) and len(box) == 4:
            x0, y0, x1, y1 = (float(v) for v in box)
            sides.append(max(x1 - x0, y1 - y0))
    return max(sides, default=0.0) / max(1, min(converted.input_size))
