"""The pictures tests send and compare: the real photos in ../shared/photos, photos made here where
which photo it is does not matter, and how near two pictures are."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from testkit.models import SHARED

PHOTOS = SHARED / "photos"


def photo_paths() -> list[Path]:
    return sorted(PHOTOS.glob("*.jpg")) if PHOTOS.is_dir() else []


def synthetic_image(width: int = 512, height: int = 512, seed: int = 0) -> Image.Image:
    """An RGB image with what a photo has and a flat fill lacks: smooth colour gradients, hard
    edges and fine texture. Made here, so tests where any photo will do run without ../shared."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = rng.uniform(0, 2 * np.pi, 3)
    freq = rng.uniform(1.0, 3.0, 3)
    base = np.stack([127 + 100 * np.sin(freq[c] * (x / width + y / height) * np.pi + phase[c]) for c in range(3)], 2)
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(6):
        x0, y0 = int(rng.integers(0, width * 3 // 4)), int(rng.integers(0, height * 3 // 4))
        box = (x0, y0, x0 + int(rng.integers(width // 8, width // 3)), y0 + int(rng.integers(height // 8, height // 3)))
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=colour)
    img = img.filter(ImageFilter.GaussianBlur(1.2))
    noise = rng.normal(0, 6, (height, width, 3))
    return Image.fromarray(np.clip(np.asarray(img, np.float32) + noise, 0, 255).astype(np.uint8))


def synthetic_photo(width: int = 512, height: int = 512, seed: int = 0) -> bytes:
    """:func:`synthetic_image` as the JPEG a phone would send; each seed is a different photo
    (a different cache entry for the bot)."""
    buf = io.BytesIO()
    synthetic_image(width, height, seed).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def noisy_jpeg(at_least: int, seed: int = 0) -> bytes:
    """A JPEG of pure noise of at least ``at_least`` bytes (noise does not compress): a photo as big as a
    phone's, for what its size costs on the way."""
    rng = np.random.default_rng(seed)
    side = 256
    while True:
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(buf, "JPEG", quality=95)
        if buf.tell() >= at_least:
            return buf.getvalue()
        side = int(side * 1.25)


def grainy_png(photo: bytes, at_least: int) -> bytes:
    """A real photo enlarged, with a camera's grain, to a PNG of at least ``at_least`` bytes: what a
    photographer sends as a file, too big for Telegram's 20 MB without a Bot API server of one's own."""
    img = Image.open(io.BytesIO(photo)).convert("RGB")
    rng = np.random.default_rng(0)
    side = max(img.size)
    while True:
        side = int(side * 1.25)
        big = img.resize((round(side * img.width / max(img.size)), round(side * img.height / max(img.size))),
                         Image.Resampling.BILINEAR)
        grain = rng.integers(-10, 11, (big.height, big.width, 3), dtype=np.int16)
        buf = io.BytesIO()
        Image.fromarray(np.clip(np.asarray(big) + grain, 0, 255).astype(np.uint8)).save(buf, "PNG", compress_level=1)
        if buf.tell() >= at_least:
            return buf.getvalue()


def jpeg(seed: int, size: tuple[int, int] = (320, 240)) -> bytes:
    """A distinct JPEG per seed: a colour gradient with noise."""
    rng = np.random.default_rng(seed)
    w, h = size
    ramp = np.linspace(0, 255, w, dtype=np.float32)[None, :, None] * rng.uniform(0.3, 1.0, 3)
    pixels = np.clip(ramp + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90)
    return out.getvalue()


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 255.0) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(peak**2 / mse)


def panorama(photos: list[Path], width: int, height: int) -> bytes:
    """A JPEG of real photos side by side at ``height``, repeated to ``width``: a stand-in for a phone's panorama."""
    tiles = [Image.open(p).convert("RGB") for p in photos]
    tiles = [t.resize((round(t.width * height / t.height), height), Image.Resampling.LANCZOS) for t in tiles]
    canvas = Image.new("RGB", (width, height))
    x = 0
    while x < width:
        for tile in tiles:
            canvas.paste(tile, (x, 0))
            x += tile.width
    buf = io.BytesIO()
    canvas.save(buf, "JPEG", quality=95)
    return buf.getvalue()
