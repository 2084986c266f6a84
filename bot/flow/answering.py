"""The seam between the flow and whoever answers: the chat, or the Mini App's page.

A kind of job (bot/flow/kinds/) says *what* the answer is: an :class:`Answer`
of some shape, its drawings and its sentences. A :class:`Way` of answering
says it *somewhere*: the chat sends messages (bot/chat/answers.py), the page
keeps the result for the page to show (bot/webapp/answers.py). The flow
picks the way a request names (``Request.answer``) and imports neither; a
new way is one class and one entry where the runner is built
(bot/root/state.py). An :class:`Onlooker` hears about every job without
answering any: the page follows the jobs it started, whichever way they
are answered.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import NoReturn, Protocol

from bot.flow.access import Refusal
from bot.flow.drawn import Drawn
from bot.flow.progress import Progress
from bot.flow.requests import Failed, Request

class Shape(Enum):
    """The shapes an answer takes; a way shows each in its own form. A closed set: a way of answering
    matches on it with ``assert_never`` last, so the type checker names any shape a way forgot."""

    PICTURES = "pictures"  # each drawing as itself: a photo or a clip, or an album of several photos
    STYLES = "styles"  # one photo in several styles: an album, each picture named by its style
    FILES = "files"  # each drawing as a file, uncompressed
    STICKER = "sticker"  # one drawing as a sticker, into the user's set
    PICTURE_AND_FILE = "picture+file"  # one drawing to look at, and as the file to keep (a profile picture)
    TILES = "tiles"  # each style's tile, kept for a page that shows them one by one
    LARGE = "large"  # one big drawing (HD): the file, and as a photo too where it fits Telegram's photo limits
    SHEET = "sheet"  # one picture of every style's tile, with the style menu (/style)
    MENU = "menu"  # the style menu alone, as text: a preview that could not be drawn


def unhandled(shape: NoReturn) -> NoReturn:
    """The last case of a way's match on :class:`Shape` (typing's ``assert_never``, which Python 3.10
    lacks): the type checker refuses a call that some shape can still reach."""
    raise AssertionError(f"no way to answer the shape {shape!r}")



@dataclass(frozen=True)
class Answer:
    """What a request's answer is: its ``shape``, the drawings it shows, and the sentences said after
    them (why some failed, what was left out). A :attr:`Shape.SHEET` carries the sheet and how many styles it misses."""

    shape: Shape
    done: Sequence[Drawn] = ()
    sentences: Sequence[str] = ()
    sheet: Drawn | None = None
    missing: int = 0


@dataclass
class Sent:
    """What a way did with an answer: whether the user has it now (the journal's "done"), and what the
    way keeps to settle after the journal is written (the chat: the messages, for their file ids)."""

    answered: bool
    messages: list[tuple[Drawn, object]] = field(default_factory=list)


class Following(Protocol):
    async def close(self) -> None: ...


class Way(Protocol):
    """A way of answering: where a request's progress, refusal and answer go."""

    #: whether a long queue may draw it in a lite style instead (the page's user chose the picture by
    #: looking at it, and a lite style would not be it)
    takes_lite: bool

    def follow(self, req: Request, progress: Progress) -> Following:
        """Show the request's progress until the returned object is closed."""

    async def refuse(self, req: Request, refusal: Refusal) -> None:
        """Say that the request was not taken on."""

    async def answer(self, req: Request, answer: Answer) -> Sent:
        """Give the user the answer; raises what Telegram raises."""

    async def settle(self, sent: Sent) -> None:
        """Bookkeeping once the journal says answered (never before: a crash must not lose the answer)."""

    async def apologise(self, req: Request) -> None:
        """One sentence that something went wrong on our side, for a request that cannot be answered."""


class Onlooker(Protocol):
    """Hears how every job goes, answering none (the page, for the jobs it started)."""

    def follows(self, job_id: str) -> bool:
        """Whether it says the job's refusal itself (so its way of answering must not)."""

    def watch(self, job_id: str, progress: Progress) -> None: ...

    def refused(self, req: Request, refusal: Refusal) -> None: ...

    def failed(self, req: Request, failed: Failed) -> None: ...

    def answered(self, req: Request) -> None: ...

    def ended(self, job_id: str) -> None: ...


