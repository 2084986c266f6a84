"""The Mini App's way of answering (bot/flow/answering.py): nothing is said in the chat, not even a
refusal; a result drawn for the page is kept in the buttons table, as if it had been shown in the
user's chat, which makes it a place in the page's list, and the page asks the desk for its id."""
from __future__ import annotations

from bot.flow.access import Refusal
from bot.flow.answering import Answer, Sent, Shape
from bot.flow.progress import Progress
from bot.flow.requests import Request
from bot.webapp.jobs import AppJobs


class _Unseen:
    """The page asks for the place in the queue itself (bot/webapp/jobs.py): nothing to close."""

    async def close(self) -> None:
        return None


class PageWay:
    takes_lite = False  # the page's user chose the picture by looking at it, and a lite style would not be it

    def __init__(self, desk: AppJobs) -> None:
        self.desk = desk

    def follow(self, req: Request, progress: Progress) -> _Unseen:
        return _Unseen()

    async def refuse(self, req: Request, refusal: Refusal) -> None:
        return None  # the desk heard it (as the onlooker), and the page shows it

    async def answer(self, req: Request, answer: Answer) -> Sent:
        """Kept: a drawing's result gets its id, even for a job nobody tracks any more (recovered after a
        restart, it still shows up in the page's list); tiles are looked up one by one, and get none."""
        if answer.shape != Shape.TILES and answer.done:
            await self.desk.kept(req, answer.done[0])
        return Sent(answered=bool(answer.done))

    async def settle(self, sent: Sent) -> None:
        return None

    async def apologise(self, req: Request) -> None:
        return None  # the page reads the job's end from the journal: "failed"
