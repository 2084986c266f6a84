"""The chat's way of answering (bot/flow/answering.py): a status message while the user waits, then
the answer as messages under theirs (bot/chat/replies.py), and a refusal as one sentence or an alert."""
from __future__ import annotations

from telegram import Bot

from bot.chat.replies import Replies
from bot.chat.status import Status
from bot.flow.access import Refusal
from bot.flow.answering import Answer, Sent
from bot.flow.progress import Progress
from bot.flow.requests import Request
from bot.words.catalogue import t
from storage.journal import Journal


class ChatWay:
    takes_lite = True  # a chat's user asked for "an anime picture": a lite style's, now, beats a long wait

    def __init__(self, bot: Bot, replies: Replies, journal: Journal) -> None:
        self.bot = bot
        self.replies = replies
        self.journal = journal  # the status message's id goes there, to be removed after a crash

    def follow(self, req: Request, progress: Progress) -> Status:
        return Status(self.bot, req, self.journal, progress)

    async def refuse(self, req: Request, refusal: Refusal) -> None:
        await self.replies.refuse(req, refusal)

    async def answer(self, req: Request, answer: Answer) -> Sent:
        messages = await self.replies.answer(req, answer)
        return Sent(answered=bool(messages), messages=list(messages))

    async def settle(self, sent: Sent) -> None:
        await self.replies.remember(sent.messages)

    async def apologise(self, req: Request) -> None:
        await self.replies.say(req, t(req.lang, "internal"))
