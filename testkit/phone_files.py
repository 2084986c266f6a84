"""Photos as a phone files them: HEIC (an iPhone's) and AVIF, stored sideways with the turn that shows
them upright, so a reader that misses the turn, or makes it twice, draws the photo on its side.

A phone's camera stores the pixels as the sensor saw them and says how to turn them: EXIF
orientation 6 ("turn a quarter clockwise to show") for a photo taken upright. pillow-heif writes
that turn into the HEIF container's rotation box and keeps the EXIF tag, as an iPhone does;
Pillow's AVIF writer moves it into the container. Written with the libraries' writers directly,
so a test process that makes these files has registered no reader of its own.
"""
from __future__ import annotations

import io

import pillow_heif
from PIL import Image

FORMATS = ("HEIF", "AVIF")
SUFFIX = {"HEIF": ".heic", "AVIF": ".avif"}
MIME = {"HEIF": "image/heic", "AVIF": "image/avif"}
TURN_CLOCKWISE = 6  # EXIF orientation: show the stored pixels turned a quarter clockwise


def as_phone_file(upright: bytes, fmt: str, quality: int = 90) -> bytes:
    """The photo in ``upright`` (any file Pillow reads as it is) as a ``fmt`` file stored sideways."""
    with Image.open(io.BytesIO(upright)) as img:
        sideways = img.convert("RGB").transpose(Image.Transpose.ROTATE_90)  # a quarter anticlockwise
    exif = Image.Exif()
    exif[0x0112] = TURN_CLOCKWISE
    out = io.BytesIO()
    if fmt == "HEIF":
        pillow_heif.from_pillow(sideways).save(out, quality=quality, exif=exif.tobytes())
    else:
        sideways.save(out, fmt, quality=quality, exif=exif.tobytes())
    return out.getvalue()
