"""The jobs being answered right now: each one's coroutine and its photos in the pool.

Kept apart so that the Cancel button, the drawing of each photo and the
graceful stop all see the same table.
"""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import Pool


@dataclass
class RunningJob:
    """A request being answered now: its coroutine's task and its photos in the pool."""

    task: asyncio.Task[object]
    user_id: int
    tickets: list[Ticket] = field(default_factory=list)
    cancelled: bool = False  # its user pressed Cancel
    forgotten: bool = False  # stopped by its user's /forget or /block: counted as cancelled, never drawn
    blocked: bool = False  # stopped by /block: answered with the block's sentence instead (bot/flow/blocking.py)
    answered: bool = False  # its answer is out: stopping it now would take nothing back, only its bookkeeping

    def waiting(self) -> bool:
        """Whether a photo of it is still queued, not yet on a worker."""
        return any(not t.started.is_set() and not t.result.done() for t in self.tickets)


class RunningJobs:
    """Every job being answered, by job id."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self._jobs: dict[str, RunningJob] = {}
        # Users being forgotten (/forget): none of their jobs starts until that is done.
        self.forgetting: set[int] = set()

    @contextlib.contextmanager
    def running(self, job_id: str, user_id: int) -> Iterator[RunningJob]:
        """The current task answers ``job_id`` while the block runs."""
        current = asyncio.current_task()
        assert current is not None, "a job is answered by a task of its own"
        job = self._jobs[job_id] = RunningJob(current, user_id)
        try:
            yield job
        finally:
            del self._jobs[job_id]

    def all(self) -> list[RunningJob]:
        return list(self._jobs.values())

    async def stop_all_of(self, user_id: int, blocked: bool = False) -> list[str]:
        """/forget and /block: stop every job of ``user_id`` where it is (waiting, downloading, drawing) and
        wait until each has ended; return the ids of those stopped. Their photos leave the pool with them. A
        job whose answer is already out is not stopped (its user has their drawing), only waited for."""
        jobs = {job_id: job for job_id, job in self._jobs.items() if job.user_id == user_id}
        for job in jobs.values():
            if not job.answered:
                job.forgotten, job.blocked = True, blocked
                job.task.cancel()
        await asyncio.gather(*(job.task for job in jobs.values()), return_exceptions=True)
        return [job_id for job_id, job in jobs.items() if job.forgotten]

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
        if all(t.result.done() for t in job.tickets):
            return "job_gone"
        job.cancelled = True
        for ticket in job.tickets:
            self.pool.cancel(ticket)
        return "cancelling"
