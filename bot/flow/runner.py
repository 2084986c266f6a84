"""One request's way through the bot, from a handler's :class:`~bot.flow.requests.Request` to its answer.

Handlers only turn an update into a Request; everything after that happens
here and in the parts this runner holds, in one direction: admission (limits,
queue places, the job written to the journal), results (cache, download,
drawing, storage), the answer, and recovery after a restart. What a request draws and what its
answer is, its kind's planner says (bot/flow/kinds/); where the answer goes,
its way of answering (bot/flow/answering.py: the chat, or the Mini App). The
runner tests for neither. A request the bot has accepted always gets an
answer: the anime image, or one short sentence saying why not.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from telegram.error import Forbidden, TelegramError

from bot.drawing.pool import Reservation
from bot.flow.access import Refusal
from bot.flow.admission import Admission, FlowSettings
from bot.flow.answering import Onlooker, Way
from bot.flow.drawn import Drawn
from bot.flow.equipment import Equipment
from bot.flow.kinds.registry import plan
from bot.flow.progress import Progress
from bot.flow.recovery import Recovery
from bot.flow.requests import Failed, Request
from bot.flow.errand import Errand, Fetched
from bot.flow.results import Results
from bot.flow.running import RunningJob, RunningJobs
from bot.flow.sheets import Sheets
from bot.service import metrics
from storage.database import Unwritable

log = logging.getLogger("animebot.jobs")


class JobRunner:
    """Runs requests against the cache and the worker pool and sends the replies.

    Every request is written to the journal before anything is sent about it,
    and marked answered right after its answer went out. Requests left open by
    a crash or a stop run again from :meth:`recover`.
    """

    def __init__(self, equipment: Equipment, ways: Mapping[str, Way], onlooker: Onlooker,
                 settings: FlowSettings) -> None:
        self.bot = equipment.bot
        self.pool = equipment.pool
        self.stores = equipment.stores
        self.journal = equipment.journal
        self.ways = ways  # by the name a request gives (Request.answer)
        self.onlooker = onlooker  # hears about every job (the Mini App's page, of those it started)
        self.settings = settings
        self.jobs = RunningJobs(equipment.pool)
        self.admission = Admission(equipment.journal, equipment.pool, settings, self.jobs.forgetting)
        self.results = Results(equipment, settings.clip_limits, self.admission)
        self.sheets = Sheets(equipment.stores, equipment.styles, self.results)
        self.recovery = Recovery(equipment, ways, self.jobs, self._resume)
        self._stopping = False
        # A crash between Telegram taking an answer and the journal recording it sends that answer again
        # after the restart: there is no asking Telegram what it got. Answers go out one at a time through
        # that window, so a crash repeats at most one of them, however many drawings end at once (two
        # workers finishing within milliseconds once put two answers in it). It costs an answer the
        # moments the one before takes to be recorded.
        self._answering = asyncio.Lock()

    async def run(self, req: Request) -> bool:
        """Take on and answer a new request; never raises for anything a user or Telegram can cause.
        Returns whether it was taken on (and so answered in its chat), not refused."""
        if self._stopping:  # its update stays unhandled, and is replayed at the next start
            raise asyncio.CancelledError
        req = replace(req, settings=plan(req).settings(req.settings))  # the kind's preset (a sticker's, an avatar's)
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
        self.onlooker.refused(req, refusal)
        self.onlooker.ended(req.job_id)
        if self.onlooker.follows(req.job_id):
            return  # the page asked, and says it
        way = self.ways[req.answer]
        if (instead := plan(req).refused(req, refusal)) is not None:
            await way.answer(req, instead)
        else:
            await way.refuse(req, refusal)

    async def _refused_for_block(self, req: Request) -> None:
        """A photo taken on before its user was blocked: answered with the block's sentence, never drawn."""
        with contextlib.suppress(TelegramError):
            await self._refuse(req, Refusal("blocked", {}))

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
        with self.admission.counted(req.user_id, sum(src.units for src, _ in req.items) if plan(req).units(req) else 0):
            await self._answer(req, recovered=True, reservation=None)

    async def _answer(self, req: Request, recovered: bool, reservation: Reservation | None) -> None:
        # A job whose user said /forget meanwhile is not answered: its row is gone, or about to go.
        if await self.journal.job_state(req.job_id) is None or req.user_id in self.jobs.forgetting:
            log.info("job %s: not answered; its user asked to be forgotten", req.job_id)
            return
        if self.admission.access.is_blocked(req.user_id):  # resumed, or taken on, as its user was being blocked
            log.info("job %s: not drawn; user %s is blocked", req.job_id, req.user_id)
            await self.journal.finish_job(req.job_id, "refused", "blocked")
            await self._refused_for_block(req)
            return
        started = time.monotonic()
        lite = self.settings.fast_styles.get(req.style)
        if lite and plan(req).lite and self.ways[req.answer].takes_lite and \
                self.pool.waiting >= self.settings.fast_queue:
            req = replace(req, style=lite, fast=True)
        with self.jobs.running(req.job_id, req.user_id) as job, self._told_onlooker(req):
            try:
                summary = await self._run(req, job, reservation)
                log.info("job %s: %s in %.2f s", req.job_id, summary, time.monotonic() - started)
                metrics.JOB_S.observe(time.monotonic() - started)
            except asyncio.CancelledError:
                if job.forgotten:  # /forget stopped it where it was; a stop's jobs are answered after the restart
                    metrics.JOBS.labels("cancelled").inc()
                if not job.blocked:
                    raise
                # /block stopped it: answered with the block's sentence though not drawn, and so done with, its
                # update too (handled, never replayed to say it again after a restart).
                await self._refused_for_block(req)
                _stop_cancelling()
            except Unwritable:  # the database logged why, once; the job stays open for the next start
                log.warning("job %s: not answered, apologised: the database refuses writes", req.job_id)
                with contextlib.suppress(TelegramError):
                    await self.ways[req.answer].apologise(req)
                metrics.JOBS.labels("failed").inc()
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
                    await self.ways[req.answer].apologise(req)
                await self.journal.finish_job(req.job_id, "failed", "internal")
                metrics.JOBS.labels("failed").inc()

    async def _run(self, req: Request, job: RunningJob, reservation: Reservation | None) -> str:
        """Answer the request and mark it answered in the journal; returns a summary for the log.

        The journal is written the moment the answer is out, before any
        bookkeeping, so that a crash can repeat an answer only if it lands in
        the few milliseconds between Telegram's reply and that commit.
        """
        kind, way = plan(req), self.ways[req.answer]
        async with self._progress(req, way) as progress:
            fetched: Fetched = {}
            bench = _Bench(self.sheets, self.settings, fetched)
            errand = Errand(req, job, progress, reservation, fetched)
            ready = await kind.ready(req, bench)  # a cached sheet: nothing to draw
            results = [] if ready is not None else await asyncio.gather(
                *(kind.draw(self.results, errand, src, style) for src, style in kind.items(req)),
                return_exceptions=True)
            done = [r for r in results if isinstance(r, Drawn)]
            failed = [r for r in results if isinstance(r, Failed)]
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, Failed):
                    raise r
            stills = [d for d in done if not d.source.clip]  # a preview sheet is of a photo, never of a clip
            if stills and kind.keeps_photo:  # before the answer: a /style right after it offers this photo
                await self.stores.users.set_last_photo(req.user_id, stills[-1].sha256, stills[-1].source.spoiler)
            if failed:
                self.onlooker.failed(req, failed[0])
            answer = ready or await kind.answer(req, done, failed, bench)
            codes = ",".join(sorted({f.code for f in failed}))
            async with self._answering:  # one answer at a time between being sent and being recorded
                sent = await way.answer(req, answer)
                job.answered = sent.answered
                try:
                    await asyncio.shield(self.journal.finish_job(req.job_id, "done" if sent.answered else "failed",
                                                                 codes or None, drawn=kind.drawn(req, done)))
                except Unwritable:  # answered all the same: no apology (the database logged why, once)
                    log.warning("job %s: answered, but the database refuses writes: still open in the journal, it "
                                "is answered again after a restart", req.job_id)
            metrics.JOBS.labels("done" if sent.answered else "cancelled" if codes == "cancelled" else "failed").inc()
        if sent.answered:
            self.onlooker.answered(req)
        with contextlib.suppress(Unwritable):  # what Telegram calls the files sent: a repeat uploads them again
            await way.settle(sent)
        return f"{len(done)} answered by {req.answer} ({sum(d.from_cache for d in done)} from cache), " \
            f"{len(failed)} failed" + (f" ({codes})" if codes else "") + \
            f" ({kind.name}{', a clip' if any(d.source.clip for d in done) else ''})"

    @contextlib.contextmanager
    def _told_onlooker(self, req: Request) -> Iterator[None]:
        """However the request ends, the onlooker hears that it did."""
        try:
            yield
        finally:
            self.onlooker.ended(req.job_id)

    @contextlib.asynccontextmanager
    async def _progress(self, req: Request, way: Way) -> AsyncIterator[Progress]:
        progress = Progress(self.pool)
        following = way.follow(req, progress)
        self.onlooker.watch(req.job_id, progress)
        try:
            yield progress
        finally:
            await following.close()


@dataclass
class _Bench:
    """What the runner lends a request's planner (bot/flow/kinds/base.py)."""

    sheets: Sheets
    settings: FlowSettings
    fetched: Fetched

    @property
    def per_user_limit(self) -> int:
        return self.settings.per_user_limit

    @property
    def per_day(self) -> int:
        return self.settings.limits.per_day if self.settings.limits else 0

    async def cached_sheet(self, req: Request) -> Drawn | None:
        return await self.sheets.cached(req)

    async def compose_sheet(self, req: Request, done: Sequence[Drawn], failed: Sequence[Failed]) -> Drawn | None:
        return await self.sheets.composed(req, done, failed, self.fetched)


def _stop_cancelling() -> None:
    """The current task goes on as if never cancelled: the cancel it caught was ours, and has been answered."""
    uncancel = getattr(asyncio.current_task(), "uncancel", None)  # Python 3.11 counts cancels; 3.10 keeps none
    if uncancel is not None:
        uncancel()
