"""Decoding what people send, and encoding what we send back.

Photos arrive in every format and mode a phone or desktop produces. This
module turns any of them into one thing, an 8-bit RGB image the right way up,
or refuses it with an :class:`ImageError` whose message can go straight to
the user. Sizes are checked from the header, before any pixel is decoded, so
a few kilobytes that claim 400 megapixels cost nothing.

An iPhone's photos are HEIC (HEIF): Pillow reads them through pillow-heif's
opener, registered here, on import, so every process that decodes a photo (the
bot's and ``animebot worker``'s drawing processes, the CLI, the Mini App's
"before" photo) reads them without a start-up step of its own to forget.
Pillow reads AVIF itself. Both keep their rotation in the container as well as
in EXIF; each reader hands over EXIF that turns the pixels upright exactly once
(libheif turns a HEIF's pixels itself and pillow-heif sets EXIF's orientation
to 1; Pillow's AVIF reader leaves the pixels as stored and the turn in EXIF).
"""
from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pillow_heif
from PIL import Image, ImageOps, UnidentifiedImageError

from inference.errors import ImageError

# We enforce our own limits below; Pillow's global bomb check would fire
# first with a warning or an exception of its own.
Image.MAX_IMAGE_PIXELS = None
pillow_heif.register_heif_opener()

FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "TIFF", "GIF", "MPO", "HEIF", "AVIF")
# The formats a refusal names (bot/words/locales/ has the bot's own words for each refusal).
KNOWN = "JPEG, PNG, WebP, HEIC or AVIF"


@dataclass(frozen=True)
class ImageLimits:
    """What we agree to decode. Defaults allow any phone photo (up to 200 MP sensors
    are rare; 12-50 MP common) and refuse what cannot be a photo."""

    max_pixels: int = 100_000_000
    min_side: int = 32
    max_aspect: float = 20.0


def decode(data: bytes, limits: ImageLimits = ImageLimits(), at_least: int | None = None) -> Image.Image:
    """Bytes of an image file to an upright RGB image, transparency flattened onto white.

    With ``at_least``, a JPEG is decoded directly at a reduced scale (1/2,
    1/4 or 1/8, libjpeg's DCT scaling) whose long side is still at least
    that many pixels: a 12 MP photo bound for 720 px never exists at full
    size. ``img.info["source_size"]`` is always the upright size of the file
    itself, so callers can size outputs from it exactly; ``img.info["frames"]``
    says how many frames an animation had (only the first is returned).
    """
    if not data:
        raise ImageError("The file is empty.", code="empty")
    try:
        img: Image.Image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise ImageError(f"This file is not an image I can read (try {KNOWN}).", code="not_image") from None
    except Exception:
        raise ImageError("This image file is damaged and can't be read.", code="corrupt") from None
    if img.format not in FORMATS:
        raise ImageError(f"{img.format} images are not supported; send a {KNOWN}.", code="format")
    _check_size(img.width, img.height, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "Truncated File Read" noise from EXIF parsing
            frames = getattr(img, "n_frames", 1)  # drawn: the frame Pillow opens at (a GIF's first, a HEIF's primary)
            source = img.size
            if at_least and img.format in ("JPEG", "MPO") and max(source) > at_least:
                scale = at_least / max(source)
                img.draft("RGB", (math.ceil(source[0] * scale), math.ceil(source[1] * scale)))
            img.load()
            drafted = img.size
            img = ImageOps.exif_transpose(img)
            turned = img.size != drafted
            rgb = _to_rgb(img)
            rgb.info["source_size"] = source[::-1] if turned else source
            rgb.info["frames"] = frames
            return rgb
    except ImageError:
        raise
    except Exception:
        raise ImageError("This image file is damaged or truncated and can't be read.", code="corrupt") from None


def _check_size(width: int, height: int, limits: ImageLimits) -> None:
    """The most telling reason first: a 20000×20 strip is too long and thin before it is too narrow.
    Each sentence's numbers go with it (``values``), for the bot to say them in every language."""
    if width * height > limits.max_pixels:
        megapixels, limit = round(width * height / 1e6), round(limits.max_pixels / 1e6)
        raise ImageError(f"This image is too large ({width}×{height}, {megapixels} MP); the limit is {limit} MP.",
                         code="too_large", values={"width": width, "height": height, "megapixels": megapixels,
                                                   "limit": limit})
    if max(width, height) > limits.max_aspect * max(1, min(width, height)):
        raise ImageError(f"This image is too long and thin ({width}×{height}); the aspect ratio may be at most "
                         f"{limits.max_aspect:g}:1.", code="aspect",
                         values={"width": width, "height": height, "ratio": limits.max_aspect})
    if min(width, height) < limits.min_side:
        raise ImageError(f"This image is too small ({width}×{height}); send one at least {limits.min_side} px on "
                         "each side.", code="too_small",
                         values={"width": width, "height": height, "min_side": limits.min_side})


def _to_rgb(img: Image.Image) -> Image.Image:
    """Any Pillow mode to 8-bit RGB, scaling 16-bit and flattening alpha onto white."""
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        # Pillow's own I->L conversion clips at 255 instead of scaling; 16-bit
        # grey PNGs would come out white. Scale the full range down instead.
        arr = np.asarray(img, dtype=np.float64)
        hi = 65535.0 if img.mode.startswith("I;16") or arr.max() > 255 else 255.0
        img = Image.fromarray(np.clip(np.rint(arr * (255.0 / hi)), 0, 255).astype(np.uint8), "L")
    elif img.mode == "F":
        arr = np.asarray(img, dtype=np.float64)
        img = Image.fromarray(np.clip(np.rint(arr), 0, 255).astype(np.uint8), "L")
    has_alpha = img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or (
        img.mode in ("P", "L", "RGB") and "transparency" in img.info
    )
    if has_alpha:
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")


def encode(img: Image.Image, fmt: str = "jpg", quality: int = 92) -> bytes:
    """An RGB image to JPEG or PNG bytes (PNG keeps an RGBA image's transparency)."""
    buf = io.BytesIO()
    if fmt in ("jpg", "jpeg"):
        # 4:4:4 chroma keeps the thin coloured lines of the anime style crisp.
        img.save(buf, "JPEG", quality=quality, subsampling=0, optimize=True)
    elif fmt == "png":
        img.save(buf, "PNG", compress_level=6)
    else:
        raise ValueError(f"unknown output format {fmt!r}")
    return buf.getvalue()
