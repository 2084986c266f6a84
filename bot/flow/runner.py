"""One request's way through the bot, from a handler's :class:`~bot.flow.requests.Request` to its answer.

Handlers only turn an update into a Request; everything after that happens
here and in the parts this runner holds, in one direction: admission (limits,
queue places, the job written to the journal), results (cache, download,
drawing, storage), the answer (bot/chat/replies.py), and recovery after a
restart. A request the bot has accepted always gets an answer: the anime
image, or one short sentence saying why not.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

from telegram import Bot
from telegram.error import Forbidden, TelegramError

from bot.words.catalogue import t
from bot.chat.replies import Drawn, Replies
from bot.chat.status import Status
from bot.drawing.pool import Pool, Reservation
from bot.flow.access import Refusal
from bot.flow.admission import Admission, FlowSettings
from bot.flow.recovery import Recovery
from bot.flow.requests import Failed, Request
from bot.flow.results import Fetched, Results
from bot.flow.running import RunningJob, RunningJobs
from bot.flow.sheets import Sheets
from bot.service import metrics
from bot.styles import Styles
from bot.webapp.jobs import AppJobs, page_sentence
from storage.cache import Cache
from storage.journal import Journal

log = logging.getLogger("animebot.jobs")


class JobRunner:
    """Runs requests against the cache and the worker pool and sends the replies.

    Every request is written to the journal before anything is sent about it,
    and marked answered right after its answer went out. Requests left open by
    a crash or a stop run again from :meth:`recover`.
    """

    def __init__(self, bot: Bot, pool: Pool, cache: Cache, journal: Journal, styles: Styles, replies: Replies,
                 settings: FlowSettings, desk: AppJobs) -> None:
        self.bot = bot
        self.pool = pool
        self.cache = cache
        self.journal = journal
        self.replies = replies
        self.desk = desk  # what the Mini App is told about the requests it made
        self.settings = settings
        self.jobs = RunningJobs(pool)
        self.admission = Admission(journal, pool, settings, self.jobs.forgetting)
        self.results = Results(bot, pool, cache, journal, styles, settings, self.admission)
        self.sheets = Sheets(cache, styles, replies, self.results)
        self.recovery = Recovery(bot, pool, journal, replies, self.jobs, self._resume)
        self._stopping = False

    async def run(self, req: Request) -> bool:
        """Take on and answer a new request; never raises for anything a user or Telegram can cause.
        Returns whether it was taken on (and so answered in its chat), not refused."""
        if self._stopping:  # its update stays unhandled, and is replayed at the next start
            raise asyncio.CancelledError
        req = self.admission.clip_lengths(req)
        with contextlib.ExitStack() as held:
            async with self.admission.turn(req.user_id):
                taken = await self.admission.take_on(req, await self.results.needs(req), held)
            if isinstance(taken, Refusal):
                await self._refuse(req, taken)
                return False
            if taken is not None:
                req, reservation = taken
                if req.query_id is not None:  # stop the button's spinner now, not after the drawing
                    with contextlib.suppress(TelegramError):
                        await self.bot.answer_callback_query(req.query_id)
                await self._answer(req, recovered=False, reservation=reservation)
            return taken is not None

    @property
    def stopping(self) -> bool:
        """Stopping: new requests are not taken on (the Mini App says to try again in a minute)."""
        return self._stopping

    async def _refuse(self, req: Request, refusal: Refusal) -> None:
        self.desk.failed(req.job_id, page_sentence(req.lang, refusal.code, refusal.values))
        self.desk.ended(req.job_id)
        if req.deliver != "chat" or self.desk.tracks(req.job_id):
            return  # the page asked, and says it
        if req.preview and not req.units:
            await self.replies.style_menu(req)  # the sample's previews cannot be drawn now: the menu as text
        else:
            await self.replies.refuse(req, refusal)

    def cancel(self, job_id: str, user_id: int) -> str:
        """The Cancel button (see :meth:`RunningJobs.cancel`)."""
        return self.jobs.cancel(job_id, user_id)

    async def album_taken(self, chat_id: int, media_group_id: str) -> tuple[set[int], str | None]:
        """The messages of an album already taken on, and the style the album is drawn in (if any is)."""
        return await self.admission.album_taken(chat_id, media_group_id)

    async def recover(self) -> int:
        """Start every job a crash or a stop left unanswered; return how many."""
        return await self.recovery.recover()

    async def drain(self, wait_s: float) -> None:
        """Graceful stop: no new request is taken on; see :meth:`Recovery.drain`."""
        self._stopping = True
        await self.recovery.drain(wait_s)

    async def _resume(self, req: Request) -> None:
        with self.admission.counted(req.user_id, sum(src.units for src, _ in req.items) if req.units else 0):
            await self._answer(req, recovered=True, reservation=None)

    async def _answer(self, req: Request, recovered: bool, reservation: Reservation | None) -> None:
        # A job whose user said /forget meanwhile is not answered: its row is gone, or about to go.
        if await self.journal.job_state(req.job_id) is None or req.user_id in self.jobs.forgetting:
            log.info("job %s: not answered; its user asked to be forgotten", req.job_id)
            return
        started = time.monotonic()
        lite = self.settings.fast_styles.get(req.style)
        # Not for the Mini App: its user chose the picture by looking at it, and a lite style would not be it.
        if lite and not req.as_document and not req.styles and not req.preview and req.deliver == "chat" and \
                self.pool.waiting >= self.settings.fast_queue:
            req = replace(req, style=lite, fast=True)
        with self.jobs.running(req.job_id, req.user_id) as job, self._told_desk(req):
            try:
                summary = await self._run(req, job, reservation)
                log.info("job %s: %s in %.2f s", req.job_id, summary, time.monotonic() - started)
                metrics.JOB_S.observe(time.monotonic() - started)
            except asyncio.CancelledError:
                if job.forgotten:  # /forget stopped it where it was; a stop's jobs are answered after the restart
                    metrics.JOBS.labels("cancelled").inc()
                raise
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
                    if req.deliver == "chat":
                        await self.replies.say(req, t(req.lang, "internal"))
                await self.journal.finish_job(req.job_id, "failed", "internal")
                metrics.JOBS.labels("failed").inc()

    async def _run(self, req: Request, job: RunningJob, reservation: Reservation | None) -> str:
        """Answer the request and mark it answered in the journal; returns a summary for the log.

        The journal is written the moment the answer is out, before any
        bookkeeping, so that a crash can repeat an answer only if it lands in
        the few milliseconds between Telegram's reply and that commit.
        """
        async with self._status(req) as status:
            fetched: Fetched = {}
            # The page shows a preview's tiles, not the sheet: they are looked up (or drawn) one by one.
            sheet = await self.sheets.cached(req) if req.preview and req.deliver == "chat" else None
            results = [] if sheet is not None else await asyncio.gather(
                *(self.results.result(req, src, style, job, status, reservation, fetched) for src, style in req.items),
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
                drawn = min(drawn, req.units)  # a preview is one photo of the quota, the sample's none
            if failed:
                self.desk.failed(req.job_id, failed[0].text(req.lang))
            if req.deliver != "chat":
                sent = []  # the page shows it (the desk, below)
            elif req.preview:
                sent = await self.sheets.send(req, sheet, done, failed, fetched)
            else:
                sent = await self.replies.results(req, done) if done else []
                if failed and len(req.items) == 1:
                    await self.replies.say(req, failed[0].text(req.lang))
                elif failed:
                    partial = "styles_partial" if len(req.drawn_styles) > 1 else "album_partial"
                    await self.replies.say(req, t(req.lang, partial, failed=len(failed), count=len(req.items),
                                                  reason=failed[0].text(req.lang)))
            if req.left_out and req.deliver == "chat":
                await self.replies.say(req, self._left_out_text(req))
            codes = ",".join(sorted({f.code for f in failed}))
            answered = bool(sent) or (req.deliver != "chat" and bool(done))
            await asyncio.shield(self.journal.finish_job(req.job_id, "done" if answered else "failed", codes or None,
                                                         drawn=drawn))
            metrics.JOBS.labels("done" if answered else "cancelled" if codes == "cancelled" else "failed").inc()
        if sent or req.deliver != "chat":
            await self.desk.done(req, done)
        await self.replies.remember(sent)
        verb = "sent" if req.deliver == "chat" else "kept for the Mini App"
        return f"{len(done)} {verb} ({sum(d.from_cache for d in done)} from cache), {len(failed)} failed" + \
            (f" ({codes})" if codes else "") + (" (preview sheet)" if req.preview else "")

    def _left_out_text(self, req: Request) -> str:
        taken, count = len(req.items), len(req.items) + req.left_out
        styles = len(req.drawn_styles) > 1  # "All styles" cut short: say it in styles, not photos
        limit = self.settings.per_user_limit
        if req.left_out_why == "limit":
            return t(req.lang, "styles_limit_partial" if styles else "limit_partial", taken=taken, count=count,
                     left_out=req.left_out, limit=limit)
        if req.left_out_why == "busy":
            return t(req.lang, "styles_busy_partial" if styles else "busy_partial", taken=taken, count=count,
                     left_out=req.left_out)
        per_day = self.settings.limits.per_day if self.settings.limits else 0
        if styles:
            return t(req.lang, "styles_quota_partial", left_out=req.left_out, count=count, limit=per_day)
        return t(req.lang, "quota_partial", left_out=req.left_out, count=per_day)

    @contextlib.contextmanager
    def _told_desk(self, req: Request) -> Iterator[None]:
        """However the request ends, the Mini App's desk hears that it did."""
        try:
            yield
        finally:
            self.desk.ended(req.job_id)

    @contextlib.asynccontextmanager
    async def _status(self, req: Request) -> AsyncIterator[Status]:
        status = Status(self.bot, req, self.journal, self.pool)
        self.desk.watch(req.job_id, status)
        try:
            yield status
        finally:
            await status.close()
