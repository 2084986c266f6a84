"""One request's way through the bot: limits, cache, download, queue, worker, storage, reply.

Handlers only turn an update into a :class:`~bot.flow.requests.Request`; everything
after that happens here, in one direction. A request the bot has accepted
always gets an answer: the anime image, or one short sentence saying why not.

It is longer than our other modules on purpose: it is one path, read top
to bottom (take a request on, recover after a restart, answer it, get each
photo's result), and splitting it would scatter the order of those steps.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace

from telegram import Bot, Message
from telegram.error import BadRequest, Forbidden, NetworkError, TelegramError

from bot.service import metrics
from bot.flow import previews
from bot.flow.access import Access, Limits, Refusal
from bot.chat.i18n import t
from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import Pool, PoolBusy, Reservation
from bot.chat.replies import Drawn, Replies
from bot.flow.requests import Failed, Request, Source, StoredRequestError, request_from_json, request_to_json
from bot.chat.retry import retrying
from bot.chat.status import Status
from bot.styles import Styles
from bot.drawing.local.process import WorkOrder
from inference.clip_settings import ClipLimits, ClipSettings
from inference import clip_io
from inference.clips import is_clip
from inference.errors import AnimebotError
from inference.pipeline import Converted
from storage.cache import Cache, CachedResult, result_key
from storage.journal import Journal

log = logging.getLogger("animebot.jobs")

DOWNLOAD_LIMIT = 20 * 1024 * 1024  # the Bot API's getFile limit
CLIP_REVISION = 1  # raise when a change to the clip pipeline changes its results (a new cache key)
MAX_ATTEMPTS = 3  # a job that was running during 3 crashes in a row is given up, with an apology


@dataclass
class _Job:
    """A request being answered now: its coroutine's task and its photos in the pool."""

    task: asyncio.Task[object]
    user_id: int
    pool_tasks: list[Ticket] = field(default_factory=list)
    cancelled: bool = False  # its user pressed Cancel

    def waiting(self) -> bool:
        """Whether a photo of it is still queued, not yet on a worker."""
        return any(not t.started.is_set() and not t.result.done() for t in self.pool_tasks)


