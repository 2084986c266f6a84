"""One request's way through the bot: cache, download, queue, worker, storage, reply.

Handlers only turn an update into a :class:`Request`; everything after that
happens here, in one direction. A request the bot has accepted always gets
an answer: the anime image, or one short sentence saying why not.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace

from telegram import Bot, InputMediaPhoto, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, Forbidden, NetworkError, TelegramError

from bot.access import Limits, Refusal
from bot.i18n import error_text, t
from bot.keyboards import result_keyboard
from bot.pool import PoolBusy, Task, WorkerPool
from bot.retry import retrying
from bot.styles import Styles
from inference.errors import AnimebotError
from inference.imageio import ImageLimits
from inference.pipeline import ConvertSettings
from storage.cache import Cache, CachedResult, result_key
from storage.journal import Journal

log = logging.getLogger("animebot.jobs")

DOWNLOAD_LIMIT = 20 * 1024 * 1024  # the Bot API's getFile limit
CHAT_ACTION_EVERY_S = 4.5  # Telegram shows an action for 5 s


@dataclass(frozen=True)
class Source:
    """A photo or image file someone asked about. ``sha256`` is known for re-renders."""

    file_id: str
    file_unique_id: str | None = None
    file_size: int | None = None
    sha256: str | None = None


@dataclass(frozen=True)
class Request:
    job_id: str
    chat_id: int
    user_id: int
    reply_to: int | None
    lang: str
    style: str
    sources: tuple[Source, ...]
    settings: ConvertSettings
    as_document: bool = False
    fast: bool = False  # drawn with a lite style because the queue was long


class Failed(Exception):
    """A source that will not become a result; ``code`` picks the user's sentence."""

    def __init__(self, code: str, message: str = "", **values: object) -> None:
        super().__init__(code)
        self.code = code
        self.message = message
        self.values = values

    def text(self, lang: str) -> str:
        if self.values:
            return t(lang, self.code, **self.values)
        return error_text(lang, self.code, self.message)


MAX_ATTEMPTS = 3  # a job that was running during 3 crashes in a row is given up, with an apology


def request_to_json(req: Request) -> str:
    """The request as the journal stores it, so it can run again after a restart."""
    return json.dumps(asdict(req))


def request_from_json(text: str) -> Request:
    raw = json.loads(text)
    settings = raw.pop("settings")
    settings["limits"] = ImageLimits(**settings["limits"])
    return Request(**{**raw, "sources": tuple(Source(**s) for s in raw["sources"]),
                      "settings": ConvertSettings(**settings)})


@dataclass
class _Job:
    """A request being answered now: its coroutine's task and its photos in the pool."""

    task: asyncio.Task[object]
    pool_tasks: list[Task] = field(default_factory=list)
    animated: bool = False  # a photo of it was an animation, of which only the first frame is drawn

    def waiting(self) -> bool:
        """Whether a photo of it is still queued, not yet on a worker."""
        return any(not t.started.is_set() and not t.result.done() for t in self.pool_tasks)


