"""Style previews: one picture of a photo drawn in every installed style, each tile labelled (/style).

The tiles are ordinary results (bot/flow/results.py): the workers draw them,
one small order per style at :data:`PREVIEW_SETTINGS`, and they are cached
like any other. This module names the settings, lays the tiles out and keys
the finished sheet; bot/flow/sheets.py gets a request its sheet and sends it.
A sheet is cached as a result too, under the photo's hash and
:data:`SHEET_STYLE`, with a version made of every tile's version: it is
drawn once per installed set of styles, and after its first upload it is
sent by the ``file_id`` Telegram gave it.

The picture holds no words, only each style's number under its tile: the
caption and the buttons under the sheet name the numbers in the user's
language. Words drawn in the picture would need a font for every script
(Chinese alone is megabytes) and Arabic shaping, and would make a sheet per
language; numbers make one sheet every user is sent by one ``file_id``.
"""
from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Sequence

from PIL import Image, ImageDraw, ImageFont, ImageOps

from bot.flow.requests import Request
from bot.styles import Styles
from inference.pipeline import ConvertSettings
from storage.cache import result_key

# Small enough to draw quickly, large enough to judge a style by; the face pass on, as results have it.
PREVIEW_SETTINGS = ConvertSettings(max_side=384, faces=True)
SHEET_STYLE = "@sheet"  # the cache's "style" of a sheet: no style's name can hold an "@"
SHEET_REVISION = 2  # bump when the layout changes, so no older sheet is sent again (2: numbers only)
GAP = 6
LABEL_H = 34
FONT_PX = 22
BACKGROUND = (28, 28, 32)
LABEL_COLOUR = (240, 240, 240)
JPEG_QUALITY = 88


def tile_label(styles: Styles, name: str) -> str:
    """A tile's label: the style's number in the /style menu, as its button carries it."""
    return str(styles.ordered.index(name) + 1)


def legend(styles: Styles, names: Sequence[str], lang: str) -> str:
    """The tiles' numbers named in ``lang``, for the sheet's caption: "1 Hayao · 2 Shinkai"."""
    return " · ".join(f"{tile_label(styles, name)} {styles.display(name, lang)}" for name in names)


def sheet_key(styles: Styles, content_sha256: str, names: Sequence[str]) -> str:
    """The cache key of the sheet of ``names`` (installed styles, in this order) on this photo: it
    changes with any tile's version (a model file, the face model, the pipeline) and with the labels."""
    parts = [f"{name}:{styles.version(name, PREVIEW_SETTINGS)}:{tile_label(styles, name)}" for name in names]
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]
    return result_key(content_sha256, SHEET_STYLE, f"s{SHEET_REVISION}-{digest}")


def sheet_key_of(styles: Styles, req: Request, sha: str) -> str:
    """The cache key of the sheet a preview request asks for, on the photo of hash ``sha``."""
    return sheet_key(styles, sha, [n for n in req.drawn_styles if n in styles.names])


def columns(count: int) -> int:
    """Cells per row: readable on a phone (2 or 3 across), 4 across only for a dozen or more."""
    return 1 if count == 1 else 2 if count <= 4 else 3 if count <= 9 else 4


def layout(count: int, tile: tuple[int, int]) -> tuple[tuple[int, int], list[tuple[int, int, int, int]]]:
    """The sheet's size for ``count`` cells of pictures ``tile`` (width, height) big, and each cell's
    picture box (left, top, right, bottom) in reading order; each label lies under its picture."""
    cols = columns(count)
    rows = math.ceil(count / cols)
    w, h = tile
    cell_w, cell_h = w + GAP, h + LABEL_H + GAP
    boxes = []
    for i in range(count):
        row, col = divmod(i, cols)
        left, top = GAP + col * cell_w, GAP + row * cell_h
        boxes.append((left, top, left + w, top + h))
    return (GAP + cols * cell_w, GAP + rows * cell_h), boxes


def compose(cells: Sequence[tuple[str, bytes]]) -> tuple[bytes, int, int]:
    """The sheet (JPEG bytes, width, height) of ``cells``: (label, encoded picture) in order; an empty
    label (the photo itself) leaves its strip blank.

    Every tile has the size of the smallest picture (the style tiles all have one size; the
    original photo, when given, is shrunk to it). Runs in a thread: it decodes and encodes.
    """
    if not cells:
        raise ValueError("a sheet needs at least one picture")
    pictures = [Image.open(io.BytesIO(data)).convert("RGB") for _, data in cells]
    tile = min((p.size for p in pictures), key=lambda s: s[0] * s[1])
    size, boxes = layout(len(cells), tile)
    sheet = Image.new("RGB", size, BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=FONT_PX)
    for (label, _), picture, (left, top, right, bottom) in zip(cells, pictures, boxes):
        if picture.size != tile:
            picture = ImageOps.contain(picture, tile, Image.Resampling.LANCZOS)
        sheet.paste(picture, (left + (tile[0] - picture.width) // 2, top + (tile[1] - picture.height) // 2))
        width = draw.textlength(label, font=font)
        draw.text((left + (tile[0] - width) / 2, bottom + (LABEL_H - FONT_PX) / 2 - 2), label, font=font,
                  fill=LABEL_COLOUR)
    out = io.BytesIO()
    sheet.save(out, "JPEG", quality=JPEG_QUALITY, optimize=True)
    return out.getvalue(), sheet.width, sheet.height
