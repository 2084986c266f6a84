"""What the bot was asked to do, and how the journal keeps it across restarts and upgrades.

A :class:`Request` is written to the journal (as versioned JSON) before the
user hears anything about it, so that a crash or a stop can run it again.
A newer animebot must read what an older one wrote: unknown fields are
ignored, missing optional ones take their defaults, and a row that still
cannot be read is a :class:`StoredRequestError`, answered with an apology
rather than crashing the start.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

from bot.words.catalogue import error_text, t
from inference.pipeline import ConvertSettings
from storage.codec import decode, encode

# 1: before versioning (no "v"); 2: spoilers, albums, button queries, left_out;
# 3: styles (one photo in several styles), preview sheets, the sample photo as a source
# 4: clips (a source's kind and length); 5: where the answer goes (the chat, or the Mini App)
REQUEST_VERSION = 5
CLIP_KINDS = ("animation", "video", "video_note")


@dataclass(frozen=True)
class Source:
    """A photo or image file someone asked about. ``sha256`` is known for redraws."""

    file_id: str
    file_unique_id: str | None = None
    file_size: int | None = None
    sha256: str | None = None
    message_id: int | None = None  # the album message it came in
    spoiler: bool = False  # sent with a spoiler: the result is too
    sample: bool = False  # the registry's sample photo, read from the model store (``file_id`` is empty)
    # "photo" (any still image), or a clip: "animation" (a GIF, silent), "video" or "video_note" (round),
    # which is also how the result is sent back. ``seconds``: the part of a clip that will be drawn.
    kind: str = "photo"
    seconds: float | None = None

    @property
    def clip(self) -> bool:
        return self.kind in CLIP_KINDS

    @property
    def units(self) -> int:
        """What it counts as against the waiting limit and the daily quota: a photo is one, a clip
        one per second drawn (a second of clip costs about three photos to draw; docs/clips.md).
        A clip sent as a file, whose length Telegram does not give, counts one until it is drawn."""
        return max(1, math.ceil(self.seconds or 1)) if self.clip else 1


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
    album: str | None = None  # the media_group_id of an album's parts
    query_id: str | None = None  # the button press that asked, answered with any refusal
    left_out: int = 0  # album photos not taken on: over today's quota, the user's waiting limit, or the queue
    left_out_why: str = "quota"  # which of those: quota, limit or busy
    # Draw the photo in each of these styles instead of ``style`` alone ("All styles": one photo, and
    # ``style`` is the first of them). Empty: ``style`` only.
    styles: tuple[str, ...] = ()
    # One picture of the photo in every style of ``styles`` (/style's previews), not a result each;
    # ``style`` is then the user's own style, which the menu under the picture marks.
    preview: bool = False
    # Where the answer goes: "chat" (sent, as ever), or "app": asked for in the Mini App (bot/webapp/), which
    # shows it; the result is stored and held, and nothing is said in the chat, not even a refusal.
    deliver: str = "chat"

    @property
    def drawn_styles(self) -> tuple[str, ...]:
        return self.styles or (self.style,)

    @property
    def items(self) -> list[tuple[Source, str]]:
        """Every drawing the request asks for: each photo in each style (photos and styles are never both
        more than one)."""
        return [(src, style) for src in self.sources for style in self.drawn_styles]

    @property
    def units(self) -> int:
        """What it counts as against the rate limit and the daily quota: a photo per drawing (a clip per
        second, :attr:`Source.units`), but a preview sheet is one photo, and the sample's (the bot's own) none."""
        if self.preview:
            return 0 if any(src.sample for src in self.sources) else 1
        return sum(src.units for src, _ in self.items)

    def first(self, count: int) -> Request:
        """The request for its first ``count`` drawings (``count`` >= 1); the caller counts the rest."""
        if count < 1:
            raise ValueError("a request keeps at least one drawing")
        if len(self.drawn_styles) > 1:
            return replace(self, styles=self.styles[:count])
        return replace(self, sources=self.sources[:count])


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


class StoredRequestError(ValueError):
    """A journal row this version cannot turn back into a request."""


def request_to_json(req: Request) -> str:
    return json.dumps({"v": REQUEST_VERSION, **encode(req)})


def request_from_json(text: str) -> Request:
    """The request a journal row holds, whichever version wrote it (storage/codec.py, leniently: an
    older row lacks newer fields, a newer one may carry fields this version does not know)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise StoredRequestError(f"{exc.__class__.__name__}: {exc}") from None
    if isinstance(raw, dict):
        raw.pop("v", 1)
    return decode(raw, Request, "request", StoredRequestError, lenient=True)