class JobRunner:
    """Runs requests against the cache and the worker pool and sends the replies.

    Every request is written to the journal before anything is sent about it,
    and marked answered right after its answer went out. Requests left open by
    a crash or a stop run again from :meth:`recover`.
    """

    def __init__(self, bot: Bot, pool: WorkerPool, cache: Cache, journal: Journal, styles: Styles,
                 per_user_jobs: int, limits: Limits | None = None, fast_styles: dict[str, str] | None = None,
                 fast_queue: int = 4) -> None:
        self.bot = bot
        self.pool = pool
        self.cache = cache
        self.journal = journal
        self.styles = styles
        self.per_user_jobs = per_user_jobs
        self.limits = limits
        self.fast_styles = fast_styles or {}
        self.fast_queue = fast_queue
        self._in_flight: Counter[int] = Counter()
        self._jobs: dict[str, _Job] = {}
        self._recovered: set[asyncio.Task[None]] = set()
        self._drawing: dict[str, asyncio.Future[CachedResult]] = {}  # result key -> its drawing, shared
        self._stopping = False

    async def run(self, req: Request) -> None:
        """Take on and answer a new request; never raises for anything a user or Telegram can cause."""
        if self._stopping:  # its update stays unhandled, and is replayed at the next start
            raise asyncio.CancelledError
        n = len(req.sources)
        over_cap = bool(self._in_flight[req.user_id]) and self._in_flight[req.user_id] + n > self.per_user_jobs
        with self._reserved(req.user_id, 0 if over_cap else n):  # at once: a user's other photos race us
            if await self.journal.job_state(req.job_id) is not None:
                log.info("job %s: already taken on; its update came again", req.job_id)
                return
            refusal = Refusal("per_user_cap", {"count": self.per_user_jobs}) if over_cap else None
            if refusal is None and self.limits is not None:
                refusal = await self.limits.refusal(req.user_id, n)
            if refusal is not None:
                await self.journal.create_job(req.job_id, req.chat_id, req.user_id, n, request_to_json(req),
                                              state="refused", outcome=refusal.code)
                log.info("job %s: refused (%s) for user %s", req.job_id, refusal.code, req.user_id)
                with contextlib.suppress(TelegramError):
                    await self._say(req, t(req.lang, refusal.code, **refusal.values))
                return
            if await self.journal.create_job(req.job_id, req.chat_id, req.user_id, n, request_to_json(req)):
                await self._answer(req, recovered=False)

    @contextlib.contextmanager
    def _reserved(self, user_id: int, photos: int) -> Iterator[None]:
        """Count ``photos`` as the user's in flight while the block runs (for the per-user cap)."""
        self._in_flight[user_id] += photos
        try:
            yield
        finally:
            self._in_flight[user_id] -= photos
            if self._in_flight[user_id] <= 0:
                del self._in_flight[user_id]

    async def _resume(self, req: Request) -> None:
        with self._reserved(req.user_id, len(req.sources)):
            await self._answer(req, recovered=True)

    async def recover(self) -> int:
        """Start every job a crash or a stop left unanswered; return how many."""
        rows = await self.journal.open_jobs()
        for row in rows:
            req = request_from_json(row.request)
            if row.status_message_id is not None:  # "in queue, #3" from before the restart
                with contextlib.suppress(TelegramError):
                    await self.bot.delete_message(req.chat_id, row.status_message_id)
            if row.attempts > MAX_ATTEMPTS:
                log.error("job %s: given up after %d interrupted attempts", req.job_id, row.attempts - 1)
                with contextlib.suppress(TelegramError):
                    await self._say(req, t(req.lang, "internal"))
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

    async def _answer(self, req: Request, recovered: bool) -> None:
        started = time.monotonic()
        current = asyncio.current_task()
        assert current is not None
        self._jobs[req.job_id] = _Job(current)
        lite = self.fast_styles.get(req.style)
        if lite and not req.as_document and self.pool.waiting >= self.fast_queue:
            req = replace(req, style=lite, fast=True)
        try:
            summary = await self._run(req, recovered)
            log.info("job %s: %s in %.2f s", req.job_id, summary, time.monotonic() - started)
        except Forbidden as exc:
            log.warning("job %s: cannot answer, Telegram says %s", req.job_id, exc.message)
            await self.journal.finish_job(req.job_id, "failed", "forbidden")
        except TelegramError as exc:
            log.warning("job %s: Telegram refused: %s: %s", req.job_id, exc.__class__.__name__, exc.message)
            await self.journal.finish_job(req.job_id, "failed", f"telegram:{exc.__class__.__name__}")
        except Exception as exc:  # a bug must not lose the photo silently
            log.error("job %s: failed: %s: %s", req.job_id, exc.__class__.__name__, exc)
            with contextlib.suppress(TelegramError):
                await self._say(req, t(req.lang, "internal"))
            await self.journal.finish_job(req.job_id, "failed", "internal")
        finally:
            del self._jobs[req.job_id]

    async def _run(self, req: Request, recovered: bool) -> str:
        """Answer the request and mark it answered in the journal; returns a summary for the log.

        The journal is written the moment the answer is out, before any
        bookkeeping, so that a crash can repeat an answer only if it lands in
        the few milliseconds between Telegram's reply and that commit.
        """
        async with self._status(req) as status:
            results = await asyncio.gather(*(self._result(req, src, status, recovered) for src in req.sources),
                                           return_exceptions=True)
            done = [r for r in results if isinstance(r, tuple)]
            failed = [r for r in results if isinstance(r, Failed)]
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, Failed):
                    raise r
            sent = await self._deliver(req, done) if done else []
            if failed and len(req.sources) == 1:
                await self._say(req, failed[0].text(req.lang))
            elif failed:
                await self._say(req, t(req.lang, "album_partial", failed=len(failed), count=len(req.sources),
                                       reason=failed[0].text(req.lang)))
            codes = ",".join(sorted({f.code for f in failed}))
            await asyncio.shield(self.journal.finish_job(req.job_id, "done" if done else "failed", codes or None))
        for res, msg in sent:
            await self._remember_sent(res, msg)
        hits = sum(1 for _, _, hit in done if hit)
        return f"{len(done)} sent ({hits} from cache), {len(failed)} failed{' (' + codes + ')' if codes else ''}"

    # --- one source -----------------------------------------------------------

    async def _result(self, req: Request, src: Source, status: "_Status",
                      recovered: bool) -> tuple[str, CachedResult, bool]:
        """(content sha256, cached result, whether it was already cached) for one source.

        A new request meeting a full queue is told "busy" at once; a recovered
        one was promised an answer, so it waits for room instead.
        """
        sha = src.sha256 or (await self.cache.content_of(src.file_unique_id) if src.file_unique_id else None)
        version = self.styles.version(req.style, req.settings)
        if sha and (known := await self._known(result_key(sha, req.style, version))):
            return sha, known, True
        if self.pool.free_slots() < 1 and not recovered:
            raise Failed("busy")
        data = await self._download(req, src)
        sha = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        if src.file_unique_id:
            await self.cache.remember_upload(src.file_unique_id, sha, src.file_id)
        key = result_key(sha, req.style, version)
        if known := await self._known(key):
            return sha, known, True
        drawing = asyncio.get_running_loop().create_future()
        drawing.add_done_callback(lambda f: f.cancelled() or f.exception())  # followers may be gone
        self._drawing[key] = drawing
        try:
            stored = await self._draw(req, key, sha, data, status, recovered)
            drawing.set_result(stored)
            return sha, stored, False
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

    async def _draw(self, req: Request, key: str, sha: str, data: bytes, status: "_Status",
                    recovered: bool) -> CachedResult:
        """Queue the photo on a worker, wait for it, and store the result."""
        try:
            if recovered:
                task = await self.pool.submit_when_room(req.job_id, data, req.style, req.settings)
            else:
                task = self.pool.submit(req.job_id, data, req.style, req.settings)
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
        w, h = converted.output_size
        if converted.frames > 1:
            self._jobs[req.job_id].animated = True
        stored = await self.cache.put(key, sha, req.style, converted.data, w, h)
        await self.cache.bump("converted")
        await self.cache.count_photo(req.user_id)
        passes = sum(1 for f in converted.faces if f["pass"])
        log.info("job %s: %s %dx%d -> %dx%d, waited %.2f s, model %.2f s, %d face pass(es) %.2f s", req.job_id,
                 req.style, *converted.input_size, w, h, task.waited_s, converted.timings["model_s"], passes,
                 converted.timings.get("faces_s", 0.0))
        return stored

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
            return bytes(await retrying(f"job {req.job_id}: download", file.download_as_bytearray))
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                raise Failed("file_too_big", size_mb=(src.file_size or DOWNLOAD_LIMIT) / 2**20) from None
            log.warning("job %s: getFile refused: %s", req.job_id, exc.message)
            raise Failed("download_failed") from None
        except NetworkError as exc:
            log.warning("job %s: download failed: %s", req.job_id, exc.message)
            raise Failed("download_failed") from None

    # --- replies ----------------------------------------------------------------

    async def _deliver(self, req: Request,
                       done: Sequence[tuple[str, CachedResult, bool]]) -> list[tuple[CachedResult, Message]]:
        """Send the results; returns each with the message that carried it."""
        reply = _reply_to(req)
        if req.as_document:
            sent = []
            for _, res, _ in done:
                name = f"anime-{req.style}{res.path.suffix}"
                msg = await self._send_or_upload(req, res.document_file_id, res, lambda doc: self.bot.send_document(
                    req.chat_id, doc, filename=name, reply_parameters=reply))
                sent.append((res, msg))
            return sent
        notes = ([t(req.lang, "fast_mode")] if req.fast else []) + \
            ([t(req.lang, "first_frame")] if self._jobs[req.job_id].animated else [])
        caption = "\n".join(notes) or None
        if len(done) == 1:
            sha, res, _ = done[0]
            markup = result_keyboard(self.styles, req.style, sha, req.lang)
            msg = await self._send_or_upload(req, res.photo_file_id, res, lambda photo: self.bot.send_photo(
                req.chat_id, photo, caption=caption, reply_parameters=reply, reply_markup=markup))
            return [(res, msg)]
        media = [InputMediaPhoto(res.photo_file_id or await asyncio.to_thread(res.path.read_bytes),
                                 caption=caption if i == 0 else None) for i, (_, res, _) in enumerate(done)]
        what = f"job {req.job_id}: sendMediaGroup"
        try:
            msgs = await retrying(what, lambda: self.bot.send_media_group(req.chat_id, media, reply_parameters=reply))
        except BadRequest:  # a remembered file_id Telegram no longer knows: upload them all
            media = [InputMediaPhoto(await asyncio.to_thread(res.path.read_bytes)) for _, res, _ in done]
            msgs = await retrying(what, lambda: self.bot.send_media_group(req.chat_id, media, reply_parameters=reply))
        return [(res, msg) for (_, res, _), msg in zip(done, msgs)]

    @staticmethod
    async def _send_or_upload(req: Request, file_id: str | None, res: CachedResult,
                              send: Callable[[str | bytes], Awaitable[Message]]) -> Message:
        """Send by the remembered file_id when there is one, uploading if Telegram forgot it."""
        what = f"job {req.job_id}: send"
        if file_id:
            try:
                return await retrying(what, lambda: send(file_id))
            except BadRequest as exc:
                log.info("job %s: file_id of %s refused (%s); uploading", req.job_id, res.key[:16], exc.message)
        data = await asyncio.to_thread(res.path.read_bytes)
        return await retrying(what, lambda: send(data))

    async def _remember_sent(self, res: CachedResult, msg: Message) -> None:
        """Keep what Telegram calls our upload, so a repeat is sent by reference."""
        if msg.photo and msg.photo[-1].file_id != res.photo_file_id:
            await self.cache.set_file_ids(res.key, photo_file_id=msg.photo[-1].file_id)
        if msg.document and msg.document.file_id != res.document_file_id:
            await self.cache.set_file_ids(res.key, document_file_id=msg.document.file_id)

    async def _say(self, req: Request, text: str) -> None:
        await retrying(f"job {req.job_id}: sendMessage",
                       lambda: self.bot.send_message(req.chat_id, text, reply_parameters=_reply_to(req)))

    @contextlib.asynccontextmanager
    async def _status(self, req: Request) -> AsyncIterator["_Status"]:
        status = _Status(self.bot, req, self.journal)
        try:
            yield status
        finally:
            await status.close()


