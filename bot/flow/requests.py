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
# 6: kinds of job (``kind``, bot/flow/kinds/) and ways of answering (``answer``) in place of the flags
# ``as_document``, ``preview`` and ``deliver`` (an older row is read in today's words: :func:`_in_kinds`)
REQUEST_VERSION = 6
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
    # What is drawn and how it is answered: the name of its planner (bot/flow/kinds/: "photo", "styles",
    # "preview", "tiles", "file", "sticker", "avatar", "cutout"), and of its way of answering
    # (bot/flow/answering.py: "chat", sent as ever; "app", asked for in the Mini App, which shows it).
    kind: str = "photo"
    answer: str = "chat"
    fast: bool = False  # drawn with a lite style because the queue was long
    album: str | None = None  # the media_group_id of an album's parts
    query_id: str | None = None  # the button press that asked, answered with any refusal
    left_out: int = 0  # album photos not taken on: over today's quota, the user's waiting limit, or the queue
    left_out_why: str = "quota"  # which of those: quota, limit or busy
    # The styles of a kind that draws one photo in several ("All styles", a preview sheet); ``style`` is then
    # the first of them, or for a preview the user's own style, which the menu under the sheet marks.
    styles: tuple[str, ...] = ()

    @property
    def drawn_styles(self) -> tuple[str, ...]:
        return self.styles or (self.style,)

    @property
    def items(self) -> list[tuple[Source, str]]:
        """Every drawing the request asks for: each photo in each style (photos and styles are never both
        more than one)."""
        return [(src, style) for src in self.sources for style in self.drawn_styles]

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
    if isinstance(raw, dict) and not (isinstance(version := raw.pop("v", 1), int) and version >= 6):
        _in_kinds(raw)
    return decode(raw, Request, "request", StoredRequestError, lenient=True)


def _in_kinds(raw: dict[str, object]) -> None:
    """A row written before kinds of job (version 5 and older), in today's words: its flags and its
    settings say which kind it was, and ``deliver`` is the way of answering."""
    settings = raw.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    if raw.pop("preview", False):  # asked by the Mini App's page: its tiles, shown one by one
        kind = "tiles" if raw.get("deliver") == "app" else "preview"
    elif raw.get("styles"):
        kind = "styles"
    elif raw.get("as_document"):
        kind = "cutout" if settings.get("cut") == "cutout" else "file"
    elif settings.get("cut") == "sticker":
        kind = "sticker"
    elif settings.get("avatar"):
        kind = "avatar"
    else:
        kind = "photo"
    raw.pop("as_document", None)
    raw["kind"] = kind
    raw["answer"] = raw.pop("deliver", "chat")
