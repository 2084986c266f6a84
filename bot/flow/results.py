"""One photo's result in one style: from the cache, from the same drawing under way, or drawn.

Drawn means: downloaded once for all of a request's styles, hashed, queued
on a worker, waited for, and stored in the cache under a key made of the
photo's hash, the style and everything else that decides the pixels
(:meth:`Results.version`). A photo forwarded to the bot by many people at
once is drawn once: later requests wait for the drawing under way.
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from dataclasses import replace

from telegram import Bot
from telegram.error import BadRequest, NetworkError

from storage.errors import AnimebotError
from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import Pool, PoolBusy
from bot.flow import previews
from bot.flow.admission import Admission, FlowSettings
from bot.flow.drawn import Drawn
from bot.flow.errand import Errand, Fetched
from bot.flow.keys import drawing_version, key_of
from bot.flow.kinds.base import Work
from bot.flow.kinds.registry import plan
from bot.flow.requests import Failed, Request, Source
from bot.flow.retry import retrying
from bot.service import metrics
from bot.styles import Styles
from inference import clip_io, sticker
from inference.clip_settings import ClipLimits, ClipSettings
from inference.clips import is_clip
from inference.drawer import WorkOrder
from inference.pipeline import Converted
from storage.cache import CachedResult
from storage.journal import Journal
from storage.stores import Stores

log = logging.getLogger("animebot.jobs")

DOWNLOAD_LIMIT = 20 * 1024 * 1024  # the Bot API's getFile limit
# A clip may take this many job timeouts: 150 frames at 480 px cost about 30 photos at 720 (docs/clips.md).
CLIP_ALLOWANCE = 10

class DrawingStopped(Exception):
    """What a request waiting for another's drawing of the same result gets when that request was
    stopped: it draws the photo itself (its own stop is a CancelledError, as ever)."""




class Results:
    """Looks results up in the cache, and has the workers draw the rest."""

    def __init__(self, bot: Bot, pool: Pool, stores: Stores, journal: Journal, styles: Styles,
                 settings: FlowSettings, admission: Admission) -> None:
        self.bot = bot
        self.pool = pool
        self.stores = stores
        self.journal = journal
        self.styles = styles
        self.clip_limits = settings.clip_limits
        self.admission = admission
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
        if hit := await self.stores.results.get(key):
            await self.stores.counters.bump("cache_hits")
            metrics.CACHE_LOOKUPS.labels("hit").inc()
            return hit
        if (drawing := self._drawing.get(key)) is not None:
            try:
                result = await asyncio.shield(drawing)
            except DrawingStopped:
                return None  # the request drawing it was stopped (/forget, a stop), not this one: draw it here
            await self.stores.counters.bump("cache_hits")
            metrics.CACHE_LOOKUPS.labels("hit").inc()
            return result
        return None

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
        data = await self.data(req, src, errand.fetched)
        sha = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        await self._received(req, src, sha)
        media = await asyncio.to_thread(_kind_of, src, data)  # a photo, an animation or a video
        if plan(req).stills_only and media != "photo":  # a last "photo" remembered by an older release: a clip
            raise Failed("preview_needs_photo")
        if media != src.kind:  # a GIF or video sent as a file, or a one-frame GIF: its bytes decide
            src = replace(src, kind=media, seconds=None)  # a clip's length is read from its header, below
            version = self.version(src, style, req)
        key = key_of(sha, style, version)
        if known := await self.known(key):
            return Drawn.of(src, sha, style, known)
        metrics.CACHE_LOOKUPS.labels("miss").inc()  # the last look (the first may not know the hash): drawn now
        measured = await self._measured(req, src, data) if src.clip and src.seconds is None else src
        with self.admission.counted(req.user_id, measured.units - src.units if plan(req).units(req) else 0):
            order = WorkOrder(req.job_id, data, style, req.settings,
                              self._clip_settings(measured, req) if measured.clip else None)
            return await self._draw_shared(errand, measured, style, key, sha, order,
                                           CLIP_ALLOWANCE if measured.clip else 1.0)

    async def _received(self, req: Request, src: Source, sha: str) -> None:
        """The user sent these bytes as this Telegram file (not a redraw of a result): the file and the
        photo are theirs, even if it is never drawn, and their /forget erases both. Noted on a cache hit
        too: a file forwarded from someone who later says /forget stays fetchable for this user."""
        if src.file_unique_id:
            await self.stores.uploads.remember_upload(req.user_id, src.file_unique_id, sha, src.file_id)
            await self.stores.holdings.hold(req.user_id, sha)

    async def data(self, req: Request, src: Source, fetched: Fetched) -> bytes:
        """The photo's bytes, downloaded once for all of a request's drawings of it."""
        if src not in fetched:
            fetched[src] = asyncio.ensure_future(self._download(req, src))
        return await fetched[src]

    def version(self, src: Source, style: str, req: Request) -> str:
        """What besides the bytes and the style decides the result: the drawing settings, and for a
        clip how it is sent and the limits it is drawn under."""
        return drawing_version(self.styles, style, req.settings, src, self._clip_limits(req))

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
            drawn = await self._draw_shared(errand, base.source, base.style, key, base.sha256, order, work.allowance)
        if not base.source.sample:
            await self.stores.holdings.hold(req.user_id, drawn.sha256, drawn.result.key)
        return drawn

    async def _draw_shared(self, errand: Errand, src: Source, style: str, key: str, sha: str, order: WorkOrder,
                           allowance: float) -> Drawn:
        """Draw it, letting any request that wants the same result meanwhile wait for this drawing."""
        drawing = asyncio.get_running_loop().create_future()
        drawing.add_done_callback(lambda f: f.cancelled() or f.exception())  # followers may be gone
        self._drawing[key] = drawing
        try:
            stored, units = await self._draw(errand, src, style, key, sha, order, allowance)
            drawing.set_result(stored)
            return Drawn.of(src, sha, style, stored, from_cache=False, units=units)
        except asyncio.CancelledError:
            drawing.set_exception(DrawingStopped())
            raise
        except BaseException as exc:
            drawing.set_exception(exc)
            raise
        finally:
            del self._drawing[key]

    async def _measured(self, req: Request, src: Source, data: bytes) -> Source:
        """A clip whose length Telegram did not give (one sent as a file), with the length its header
        gives, once that fits what is left of the user's quota and waiting limit; :class:`Failed`
        with the numbers when it does not."""
        try:
            info = await asyncio.to_thread(clip_io.probe, data)
        except AnimebotError as exc:
            raise Failed(exc.code, exc.message, **exc.values) from None
        cap = self._clip_limits(req).max_seconds
        measured = replace(src, seconds=min(info.seconds, cap) if info.seconds > 0 else cap)
        await self.admission.weigh_clip(req, src, measured)
        return measured

    async def _draw(self, errand: Errand, src: Source, style: str, key: str, sha: str, order: WorkOrder,
                    allowance: float) -> tuple[CachedResult, int]:
        """Queue the order on a worker, wait for it, and store the result, with what its answer must say
        beside it (an animated picture's first frame drawn; a clip cut short, or its sound lost); also how
        many photos of the quota it counts as."""
        req, job, reservation = errand.req, errand.job, errand.reservation
        try:
            if reservation is None:  # recovered: it was taken on before the restart, so it waits whatever the bound
                ticket = self.pool.requeue(order, req.user_id, key, allowance)
            else:
                ticket = reservation.submit(order, req.user_id, key, allowance)
        except PoolBusy:
            raise Failed("busy") from None
        job.tickets.append(ticket)
        if req.chat_id > 0:  # private chats only: in a group it would be noise, and eat
            errand.progress.add(ticket)  # into Telegram's 20 messages a minute per group
        marking = asyncio.create_task(self._mark_running(req.job_id, ticket))
        try:
            converted = await ticket.result
        except AnimebotError as exc:
            await self.stores.counters.bump(f"error:{exc.code}")
            if order.clip is not None:
                metrics.CLIPS.labels("cancelled" if exc.code == "cancelled" else "failed").inc()
            raise Failed(exc.code, exc.message, **exc.values) from None
        except asyncio.CancelledError:
            if ticket.result.cancelled() and job.cancelled:  # Cancel pressed while it waited
                raise Failed("cancelled") from None
            if job.forgotten and order.clip is not None and ticket.started.is_set():  # /forget, mid-clip
                metrics.CLIPS.labels("cancelled").inc()
            raise
        finally:
            marking.cancel()
        drawing_s = time.monotonic() - ticket.queued_at - ticket.waited_s
        metrics.WAITING_S.observe(ticket.waited_s)
        metrics.DRAWING_S.observe(drawing_s)
        w, h = converted.output_size
        clip = converted.clip
        suffix = (".webm" if req.settings.cut else ".mp4") if clip else f".{req.settings.fmt}"
        notes = ((("trimmed",) if clip.trimmed else ()) + (("silent",) if clip.sound == "damaged" else ()) if clip
                 else ("animated",) if converted.frames > 1 else ())
        stored = await self.stores.results.put(key, sha, style, converted.data, w, h, suffix=suffix,
                                               face_share=face_share(converted), notes=notes)
        await self.stores.counters.bump("converted")
        passes = sum(1 for f in converted.faces if f["pass"])
        self.pool.settle(ticket, passes, clip.drawn if clip else None)
        if clip is not None:
            metrics.CLIPS.labels("drawn").inc()
            metrics.CLIP_FRAMES.inc(clip.drawn)
            log.info("job %s: %s clip %dx%d -> %dx%d, %d frames (%d drawn) at %g fps, %.1f s%s, sound %s, waited "
                     "%.2f s, drawn in %.2f s (model %.2f s)", req.job_id, style, *converted.input_size, w, h,
                     converted.frames, clip.drawn, clip.fps, clip.seconds, " (cut)" if clip.trimmed else "",
                     clip.sound or "none", ticket.waited_s, drawing_s, converted.timings["model_s"])
            return stored, max(1, math.ceil(clip.seconds))
        if order.operation != "draw":  # work on a drawing (a doubling): no model, no faces
            log.info("job %s: %s of %s %dx%d -> %dx%d, waited %.2f s, made in %.2f s (worker %.2f s: %s)", req.job_id,
                     order.operation, style, *converted.input_size, w, h, ticket.waited_s, drawing_s,
                     sum(converted.timings.values()), ", ".join(f"{k} {v:.2f} s" for k, v in converted.timings.items()))
            return stored, 1
        # "drawn in" is the round trip from leaving the queue to the result; "worker" is the part the worker
        # measured itself, so the difference is what the pool's transport costs (bench/scale_out.py).
        log.info("job %s: %s %dx%d -> %dx%d, waited %.2f s, drawn in %.2f s (worker %.2f s: model %.2f s, "
                 "%d face pass(es) %.2f s)", req.job_id, style, *converted.input_size, w, h, ticket.waited_s,
                 drawing_s, sum(converted.timings.values()), converted.timings.get("model_s", 0.0), passes,
                 converted.timings.get("faces_s", 0.0))
        return stored, 1

    def _clip_settings(self, src: Source, req: Request) -> ClipSettings:
        if req.settings.cut:  # a video sticker: silent WebM with alpha (inference/sticker.py)
            return ClipSettings(self._clip_limits(req), "webm", sound=False, strength=req.settings.strength,
                                keep_colours=req.settings.keep_colours, cut="sticker")
        # An animated avatar is a silent square: Telegram plays a profile video without sound.
        return ClipSettings(self.clip_limits, "mp4", sound=src.kind != "animation" and not req.settings.avatar,
                            strength=req.settings.strength, keep_colours=req.settings.keep_colours,
                            avatar=req.settings.avatar)

    def _clip_limits(self, req: Request) -> ClipLimits:
        """What a clip is drawn under: the operator's limits, and for a video sticker Telegram's too
        (at most 3 s and 30 fps; its 512 px side is set by the drawing)."""
        if not req.settings.cut:
            return self.clip_limits
        return ClipLimits(min(self.clip_limits.max_seconds, sticker.VIDEO_SECONDS),
                          min(self.clip_limits.max_fps, sticker.VIDEO_FPS), sticker.SIDE)

    async def _mark_running(self, job_id: str, ticket: Ticket) -> None:
        await ticket.started.wait()
        await self.journal.job_running(job_id)

    async def _download(self, req: Request, src: Source) -> bytes:
        """The photo's bytes; network trouble is retried, and what cannot be fetched is a Failed."""
        if src.sample:  # the registry's sample photo, from the model store
            if self.styles.sample is None:
                raise Failed("internal")
            return await asyncio.to_thread(self.styles.sample.read_bytes)
        return await download(self.bot, src.file_id, f"job {req.job_id}", src.file_size)


async def download(bot: Bot, file_id: str, what: str, size: int | None = None) -> bytes:
    """A file's bytes from Telegram, within the Bot API's 20 MB (``size``: what the message said, when it
    did); network trouble is retried, and what cannot be fetched is a Failed. ``what`` names it in the log."""
    if size and size > DOWNLOAD_LIMIT:
        raise Failed("file_too_big", size_mb=size / 2**20)
    try:
        file = await retrying(f"{what}: getFile", lambda: bot.get_file(file_id))
        if file.file_size and file.file_size > DOWNLOAD_LIMIT:
            raise Failed("file_too_big", size_mb=file.file_size / 2**20)
        data = bytes(await retrying(f"{what}: download", file.download_as_bytearray))
    except BadRequest as exc:
        if "too big" in exc.message.lower():
            raise Failed("file_too_big", size_mb=(size or DOWNLOAD_LIMIT) / 2**20) from None
        log.warning("%s: getFile refused: %s", what, exc.message)
        raise Failed("download_failed") from None
    except NetworkError as exc:
        log.warning("%s: download failed: %s", what, exc.message)
        raise Failed("download_failed") from None
    if len(data) > DOWNLOAD_LIMIT:  # sizes given beforehand are optional: the bytes decide, for every pool
        raise Failed("file_too_big", size_mb=len(data) / 2**20)
    return data


def _kind_of(src: Source, data: bytes) -> str:
    """What a downloaded file is: a still picture, or a clip (sent back as a video, or as a silent
    animation if it came as a GIF); Telegram's own clips keep the kind Telegram gave them."""
    if src.kind in ("video", "video_note"):
        return src.kind
    if not is_clip(data):
        return "photo"
    return "animation" if src.kind == "animation" or data[:3] == b"GIF" else "video"


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