class _Status:
    """The "in queue, #3" / "drawing…" message and the upload_photo chat action.

    Nothing is shown for answers that come straight from the cache: the
    message appears once a task is queued and is deleted once the request is
    answered. Sending it is never cancelled half way, so no status message
    is left behind when a job finishes while it is still being sent.
    """

    def __init__(self, bot: Bot, req: Request, journal: Journal) -> None:
        self.bot = bot
        self.req = req
        self.journal = journal
        self.tasks: list[Task] = []
        self._sending: asyncio.Task[Message | None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    def add(self, task: Task) -> None:
        self.tasks.append(task)
        if self._sending is None:
            self._sending = asyncio.create_task(self._send_first())
            self._watcher = asyncio.create_task(self._watch(self._sending))

    def _drawing(self) -> bool:
        return any(task.started.is_set() for task in self.tasks)

    def _text(self) -> str:
        lang, count = self.req.lang, len(self.req.sources)
        if count > 1:
            return t(lang, "album_drawing" if self._drawing() else "album_queued", count=count)
        return t(lang, "drawing") if self._drawing() else t(lang, "queued", position=self.tasks[0].position)

    async def _send_first(self) -> Message | None:
        await asyncio.sleep(0)  # let the other photos of an album queue first
        req = self.req
        try:
            message = await self.bot.send_message(req.chat_id, self._text(), reply_parameters=_reply_to(req))
        except TelegramError:
            return None
        await self.journal.set_status_message(req.job_id, message.message_id)  # removed after a crash
        return message

    async def _watch(self, sending: "asyncio.Task[Message | None]") -> None:
        """Switch the status to "drawing…", then keep the chat action alive until cancelled."""
        message = await asyncio.shield(sending)
        if message is None:
            return
        with contextlib.suppress(TelegramError):
            while not self._drawing():
                await asyncio.sleep(0.2)
            if self._text() != message.text:
                await self.bot.edit_message_text(self._text(), self.req.chat_id, message.message_id)
            while True:
                await self.bot.send_chat_action(self.req.chat_id, ChatAction.UPLOAD_PHOTO)
                await asyncio.sleep(CHAT_ACTION_EVERY_S)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        if self._sending is not None and (message := await self._sending) is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.req.chat_id, message.message_id)


def _reply_to(req: Request) -> ReplyParameters | None:
    """Thread a reply to the user's message, still answering if they deleted it."""
    return ReplyParameters(req.reply_to, allow_sending_without_reply=True) if req.reply_to else None