class JobRunner:
    """Runs requests against the cache and the worker pool and sends the replies.

    Every request is written to the journal before anything is sent about it,
    and marked answered right after its answer went out. Requests left open by
    a crash or a stop run again from :meth:`recover`.
    """

    def __init__(self, bot: Bot, pool: Pool, cache: Cache, journal: Journal, styles: Styles,
                 replies: Replies, per_user_limit: int, limits: Limits | None = None,
                 fast_styles: dict[str, str] | None = None, fast_queue: int = 4,
                 clip_limits: ClipLimits = ClipLimits()) -> None:
        self.bot = bot
        self.pool = pool
        self.cache = cache
        self.journal = journal
        self.styles = styles
        self.replies = replies
        self.per_user_limit = per_user_limit
        self.limits = limits
        self.access = limits.access if limits is not None else Access()
        self.fast_styles = fast_styles or {}
        self.fast_queue = fast_queue
        self.clip_limits = clip_limits
        self._in_flight: Counter[int] = Counter()
        self._turns: dict[int, tuple[asyncio.Lock, int]] = {}  # user -> their intake lock, and its users
        self._jobs: dict[str, _Job] = {}
        self._recovered: set[asyncio.Task[None]] = set()
        self._drawing: dict[str, asyncio.Future[CachedResult]] = {}  # result key -> its drawing, shared
        self._stopping = False

    # --- taking requests on ---------------------------------------------------------

    async def run(self, req: Request) -> None:
        """Take on and answer a new request; never raises for anything a user or Telegram can cause."""
        if self._stopping:  # its update stays unhandled, and is replayed at the next start
            raise asyncio.CancelledError
        req = self._clip_lengths(req)
        with contextlib.ExitStack() as held:
            async with self._turn(req.user_id):
                taken = await self._take_on(req, held)
            if isinstance(taken, Refusal) and req.preview and not req.units:
                await self.replies.style_menu(req)  # the sample's previews cannot be drawn now: the menu as text
            elif isinstance(taken, Refusal):
                await self.replies.refuse(req, taken)
            elif taken is not None:
                req, reservation = taken
                if req.query_id is not None:  # stop the button's spinner now, not after the drawing
                    with contextlib.suppress(TelegramError):
                        await self.bot.answer_callback_query(req.query_id)
                await self._answer(req, recovered=False, reservation=reservation)

    async def _take_on(self, req: Request, held: contextlib.ExitStack
                       ) -> tuple[Request, Reservation] | Refusal | None:
        """Check the limits and write the job: the request as taken on (with its queue places, held by
        ``held``), a refusal, or None if the job already exists (its update came again).

        Runs one request of a user at a time (:meth:`_turn`): the quota and the waiting limit count
        the user's earlier jobs, so those must be written before the next is weighed."""
        if await self.journal.job_state(req.job_id) is not None:
            log.info("job %s: already taken on; its update came again", req.job_id)
            return None
        n = req.units
        parts = [s.message_id for s in req.sources if s.message_id is not None]
        album = (req.album, parts) if req.album else None  # all of them, even those the quota leaves out
        refusal = None
        needs = await self._needs(req)  # a press of a cached result's button draws nothing
        if self.limits is not None and n:
            # The rate counts what was asked for; the quota only what must be drawn (a preview sheet is one).
            drawing = int(any(needs)) if req.preview else _weighed(req, needs)
            allowed, refusal = await self.limits.allowance(req.user_id, n, drawing=drawing)
            if refusal is not None and refusal.code == "quota_reached" and req.sources[0].clip and allowed > 0:
                refusal = Refusal("clip_over_quota", {"units": drawing, "left": allowed, "count": self.limits.per_day})
            elif refusal is not None and refusal.code == "quota_reached" and allowed > 0 and not req.preview:
                # an album, or "All styles", over what is left of today's quota: draw what fits
                keep = _keep(needs, allowed)
                req, refusal = replace(req.first(keep), left_out=len(needs) - keep), None
                needs = needs[:keep]
        # From here to reserve() and _counted(), no await: other users' requests race for the same room.
        reservation = None
        if refusal is None:
            req, refusal = self._fit(req, needs)
            reservation = self.pool.reserve(sum(needs[:len(req.items)])) if refusal is None else None
        if refusal is not None or reservation is None:
            refusal = refusal or Refusal("busy", {})
            await self.journal.create_job(req.job_id, req.chat_id, req.user_id, n, request_to_json(req),
                                          state="refused", outcome=refusal.code, album=album)
            log.info("job %s: refused (%s) for user %s", req.job_id, refusal.code, req.user_id)
            metrics.JOBS.labels("refused").inc()
            return refusal
        held.enter_context(reservation)
        held.enter_context(self._counted(req.user_id, _waiting_units(req, needs[:len(req.items)])))
        if not await self.journal.create_job(req.job_id, req.chat_id, req.user_id, req.units,
                                             request_to_json(req), album=album):
            return None
        return req, reservation

    @contextlib.asynccontextmanager
    async def _turn(self, user_id: int) -> AsyncIterator[None]:
        """One request of ``user_id`` at a time through the limits (the lock is dropped once unused)."""
        lock, users = self._turns.get(user_id, (asyncio.Lock(), 0))
        self._turns[user_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._turns[user_id]
            if users == 1:
                del self._turns[user_id]
            else:
                self._turns[user_id] = (lock, users - 1)

    def _fit(self, req: Request, needs: list[bool]) -> tuple[Request, Refusal | None]:
        """The part of the request that fits the user's waiting limit and the queue: all of it, the
        first drawings of an album or of "All styles" (the rest counted in ``left_out``), or none (a
        refusal). A preview sheet is all or nothing, and counts one photo against the user's waiting
        limit, as it does against the quota (its tiles are small); the sample's (the bot's own) is not
        the user's at all."""
        need = sum(needs)
        if not need:
            return req, None
        unlimited = self.access.is_admin(req.user_id) or not req.units
        if req.preview:
            if not unlimited and self._in_flight[req.user_id] + _waiting_units(req, needs) > self.per_user_limit:
                return req, Refusal("per_user_limit", {"count": self.per_user_limit})
            return (req, None) if need <= self.pool.free_slots() else (req, Refusal("busy", {}))
        if req.sources[0].clip:  # one clip, all or nothing: it counts one photo per second against the limit
            units = req.sources[0].units
            room = self.per_user_limit - self._in_flight[req.user_id]
            if not unlimited and units > room:
                return req, Refusal("clip_over_limit", {"units": units, "count": self.per_user_limit,
                                                        "room": max(0, room)})
            return (req, None) if self.pool.free_slots() >= 1 else (req, Refusal("busy", {}))
        user_room = need if unlimited else self.per_user_limit - self._in_flight[req.user_id]
        room = min(user_room, self.pool.free_slots())
        if need <= room:
            return req, None
        why = "limit" if user_room <= room else "busy"
        if room <= 0:
            return req, (Refusal("per_user_limit", {"count": self.per_user_limit}) if why == "limit"
                         else Refusal("busy", {}))
        keep = _keep(needs, room)
        left_out = req.left_out + len(needs) - keep
        return replace(req.first(keep), left_out=left_out, left_out_why=why), None

    async def _needs(self, req: Request) -> list[bool]:
        """For each drawing of the request, whether it must be drawn (neither cached nor being drawn);
        none for a preview whose sheet is cached."""
        shas = {src: await self._known_sha(src) for src in req.sources}
        if req.preview and (sha := shas[req.sources[0]]) and await self.cache.has(self._sheet_key(req, sha)):
            return [False] * len(req.items)
        needs = []
        for src, style in req.items:
            sha = shas[src]
            if style not in self.styles.names:  # uninstalled since the request was made: it will fail, not draw
                needs.append(False)
                continue
            key = result_key(sha, style, self._version(src, style, req)) if sha else None
            needs.append(key is None or (key not in self._drawing and not await self.cache.has(key)))
        return needs

    def _sheet_key(self, req: Request, sha: str) -> str:
        return previews.sheet_key(self.styles, sha, [n for n in req.drawn_styles if n in self.styles.names])

    async def _known_sha(self, src: Source) -> str | None:
        """The photo's content hash without downloading it: given (a redraw), or from a file Telegram
        sent us before (same ``file_unique_id``)."""
        return src.sha256 or (await self.cache.content_of(src.file_unique_id) if src.file_unique_id else None)

    @contextlib.contextmanager
    def _counted(self, user_id: int, photos: int) -> Iterator[None]:
        """Count ``photos`` as the user's in flight while the block runs (for the per-user cap)."""
        self._in_flight[user_id] += photos
        try:
            yield
        finally:
            self._in_flight[user_id] -= photos
            if self._in_flight[user_id] <= 0:
                del self._in_flight[user_id]

    async def album_taken(self, chat_id: int, media_group_id: str) -> tuple[set[int], str | None]:
        """The messages of an album already taken on, and the style the album is drawn in (if any is)."""
        parts = await self.journal.album_parts(chat_id, media_group_id)
        style = None
        for job_id in sorted(set(parts.values())):
            stored = await self.journal.job_request(job_id)
            with contextlib.suppress(StoredRequestError):
                style = request_from_json(stored).style if stored else None
            if style is not None:
                break
        return set(parts), style

    # --- restarts and stops -----------------------------------------------------------

    async def _resume(self, req: Request) -> None:
        with self._counted(req.user_id, sum(src.units for src, _ in req.items) if req.units else 0):
            await self._answer(req, recovered=True, reservation=None)

    async def recover(self) -> int:
        """Start every job a crash or a stop left unanswered; return how many."""
        rows = await self.journal.open_jobs()
        for row in rows:
            try:
                req = request_from_json(row.request)
            except StoredRequestError as exc:  # written by a version whose requests we cannot read
                log.warning("job %s: its stored request cannot be read (%s); apologising", row.job_id, exc)
                with contextlib.suppress(TelegramError):
                    await retrying(f"job {row.job_id}: sendMessage",
                                   lambda: self.bot.send_message(row.chat_id, t("en", "internal")))
                await self.journal.finish_job(row.job_id, "failed", "unreadable")
                continue
            if row.status_message_id is not None:  # "in queue, #3" from before the restart
                with contextlib.suppress(TelegramError):
                    await self.bot.delete_message(req.chat_id, row.status_message_id)
            if row.attempts > MAX_ATTEMPTS:
                log.warning("job %s: given up after %d interrupted attempts", req.job_id, row.attempts - 1)
                with contextlib.suppress(TelegramError):
                    await self.replies.say(req, t(req.lang, "internal"))
                await self.journal.finish_job(req.job_id, "failed", "gave_up")
                continue
            log.info("job %s: resumed (attempt %d)", req.job_id, row.attempts)
            task = asyncio.create_task(self._resume(req), name=f"job-{req.job_id}")
            self._recovered.add(task)
            task.add_done_callback(self._recovered.discard)
        return len(rows)

    async def drain(self, wait_s: float) -> None:
        """Graceful stop: start no new photo, give those on a worker up to ``wait_s`` to be answered,
        and stop the rest where they are; they stay open in the journal for the next start."""
        self._stopping = True
        self.pool.pause()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(not job.waiting() for job in self._jobs.values()):
            await asyncio.sleep(0.1)
        left = [job.task for job in self._jobs.values()] + list(self._recovered)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        if left:
            log.info("%d unanswered job(s) kept for the next start", len(left))

    # --- answering ----------------------------------------------------------------------

    async def _answer(self, req: Request, recovered: bool, reservation: Reservation | None) -> None:
        started = time.monotonic()
        current = asyncio.current_task()
        assert current is not None
        self._jobs[req.job_id] = _Job(current, req.user_id)
        lite = self.fast_styles.get(req.style)
        if lite and not req.as_document and not req.styles and not req.preview and self.pool.waiting >= self.fast_queue:
            req = replace(req, style=lite, fast=True)
        try:
            summary = await self._run(req, recovered, reservation)
            log.info("job %s: %s in %.2f s", req.job_id, summary, time.monotonic() - started)
            metrics.JOB_S.observe(time.monotonic() - started)
        except Forbidden as exc:
            log.warning("job %s: cannot answer, Telegram says %s", req.job_id, exc.message)
            await self.journal.finish_job(req.job_id, "failed", "forbidden")
            metrics.JOBS.labels("failed").inc()
        except TelegramError as exc:
            log.warning("job %s: Telegram refused: %s: %s", req.job_id, exc.__class__.__name__, exc.message)
            await self.journal.finish_job(req.job_id, "failed", f"telegram:{exc.__class__.__name__}")
            metrics.JOBS.labels("failed").inc()
        except Exception:  # a bug: keep its traceback, and never lose the photo silently
            log.exception("job %s: failed unexpectedly", req.job_id)
            with contextlib.suppress(TelegramError):
                await self.replies.say(req, t(req.lang, "internal"))
            await self.journal.finish_job(req.job_id, "failed", "internal")
            metrics.JOBS.labels("failed").inc()
        finally:
            del self._jobs[req.job_id]

    async def _run(self, req: Request, recovered: bool, reservation: Reservation | None) -> str:
        """Answer the request and mark it answered in the journal; returns a summary for the log.

        The journal is written the moment the answer is out, before any
        bookkeeping, so that a crash can repeat an answer only if it lands in
        the few milliseconds between Telegram's reply and that commit.
        """
        async with self._status(req) as status:
            fetched: dict[Source, asyncio.Task[bytes]] = {}  # each photo downloaded once, however many styles
            sheet = await self._cached_sheet(req) if req.preview else None
            results = [] if sheet is not None else await asyncio.gather(
                *(self._result(req, src, style, status, reservation, fetched) for src, style in req.items),
                return_exceptions=True)
            done = [r for r in results if isinstance(r, Drawn)]
            failed = [r for r in results if isinstance(r, Failed)]
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, Failed):
                    raise r
            drawn = sum(d.units for d in done if not d.from_cache)
            stills = [d for d in done if not d.source.clip]  # a preview sheet is of a photo, never of a clip
            if stills and not req.preview:  # before the answer: a /style right after it offers this photo
                await self.cache.set_last_photo(req.user_id, stills[-1].sha256, stills[-1].source.spoiler)
            if req.preview:
                sent = await self._send_sheet(req, sheet, done, failed, fetched)
                drawn = min(drawn, req.units)  # a preview is one photo of the quota, the sample's none
            else:
                sent = await self.replies.results(req, done) if done else []
                if failed and len(req.items) == 1:
                    await self.replies.say(req, failed[0].text(req.lang))
                elif failed:
                    partial = "styles_partial" if len(req.drawn_styles) > 1 else "album_partial"
                    await self.replies.say(req, t(req.lang, partial, failed=len(failed), count=len(req.items),
                                                  reason=failed[0].text(req.lang)))
            if req.left_out:
                await self.replies.say(req, self._left_out_text(req))
            codes = ",".join(sorted({f.code for f in failed}))
            await asyncio.shield(self.journal.finish_job(req.job_id, "done" if sent else "failed", codes or None,
                                                         drawn=drawn))
            metrics.JOBS.labels("done" if sent else "cancelled" if codes == "cancelled" else "failed").inc()
        await self.replies.remember(sent)
        return f"{len(done)} sent ({sum(d.from_cache for d in done)} from cache), {len(failed)} failed" + \
            (f" ({codes})" if codes else "") + (" (preview sheet)" if req.preview else "")

    async def _cached_sheet(self, req: Request) -> CachedResult | None:
        sha = await self._known_sha(req.sources[0])
        return await self._known(self._sheet_key(req, sha)) if sha else None

    async def _send_sheet(self, req: Request, sheet: CachedResult | None, done: list[Drawn], failed: list[Failed],
                          fetched: dict[Source, asyncio.Task[bytes]]) -> list[tuple[Drawn, Message]]:
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
                original = [("Photo", await self._data(req, src, fetched))]
            except Failed:  # the tiles came from the cache and the photo cannot be fetched now: tiles only
                original = []
            tiles = [(previews.tile_label(self.styles, d.style), d.result.path) for d in done]
            data, w, h = await asyncio.to_thread(
                lambda: previews.compose(original + [(label, path.read_bytes()) for label, path in tiles]))
            key = self._sheet_key(req, done[0].sha256) + ("~partial" if failed else "")
            sheet = await self.cache.put(key, done[0].sha256, previews.SHEET_STYLE, data, w, h)
        message = await self.replies.sheet(req, sheet, missing=len(failed))
        return [(Drawn(src, sheet.key.split(":", 1)[0], previews.SHEET_STYLE, sheet, from_cache=not done), message)]

    def _left_out_text(self, req: Request) -> str:
        taken, count = len(req.items), len(req.items) + req.left_out
        styles = len(req.drawn_styles) > 1  # "All styles" cut short: say it in styles, not photos
        if req.left_out_why == "limit":
            return t(req.lang, "styles_limit_partial" if styles else "limit_partial", taken=taken, count=count,
                     left_out=req.left_out, limit=self.per_user_limit)
        if req.left_out_why == "busy":
            return t(req.lang, "styles_busy_partial" if styles else "busy_partial", taken=taken, count=count,
                     left_out=req.left_out)
        per_day = self.limits.per_day if self.limits else 0
        if styles:
            return t(req.lang, "styles_quota_partial", left_out=req.left_out, count=count, limit=per_day)
        return t(req.lang, "quota_partial", left_out=req.left_out, count=per_day)

    @contextlib.asynccontextmanager
    async def _status(self, req: Request) -> AsyncIterator[Status]:
        status = Status(self.bot, req, self.journal, self.pool)
        try:
            yield status
        finally:
            await status.close()

    # --- one drawing ---------------------------------------------------------------------

    async def _result(self, req: Request, src: Source, style: str, status: Status, reservation: Reservation | None,
                      fetched: dict[Source, asyncio.Task[bytes]]) -> Drawn:
        """One photo's result in one style, from the cache, from the same drawing under way, or drawn.

        A new request has its queue places reserved (:meth:`run`); a
        recovered one was promised an answer, so it waits for room instead.
        """
        if style not in self.styles.names:  # a recovered request of a style uninstalled since
            raise Failed("style_unavailable")
        sha = await self._known_sha(src)
        version = self._version(src, style, req)
        if sha and (known := await self._known(result_key(sha, style, version))):
            return Drawn(src, sha, style, known, from_cache=True)
        data = await self._data(req, src, fetched)
        sha = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        if src.file_unique_id:
            await self.cache.remember_upload(src.file_unique_id, sha, src.file_id)
        kind = await asyncio.to_thread(_kind_of, src, data)
        if req.preview and kind != "photo":  # a last "photo" remembered by an older release: a clip
            raise Failed("preview_needs_photo")
        if kind != src.kind:  # a GIF or video sent as a file, or a one-frame GIF: its bytes decide
            src = replace(src, kind=kind, seconds=None)  # a clip's length is read from its header, below
            version = self._version(src, style, req)
        key = result_key(sha, style, version)
        if known := await self._known(key):
            return Drawn(src, sha, style, known, from_cache=True)
        measured = await self._measured(req, src, data) if src.clip and src.seconds is None else src
        with self._counted(req.user_id, measured.units - src.units if req.units else 0):
            return await self._draw_shared(req, measured, style, key, sha, data, status, reservation)

    async def _draw_shared(self, req: Request, src: Source, style: str, key: str, sha: str, data: bytes,
                           status: Status, reservation: Reservation | None) -> Drawn:
        """Draw it, letting any request that wants the same result meanwhile wait for this drawing."""
        drawing = asyncio.get_running_loop().create_future()
        drawing.add_done_callback(lambda f: f.cancelled() or f.exception())  # followers may be gone
        self._drawing[key] = drawing
        try:
            stored, animated, units, notes = await self._draw(req, src, style, key, sha, data, status, reservation)
            drawing.set_result(stored)
            return Drawn(src, sha, style, stored, from_cache=False, animated=animated, units=units, notes=notes)
        except asyncio.CancelledError:
            drawing.cancel()
            raise
        except BaseException as exc:
            drawing.set_exception(exc)
            raise
        finally:
            del self._drawing[key]

    async def _measured(self, req: Request, src: Source, data: bytes) -> Source:
        """A clip whose length Telegram did not give (one sent as a file), with the length its header
        gives, once that fits what is left of the user's quota and waiting limit (a clip is all or
        nothing, as one sent as a video is); :class:`Failed` with the numbers when it does not."""
        try:
            info = await asyncio.to_thread(clip_io.probe, data)
        except AnimebotError as exc:
            raise Failed(exc.code, exc.message) from None
        cap = self.clip_limits.max_seconds
        measured = replace(src, seconds=min(info.seconds, cap) if info.seconds > 0 else cap)
        if not req.units or self.access.is_admin(req.user_id):
            return measured
        extra = measured.units - src.units
        async with self._turn(req.user_id):  # as at take-on: the user's other requests are weighed one at a time
            left = await self.limits.quota_left(req.user_id) if self.limits is not None else None
            room = self.per_user_limit - self._in_flight[req.user_id]
            refusal = None
            if left is not None and extra > left:
                refusal = Failed("clip_over_quota", units=measured.units, left=max(0, left + src.units),
                                 count=self.limits.per_day if self.limits else 0)
            elif extra > room:
                refusal = Failed("clip_over_limit", units=measured.units, count=self.per_user_limit,
                                 room=max(0, room + src.units))
            # What the job counts against today's quota from now on: the clip's seconds, or nothing
            # once it will not be drawn (the user's other clips weighed after it must not pay for it).
            await self.journal.count_job_photos(req.job_id, 0 if refusal else req.units + extra)
        if refusal is not None:
            raise refusal
        return measured

    async def _data(self, req: Request, src: Source, fetched: dict[Source, asyncio.Task[bytes]]) -> bytes:
        """The photo's bytes, downloaded once for all of a request's drawings of it."""
        if src not in fetched:
            fetched[src] = asyncio.ensure_future(self._download(req, src))
        return await fetched[src]

    async def _known(self, key: str) -> CachedResult | None:
        """The result for ``key`` from the cache, or from the same photo being drawn right now
        (a photo forwarded to the bot by many people at once is drawn once)."""
        if hit := await self.cache.get(key):
            await self.cache.bump("cache_hits")
            return hit
        if (drawing := self._drawing.get(key)) is not None:
            await self.cache.bump("cache_hits")
            return await asyncio.shield(drawing)
        return None

    async def _draw(self, req: Request, src: Source, style: str, key: str, sha: str, data: bytes, status: Status,
                    reservation: Reservation | None) -> tuple[CachedResult, bool, int, tuple[str, ...]]:
        """Queue the photo or clip on a worker, wait for it, and store the result; also whether it was an
        animated picture (its first frame drawn), how many photos of the quota it counts as, and what a
        clip's caption must say (cut short, sound lost)."""
        order = WorkOrder(req.job_id, data, style, req.settings, self._clip_settings(src, req) if src.clip else None)
        try:
            if reservation is None:  # recovered: it was taken on before the restart, so it waits whatever the bound
                task = self.pool.requeue(order, req.user_id, key)
            else:
                task = reservation.submit(order, req.user_id, key)
        except PoolBusy:
            raise Failed("busy") from None
        self._jobs[req.job_id].pool_tasks.append(task)
        if req.chat_id > 0:  # private chats only: in a group it would be noise, and eat
            status.add(task)  # into Telegram's 20 messages a minute per group
        marking = asyncio.create_task(self._mark_running(req.job_id, task))
        try:
            converted = await task.result
        except AnimebotError as exc:
            await self.cache.bump(f"error:{exc.code}")
            raise Failed(exc.code, exc.message) from None
        except asyncio.CancelledError:
            if task.result.cancelled() and self._jobs[req.job_id].cancelled:  # Cancel pressed while it waited
                raise Failed("cancelled") from None
            raise
        finally:
            marking.cancel()
        drawing_s = time.monotonic() - task.queued_at - task.waited_s
        metrics.WAITING_S.observe(task.waited_s)
        metrics.DRAWING_S.observe(drawing_s)
        w, h = converted.output_size
        clip = converted.clip
        stored = await self.cache.put(key, sha, style, converted.data, w, h, suffix=".mp4" if clip else ".jpg",
                                      face_share=face_share(converted))
        await self.cache.bump("converted")
        await self.cache.count_photo(req.user_id)
        passes = sum(1 for f in converted.faces if f["pass"])
        self.pool.settle(task, passes, clip.drawn if clip else None)
        if clip is not None:
            log.info("job %s: %s clip %dx%d -> %dx%d, %d frames (%d drawn) at %g fps, %.1f s%s, sound %s, waited "
                     "%.2f s, drawn in %.2f s (model %.2f s)", req.job_id, style, *converted.input_size, w, h,
                     converted.frames, clip.drawn, clip.fps, clip.seconds, " (cut)" if clip.trimmed else "",
                     clip.sound or "none", task.waited_s, drawing_s, converted.timings["model_s"])
            notes = (("trimmed",) if clip.trimmed else ()) + (("silent",) if clip.sound == "damaged" else ())
            return stored, False, max(1, math.ceil(clip.seconds)), notes
        # "drawn in" is the round trip from leaving the queue to the result; "worker" is the part the worker
        # measured itself, so the difference is what the pool's transport costs (bench/scale_out.py).
        log.info("job %s: %s %dx%d -> %dx%d, waited %.2f s, drawn in %.2f s (worker %.2f s: model %.2f s, "
                 "%d face pass(es) %.2f s)", req.job_id, style, *converted.input_size, w, h, task.waited_s,
                 drawing_s, sum(converted.timings.values()), converted.timings["model_s"], passes,
                 converted.timings.get("faces_s", 0.0))
        return stored, converted.frames > 1, 1, ()

    def _version(self, src: Source, style: str, req: Request) -> str:
        """What besides the bytes and the style decides the result: the drawing settings, and for a
        clip how it is sent and the limits it is drawn under."""
        version = self.styles.version(style, req.settings)
        if not src.clip:
            return version
        limits = self.clip_limits
        return f"{version}|{src.kind}:{limits.max_seconds:g}s:{limits.max_fps:g}fps:{limits.max_side}px:{CLIP_REVISION}"

    def _clip_settings(self, src: Source, req: Request) -> ClipSettings:
        return ClipSettings(self.clip_limits, "mp4", sound=src.kind != "animation", strength=req.settings.strength,
                            keep_colours=req.settings.keep_colours)

    def _clip_lengths(self, req: Request) -> Request:
        """A clip counts only the seconds that will be drawn (one of unknown length: see Source.units)."""
        if not any(src.clip for src in req.sources):
            return req
        cap = self.clip_limits.max_seconds
        return replace(req, sources=tuple(replace(s, seconds=min(s.seconds, cap) if s.seconds else None) if s.clip
                                          else s for s in req.sources))

    def cancel(self, job_id: str, user_id: int) -> str:
        """The Cancel button: stop a job's drawing (queued, or a clip on a local worker). Returns what to
        tell the presser: ``cancelling``, ``cancelling_already``, ``not_your_job`` or ``job_gone``."""
        job = self._jobs.get(job_id)
        if job is None:
            return "job_gone"
        if job.user_id != user_id:
            return "not_your_job"
        if job.cancelled:  # pressed again before the worker stopped, or while the answer goes out
            return "cancelling_already"
        if all(t.result.done() for t in job.pool_tasks):
            return "job_gone"
        job.cancelled = True
        for task in job.pool_tasks:
            self.pool.cancel(task)
        return "cancelling"

    async def _mark_running(self, job_id: str, task: Ticket) -> None:
        await task.started.wait()
        await self.journal.job_running(job_id)

    async def _download(self, req: Request, src: Source) -> bytes:
        """The photo's bytes; network trouble is retried, and what cannot be fetched is a Failed."""
        if src.sample:  # the registry's sample photo, from the model store
            if self.styles.sample is None:
                raise Failed("internal")
            return await asyncio.to_thread(self.styles.sample.read_bytes)
        if src.file_size and src.file_size > DOWNLOAD_LIMIT:
            raise Failed("file_too_big", size_mb=src.file_size / 2**20)
        try:
            file = await retrying(f"job {req.job_id}: getFile", lambda: self.bot.get_file(src.file_id))
            if file.file_size and file.file_size > DOWNLOAD_LIMIT:
                raise Failed("file_too_big", size_mb=file.file_size / 2**20)
            data = bytes(await retrying(f"job {req.job_id}: download", file.download_as_bytearray))
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                raise Failed("file_too_big", size_mb=(src.file_size or DOWNLOAD_LIMIT) / 2**20) from None
            log.warning("job %s: getFile refused: %s", req.job_id, exc.message)
            raise Failed("download_failed") from None
        except NetworkError as exc:
            log.warning("job %s: download failed: %s", req.job_id, exc.message)
            raise Failed("download_failed") from None
        if len(data) > DOWNLOAD_LIMIT:  # sizes given beforehand are optional: the bytes decide, for every pool
            raise Failed("file_too_big", size_mb=len(data) / 2**20)
        return data


