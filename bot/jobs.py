"""One request's way through the bot: limits, cache, download, queue, worker, storage, reply.

Handlers only turn an update into a :class:`~bot.requests.Request`; everything
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
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace

from telegram import Bot
from telegram.error import BadRequest, Forbidden, NetworkError, TelegramError

from bot import metrics
from bot.access import Access, Limits, Refusal
from bot.i18n import t
from bot.fairqueue import Task
from bot.pool import Pool, PoolBusy, Reservation
from bot.replies import Drawn, Replies
from bot.requests import Failed, Request, Source, StoredRequestError, request_from_json, request_to_json
from bot.retry import retrying
from bot.status import Status
from bot.styles import Styles
from bot.worker_process import WorkOrder
from inference.errors import AnimebotError
from storage.cache import Cache, CachedResult, result_key
from storage.journal import Journal

log = logging.getLogger("animebot.jobs")

DOWNLOAD_LIMIT = 20 * 1024 * 1024  # the Bot API's getFile limit
MAX_ATTEMPTS = 3  # a job that was running during 3 crashes in a row is given up, with an apology


@dataclass
class _Job:
    """A request being answered now: its coroutine's task and its photos in the pool."""

    task: asyncio.Task[object]
    pool_tasks: list[Task] = field(default_factory=list)

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
                 fast_styles: dict[str, str] | None = None, fast_queue: int = 4) -> None:
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
        with contextlib.ExitStack() as held:
            async with self._turn(req.user_id):
                taken = await self._take_on(req, held)
            if isinstance(taken, Refusal):
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
        n = len(req.sources)
        parts = [s.message_id for s in req.sources if s.message_id is not None]
        album = (req.album, parts) if req.album else None  # all of them, even those the quota leaves out
        refusal = None
        if self.limits is not None:
            allowed, refusal = await self.limits.allowance(req.user_id, n)
            if 0 < allowed < n:  # an album over what is left of today's quota: draw what fits
                req, refusal = replace(req, sources=req.sources[:allowed], left_out=n - allowed), None
        needs = await self._needs(req)  # a press of a cached result's button draws nothing
        # From here to reserve() and _counted(), no await: other users' requests race for the same room.
        reservation = None
        if refusal is None:
            req, refusal = self._fit(req, needs)
            reservation = self.pool.reserve(sum(needs[:len(req.sources)])) if refusal is None else None
        if refusal is not None or reservation is None:
            refusal = refusal or Refusal("busy", {})
            await self.journal.create_job(req.job_id, req.chat_id, req.user_id, n, request_to_json(req),
                                          state="refused", outcome=refusal.code, album=album)
            log.info("job %s: refused (%s) for user %s", req.job_id, refusal.code, req.user_id)
            metrics.JOBS.labels("refused").inc()
            return refusal
        held.enter_context(reservation)
        held.enter_context(self._counted(req.user_id, reservation.places))
        if not await self.journal.create_job(req.job_id, req.chat_id, req.user_id, len(req.sources),
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
        first photos of an album (the rest counted in ``left_out``), or none (a refusal)."""
        need = sum(needs)
        if not need:
            return req, None
        user_room = need if self.access.is_admin(req.user_id) else self.per_user_limit - self._in_flight[req.user_id]
        room = min(user_room, self.pool.free_slots())
        if need <= room:
            return req, None
        why = "limit" if user_room <= room else "busy"
        if room <= 0:
            return req, (Refusal("per_user_limit", {"count": self.per_user_limit}) if why == "limit"
                         else Refusal("busy", {}))
        keep, taken = 0, 0
        while keep < len(needs) and (taken < room or not needs[keep]):
            taken += needs[keep]
            keep += 1
        left_out = req.left_out + len(req.sources) - keep
        return replace(req, sources=req.sources[:keep], left_out=left_out, left_out_why=why), None

    async def _needs(self, req: Request) -> list[bool]:
        """For each photo of the request, whether it must be drawn (neither cached nor being drawn)."""
        version = self.styles.version(req.style, req.settings)
        needs = []
        for src in req.sources:
            sha = await self._known_sha(src)
            key = result_key(sha, req.style, version) if sha else None
            needs.append(key is None or (key not in self._drawing and not await self.cache.has(key)))
        return needs

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
        with self._counted(req.user_id, len(req.sources)):
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
        self._jobs[req.job_id] = _Job(current)
        lite = self.fast_styles.get(req.style)
        if lite and not req.as_document and self.pool.waiting >= self.fast_queue:
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
            results = await asyncio.gather(*(self._result(req, src, status, reservation) for src in req.sources),
                                           return_exceptions=True)
            done = [r for r in results if isinstance(r, Drawn)]
            failed = [r for r in results if isinstance(r, Failed)]
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, Failed):
                    raise r
            sent = await self.replies.results(req, done) if done else []
            if failed and len(req.sources) == 1:
                await self.replies.say(req, failed[0].text(req.lang))
            elif failed:
                await self.replies.say(req, t(req.lang, "album_partial", failed=len(failed), count=len(req.sources),
                                              reason=failed[0].text(req.lang)))
            if req.left_out:
                await self.replies.say(req, self._left_out_text(req))
            codes = ",".join(sorted({f.code for f in failed}))
            drawn = sum(1 for d in done if not d.from_cache)
            await asyncio.shield(self.journal.finish_job(req.job_id, "done" if done else "failed", codes or None,
                                                         drawn=drawn))
            metrics.JOBS.labels("done" if done else "failed").inc()
        await self.replies.remember(sent)
        return f"{len(done)} sent ({len(done) - drawn} from cache), {len(failed)} failed" + \
            (f" ({codes})" if codes else "")

    def _left_out_text(self, req: Request) -> str:
        taken, count = len(req.sources), len(req.sources) + req.left_out
        if req.left_out_why == "limit":
            return t(req.lang, "limit_partial", taken=taken, count=count, left_out=req.left_out,
                     limit=self.per_user_limit)
        if req.left_out_why == "busy":
            return t(req.lang, "busy_partial", taken=taken, count=count, left_out=req.left_out)
        return t(req.lang, "quota_partial", left_out=req.left_out, count=self.limits.per_day if self.limits else 0)

    @contextlib.asynccontextmanager
    async def _status(self, req: Request) -> AsyncIterator[Status]:
        status = Status(self.bot, req, self.journal, self.pool)
        try:
            yield status
        finally:
            await status.close()

    # --- one source ---------------------------------------------------------------------

    async def _result(self, req: Request, src: Source, status: Status, reservation: Reservation | None) -> Drawn:
        """One source's result, from the cache, from the same photo being drawn now, or drawn.

        A new request has its queue places reserved (:meth:`run`); a
        recovered one was promised an answer, so it waits for room instead.
        """
        sha = await self._known_sha(src)
        version = self.styles.version(req.style, req.settings)
        if sha and (known := await self._known(result_key(sha, req.style, version))):
            return Drawn(src, sha, known, from_cache=True)
        data = await self._download(req, src)
        sha = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        if src.file_unique_id:
            await self.cache.remember_upload(src.file_unique_id, sha, src.file_id)
        key = result_key(sha, req.style, version)
        if known := await self._known(key):
            return Drawn(src, sha, known, from_cache=True)
        drawing = asyncio.get_running_loop().create_future()
        drawing.add_done_callback(lambda f: f.cancelled() or f.exception())  # followers may be gone
        self._drawing[key] = drawing
        try:
            stored, animated = await self._draw(req, key, sha, data, status, reservation)
            drawing.set_result(stored)
            return Drawn(src, sha, stored, from_cache=False, animated=animated)
        except asyncio.CancelledError:
            drawing.cancel()
            raise
        except BaseException as exc:
            drawing.set_exception(exc)
            raise
        finally:
            del self._drawing[key]

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

    async def _draw(self, req: Request, key: str, sha: str, data: bytes, status: Status,
                    reservation: Reservation | None) -> tuple[CachedResult, bool]:
        """Queue the photo on a worker, wait for it, and store the result; also whether it was animated."""
        order = WorkOrder(req.job_id, data, req.style, req.settings)
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
        finally:
            marking.cancel()
        drawing_s = time.monotonic() - task.queued_at - task.waited_s
        metrics.WAITING_S.observe(task.waited_s)
        metrics.DRAWING_S.observe(drawing_s)
        w, h = converted.output_size
        stored = await self.cache.put(key, sha, req.style, converted.data, w, h)
        await self.cache.bump("converted")
        await self.cache.count_photo(req.user_id)
        passes = sum(1 for f in converted.faces if f["pass"])
        self.pool.settle(task, passes)
        # "drawn in" is the round trip from leaving the queue to the result; "worker" is the part the worker
        # measured itself, so the difference is what the pool's transport costs (bench/scale_out.py).
        log.info("job %s: %s %dx%d -> %dx%d, waited %.2f s, drawn in %.2f s (worker %.2f s: model %.2f s, "
                 "%d face pass(es) %.2f s)", req.job_id, req.style, *converted.input_size, w, h, task.waited_s,
                 drawing_s, sum(converted.timings.values()), converted.timings["model_s"], passes,
                 converted.timings.get("faces_s", 0.0))
        return stored, converted.frames > 1

    async def _mark_running(self, job_id: str, task: Task) -> None:
        await task.started.wait()
        await self.journal.job_running(job_id)

    async def _download(self, req: Request, src: Source) -> bytes:
        """The photo's bytes; network trouble is retried, and what cannot be fetched is a Failed."""
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
