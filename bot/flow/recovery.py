"""Restarts and stops: the jobs a crash or a stop left unanswered run again; a stop keeps the rest.

The journal is the record: a job is open until its answer went out. At
start every open job is resumed (its old status message removed), unless
its stored request cannot be read or it was interrupted too often, in
which case its user gets an apology instead of silence.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping

from telegram.error import TelegramError

from bot.flow.answering import Way
from bot.flow.equipment import Equipment
from bot.flow.kinds.registry import plan
from bot.flow.requests import Request, StoredRequestError, request_from_json
from bot.flow.retry import retrying
from bot.flow.running import RunningJobs
from bot.words.catalogue import t

log = logging.getLogger("animebot.jobs")

MAX_ATTEMPTS = 3  # a job that was running during 3 crashes in a row is given up, with an apology


class Recovery:
    """Resumes open jobs at start (through ``resume``), and stops the running ones at a stop."""

    def __init__(self, equipment: Equipment, ways: Mapping[str, Way], jobs: RunningJobs,
                 resume: Callable[[Request], Coroutine[object, object, None]]) -> None:
        self.bot = equipment.bot
        self.pool = equipment.pool
        self.journal = equipment.journal
        self.ways = ways
        self.jobs = jobs
        self.resume = resume
        self._resumed: set[asyncio.Task[None]] = set()

    async def recover(self) -> int:
        """Start every job a crash or a stop left unanswered; return how many."""
        rows = await self.journal.open_jobs()
        for row in rows:
            try:
                req = request_from_json(row.request)
                if req.answer not in self.ways:
                    raise StoredRequestError(f"no way of answering named {req.answer!r}")
                plan(req)
            except ValueError as exc:  # written by a version whose requests, kinds or ways we cannot read
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
                    await self.ways[req.answer].apologise(req)
                await self.journal.finish_job(req.job_id, "failed", "gave_up")
                continue
            log.info("job %s: resumed (attempt %d)", req.job_id, row.attempts)
            task = asyncio.create_task(self.resume(req), name=f"job-{req.job_id}")
            self._resumed.add(task)
            task.add_done_callback(self._resumed.discard)
        return len(rows)

    async def drain(self, wait_s: float) -> None:
        """Graceful stop: start no new photo, give those on a worker up to ``wait_s`` to be answered,
        and stop the rest where they are; they stay open in the journal for the next start."""
        self.pool.pause()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(not job.waiting() for job in self.jobs.all()):
            await asyncio.sleep(0.1)
        left = [job.task for job in self.jobs.all()] + list(self._resumed)
        for task in left:
            task.cancel()
        await asyncio.gather(*left, return_exceptions=True)
        if left:
            log.info("%d unanswered job(s) kept for the next start", len(left))