def _weighed(req: Request, needs: list[bool]) -> int:
    """The drawings ``needs`` marks, each counted as the photos it is worth (a clip one per second)."""
    return sum(src.units for (src, _), need in zip(req.items, needs) if need)


def _waiting_units(req: Request, needs: list[bool]) -> int:
    """What the request counts against its user's waiting limit: the drawings it must make, but a
    preview sheet is one photo (:attr:`Request.units`), and the sample's none."""
    if not req.units:
        return 0
    return min(1, sum(needs)) if req.preview else _weighed(req, needs)


def _kind_of(src: Source, data: bytes) -> str:
    """What a downloaded file is: a still picture, or a clip (sent back as a video, or as a silent
    animation if it came as a GIF); Telegram's own clips keep the kind Telegram gave them."""
    if src.kind in ("video", "video_note"):
        return src.kind
    if not is_clip(data):
        return "photo"
    return "animation" if src.kind == "animation" or data[:3] == b"GIF" else "video"


def _keep(needs: list[bool], room: int) -> int:
    """How many of the first drawings to keep so that at most ``room`` of them must be drawn (those
    answered from the cache come along for free)."""
    keep, taken = 0, 0
    while keep < len(needs) and (taken < room or not needs[keep]):
        taken += needs[keep]
        keep += 1
    return keep


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
