"""What became of each request the Mini App made: the page asks, the runner answers here, the page polls.

A request from the page is an ordinary job: written to the journal, queued
fairly, drawn, cached, finished by a restart. Only what the page needs to
show while it waits lives here, in memory: the place in the queue, the new
result's id, or the one sentence of why not. After a restart the journal
still says how a job ended (bot/webapp/api.py reads it there).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from bot.flow.access import Refusal
from bot.flow.drawn import Drawn
from bot.flow.progress import Progress
from bot.flow.requests import Failed, Request
from bot.words.catalogue import known, t
from inference.pipeline import ConvertSettings
from storage.buttons import ResultButtons, ShownResult

KEEP_S = 900.0  # an ended job is asked about for seconds; kept a quarter of an hour, then forgotten


def page_sentence(lang: str, code: str, values: dict[str, object]) -> str:
    """Why a request was refused, as the page says it: in the page's words where the chat's would not fit
    (nobody "sent a photo" by pressing Keep)."""
    return t(lang, f"webapp_{code}" if known(f"webapp_{code}") else code, **values)


@dataclass
class AppJob:
    user_id: int
    lang: str
    progress: Progress | None = None  # while it is being answered: its place in the queue
    result: str | None = None  # ended well: the new result's id ("" when the job makes none: a send, style tiles)
    error: str | None = None  # ended badly: the sentence the page shows
    ended_at: float | None = None

    @property
    def state(self) -> str:
        if self.ended_at is not None:
            return "failed" if self.error is not None else "done"
        if self.progress is not None and self.progress.tickets and self.progress.ahead() is None:
            return "drawing"
        return "queued"


class AppJobs:
    """The jobs the page started, by job id: the runner's onlooker (bot/flow/answering.py). It hears about
    every request, and keeps only those it was asked to :meth:`track`."""

    def __init__(self, buttons: ResultButtons[ConvertSettings]) -> None:
        self.buttons = buttons
        self._jobs: dict[str, AppJob] = {}

    def track(self, job_id: str, user_id: int, lang: str) -> None:
        now = time.monotonic()
        for old in [k for k, job in self._jobs.items() if job.ended_at is not None and now - job.ended_at > KEEP_S]:
            del self._jobs[old]
        self._jobs[job_id] = AppJob(user_id, lang)

    def follows(self, job_id: str) -> bool:
        """Whether the page started this job (and so says its refusal: not the chat)."""
        return job_id in self._jobs

    def get(self, job_id: str, user_id: int) -> AppJob | None:
        """The job, if ``user_id`` started it; nobody else's."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.user_id == user_id else None

    def watch(self, job_id: str, progress: Progress) -> None:
        if (job := self._jobs.get(job_id)) is not None:
            job.progress = progress

    async def kept(self, req: Request, d: Drawn) -> None:
        """A drawing the page asked for was kept (bot/webapp/answers.py): its result's id, which is also its
        place in the page's list (the buttons table, as if it had been shown in the user's chat)."""
        result = await self.buttons.id_for(ShownResult(req.user_id, d.sha256, d.style, req.settings,
                                                       d.source.spoiler))
        if (job := self._jobs.get(req.job_id)) is not None:
            job.result = result

    def answered(self, req: Request) -> None:
        """The request was answered; one that made no result for the page (a send, tiles) has none to show."""
        if (job := self._jobs.get(req.job_id)) is not None and job.result is None:
            job.result = ""

    def refused(self, req: Request, refusal: Refusal) -> None:
        self.say(req.job_id, page_sentence(req.lang, refusal.code, refusal.values))

    def failed(self, req: Request, failed: Failed) -> None:
        self.say(req.job_id, failed.text(req.lang))

    def say(self, job_id: str, sentence: str) -> None:
        """The sentence the page shows for the job, unless it has one already."""
        if (job := self._jobs.get(job_id)) is not None and job.error is None:
            job.error = sentence

    def ended(self, job_id: str) -> None:
        """The runner is done with it; a job that got neither a result nor a sentence is said to have failed."""
        if (job := self._jobs.get(job_id)) is None:
            return
        job.progress = None
        job.ended_at = time.monotonic()
        if job.result is None and job.error is None:
            job.error = t(job.lang, "internal")
