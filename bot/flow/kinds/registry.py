"""Every kind of job this version knows, by the name a request gives (``Request.kind``)."""
from __future__ import annotations

from bot.flow.kinds.avatar import Avatar
from bot.flow.kinds.base import Kind
from bot.flow.kinds.cutout import Cutout
from bot.flow.kinds.file import File
from bot.flow.kinds.hd import HD
from bot.flow.kinds.photo import Photo
from bot.flow.kinds.preview import Preview, Tiles
from bot.flow.kinds.sticker import Sticker
from bot.flow.kinds.styles import AllStyles
from bot.flow.requests import Request
from inference.pipeline import ConvertSettings

# Each kind, as the code outside bot/flow/kinds/ names it: by the object, never by its name (the name is what
# a journal row and a worker's message carry).
PHOTO, ALL_STYLES, PREVIEW, TILES, FILE = Photo(), AllStyles(), Preview(), Tiles(), File()
STICKER, AVATAR, CUTOUT, DOUBLED = Sticker(), Avatar(), Cutout(), HD()
KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    PHOTO, ALL_STYLES, PREVIEW, TILES, FILE, STICKER, AVATAR, CUTOUT, DOUBLED)}


def redrawn(settings: ConvertSettings) -> Kind:
    """The kind that draws a result again as it was drawn (a redraw in another style): an avatar stays an
    avatar, a sticker a sticker; anything else is shown as a picture."""
    return AVATAR if settings.avatar else STICKER if settings.cut == "sticker" else PHOTO


def plan(req: Request) -> Kind:
    """The planner of the request's kind; a kind this version does not know is a ValueError (a journal
    row written by a newer version is answered with an apology, like any unreadable row)."""
    try:
        return KINDS[req.kind]
    except KeyError:
        raise ValueError(f"no kind of job named {req.kind!r}") from None
