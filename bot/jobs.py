"""One request's way through the bot: cache, download, queue, worker, storage, reply.

Handlers only turn an update into a :class:`Request`; everything after that
happens here, in one direction. A request the bot has accepted always gets
an answer: the anime image, or one short sentence saying why not.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from telegram import Bot, InputMediaPhoto, Message, ReplyParameters
from telegram.constants import ChatAction
from telegram.error import BadRequest, TelegramError

from bot.i18n import error_text, t
from bot.keyboards import result_keyboard
from bot.pool import PoolBusy, Task, WorkerPool
from bot.styles import Styles
from inference.errors import AnimebotError
from inference.pipeline import ConvertSettings
from storage.cache import Cache, CachedResult, result_key

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


class JobRunner:
    """Runs requests against the cache and the worker pool and sends the replies."""

    def __init__(self, bot: Bot, pool: WorkerPool, cache: Cache, styles: Styles, per_user_jobs: int,
                 fast_styles: dict[str, str] | None = None, fast_queue: int = 4) -> None:
        self.bot = bot
        self.pool = pool
        self.cache = cache
        self.styles = styles
        self.per_user_jobs = per_user_jobs
        self.fast_styles = fast_styles or {}
        self.fast_queue = fast_queue
        self._in_flight: Counter[int] = Counter()

    async def run(self, req: Request) -> None:
        """Answer ``req``; never raises for anything a user or Telegram can cause."""
        started = time.monotonic()
        n = len(req.sources)
        if self._in_flight[req.user_id] and self._in_flight[req.user_id] + n > self.per_user_jobs:
            await self._say(req, t(req.lang, "per_user_cap", count=self.per_user_jobs))
            log.info("job %s: refused, user has %d in flight", req.job_id, self._in_flight[req.user_id])
            return
        self._in_flight[req.user_id] += n
        lite = self.fast_styles.get(req.style)
        if lite and not req.as_document and self.pool.waiting >= self.fast_queue:
            req = replace(req, style=lite, fast=True)
        try:
            outcome = await self._run(req)
            log.info("job %s: %s in %.2f s", req.job_id, outcome, time.monotonic() - started)
        except TelegramError as exc:
            log.warning("job %s: Telegram refused: %s: %s", req.job_id, exc.__class__.__name__, exc.message)
        except Exception as exc:  # a bug must not lose the photo silently
            log.error("job %s: failed: %s: %s", req.job_id, exc.__class__.__name__, exc)
            with contextlib.suppress(TelegramError):
                await self._say(req, t(req.lang, "internal"))
        finally:
            self._in_flight[req.user_id] -= n
            if self._in_flight[req.user_id] <= 0:
                del self._in_flight[req.user_id]

    async def _run(self, req: Request) -> str:
        async with self._status(req) as status:
            results = await asyncio.gather(*(self._result(req, src, status) for src in req.sources),
                                           return_exceptions=True)
            done = [r for r in results if isinstance(r, tuple)]
            failed = [r for r in results if isinstance(r, Failed)]
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, Failed):
                    raise r
            if done:
                await self._deliver(req, done)
        if failed and len(req.sources) == 1:
            await self._say(req, failed[0].text(req.lang))
        elif failed:
            await self._say(req, t(req.lang, "album_partial", failed=len(failed), count=len(req.sources),
                                   reason=failed[0].text(req.lang)))
        hits = sum(1 for _, _, hit in done if hit)
        codes = ",".join(sorted({f.code for f in failed}))
        return f"{len(done)} sent ({hits} from cache), {len(failed)} failed{' (' + codes + ')' if codes else ''}"

    # --- one source -----------------------------------------------------------

    async def _result(self, req: Request, src: Source, status: "_Status") -> tuple[str, CachedResult, bool]:
        """(content sha256, cached result, whether it was already cached) for one source."""
        sha = src.sha256 or (await self.cache.content_of(src.file_unique_id) if src.file_unique_id else None)
        version = self.styles.version(req.style, req.settings)
        if sha and (hit := await self.cache.get(result_key(sha, req.style, version))):
            await self.cache.bump("cache_hits")
            return sha, hit, True
        if self.pool.free_slots() < 1:
            raise Failed("busy")
        data = await self._download(src)
        sha = await asyncio.to_thread(lambda: hashlib.sha256(data).hexdigest())
        if src.file_unique_id:
            await self.cache.remember_upload(src.file_unique_id, sha, src.file_id)
        key = result_key(sha, req.style, version)
        if hit := await self.cache.get(key):
            await self.cache.bump("cache_hits")
            return sha, hit, True
        try:
            task = self.pool.submit(req.job_id, data, req.style, req.settings)
        except PoolBusy:
            raise Failed("busy") from None
        if req.chat_id > 0:  # private chats only: in a group it would be noise, and eat
            status.add(task)  # into Telegram's 20 messages a minute per group
        try:
            converted = await task.result
        except AnimebotError as exc:
            await self.cache.bump(f"error:{exc.code}")
            raise Failed(exc.code, exc.message) from None
        w, h = converted.output_size
        stored = await self.cache.put(key, sha, req.style, converted.data, w, h)
        await self.cache.bump("converted")
        await self.cache.count_photo(req.user_id)
        passes = sum(1 for f in converted.faces if f["pass"])
        log.info("job %s: %s %dx%d -> %dx%d, waited %.2f s, model %.2f s, %d face pass(es) %.2f s", req.job_id,
                 req.style, *converted.input_size, w, h, task.waited_s, converted.timings["model_s"], passes,
                 converted.timings.get("faces_s", 0.0))
        return sha, stored, False

    async def _download(self, src: Source) -> bytes:
        if src.file_size and src.file_size > DOWNLOAD_LIMIT:
            raise Failed("file_too_big", size_mb=src.file_size / 2**20)
        try:
            file = await self.bot.get_file(src.file_id)
            if file.file_size and file.file_size > DOWNLOAD_LIMIT:
                raise Failed("file_too_big", size_mb=file.file_size / 2**20)
            return bytes(await file.download_as_bytearray())
        except BadRequest as exc:
            if "too big" in exc.message.lower():
                raise Failed("file_too_big", size_mb=(src.file_size or DOWNLOAD_LIMIT) / 2**20) from None
            raise

    # --- replies ----------------------------------------------------------------

    async def _deliver(self, req: Request, done: Sequence[tuple[str, CachedResult, bool]]) -> None:
        reply = _reply_to(req)
        if req.as_document:
            for _, res, _ in done:
                name = f"anime-{req.style}{res.path.suffix}"
                msg = await self._send_or_upload(res.document_file_id, res, lambda doc: self.bot.send_document(
                    req.chat_id, doc, filename=name, reply_parameters=reply))
                if msg.document and msg.document.file_id != res.document_file_id:
                    await self.cache.set_file_ids(res.key, document_file_id=msg.document.file_id)
            return
        if len(done) == 1:
            sha, res, _ = done[0]
            markup = result_keyboard(self.styles, req.style, sha, req.lang)
            caption = t(req.lang, "fast_mode") if req.fast else None
            msg = await self._send_or_upload(res.photo_file_id, res, lambda photo: self.bot.send_photo(
                req.chat_id, photo, caption=caption, reply_parameters=reply, reply_markup=markup))
            await self._remember_sent(res, msg)
            return
        caption = t(req.lang, "fast_mode") if req.fast else None
        media = [InputMediaPhoto(res.photo_file_id or await asyncio.to_thread(res.path.read_bytes),
                                 caption=caption if i == 0 else None) for i, (_, res, _) in enumerate(done)]
        try:
            msgs = await self.bot.send_media_group(req.chat_id, media, reply_parameters=reply)
        except BadRequest:  # a remembered file_id Telegram no longer knows: upload them all
            media = [InputMediaPhoto(await asyncio.to_thread(res.path.read_bytes)) for _, res, _ in done]
            msgs = await self.bot.send_media_group(req.chat_id, media, reply_parameters=reply)
        for (_, res, _), msg in zip(done, msgs):
            await self._remember_sent(res, msg)

    @staticmethod
    async def _send_or_upload(file_id: str | None, res: CachedResult,
                              send: Callable[[str | bytes], Awaitable[Message]]) -> Message:
        """Send by the remembered file_id when there is one, uploading if Telegram forgot it."""
        if file_id:
            try:
                return await send(file_id)
            except BadRequest as exc:
                log.info("file_id of %s refused (%s); uploading", res.key[:16], exc.message)
        return await send(await asyncio.to_thread(res.path.read_bytes))

    async def _remember_sent(self, res: CachedResult, msg: Message) -> None:
        if msg.photo and msg.photo[-1].file_id != res.photo_file_id:
            await self.cache.set_file_ids(res.key, photo_file_id=msg.photo[-1].file_id)

    async def _say(self, req: Request, text: str) -> None:
        await self.bot.send_message(req.chat_id, text, reply_parameters=_reply_to(req))

    @contextlib.asynccontextmanager
    async def _status(self, req: Request) -> AsyncIterator["_Status"]:
        status = _Status(self.bot, req)
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

    def __init__(self, bot: Bot, req: Request) -> None:
        self.bot = bot
        self.req = req
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
            return await self.bot.send_message(req.chat_id, self._text(), reply_parameters=_reply_to(req))
        except TelegramError:
            return None

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
