"""Photo bytes in, anime bytes out: decode, resize, pad, stylize, crop, faces, colour, encode.

Each step is a small function so the bot's workers, the CLI and the
benchmarks share one pipeline, and each is timed so ``--json`` and the logs
can say where the time went.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from inference.backends import Stylizer
from inference.colour import blend, keep_colours
from inference.faces import FaceDetector, face_pass
from inference.imageio import ImageLimits, decode, encode

# 720 px on the long side, chosen by measurement on 2 cores (README, "Choosing
# max_side"): about 4 s a photo, against 1.9 s at 512 px and 13.6 s at 1024 px.
# Smaller outputs look blurry on a phone screen; larger ones cost time
# super-linearly for strokes no one sees in a chat.
DEFAULT_MAX_SIDE = 720


@dataclass(frozen=True)
class ConvertSettings:
    """Everything besides the model that changes the output pixels or bytes."""

    max_side: int = DEFAULT_MAX_SIDE
    fmt: str = "jpg"
    jpeg_quality: int = 92
    faces: bool = True  # a 512 px pass per face, when a detector is given
    strength: int = 100  # percent of the style over the photo
    keep_colours: bool = False  # anime lightness and lines, the photo's colours
    limits: ImageLimits = field(default_factory=ImageLimits)


@dataclass
class FaceTools:
    """What the face pass needs: a detector and the model that draws faces."""

    detector: FaceDetector
    model: Stylizer


@dataclass
class Converted:
    """A finished conversion, with what the CLI's --json and the bot's logs report."""

    data: bytes
    input_size: tuple[int, int]
    output_size: tuple[int, int]
    style: str
    backend: str
    timings: dict[str, float]
    faces: list[dict[str, object]] = field(default_factory=list)
    frames: int = 1  # an animation's frame count; only its first frame is drawn


def fit_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Scale so the long side is at most ``max_side``, keeping the aspect ratio; never enlarge."""
    scale = max_side / max(width, height)
    if scale >= 1:
        return width, height
    return max(1, round(width * scale)), max(1, round(height * scale))


def resize(img: Image.Image, max_side: int) -> Image.Image:
    """Lanczos down to ``max_side``; sized from the file's own size when decoding reduced it."""
    source = img.info.get("source_size", img.size)
    size = fit_size(source[0], source[1], max_side)
    return img if size == img.size else img.resize(size, Image.Resampling.LANCZOS)


def stylize(img: Image.Image, model: Stylizer) -> Image.Image:
    """Run ``model`` on an RGB image of any size; the result has the same size.

    The model needs sides divisible by ``model.multiple``; we mirror-pad the
    bottom and right edges (as the network pads internally) and crop the
    padding back off, so nothing is stretched.
    """
    x = np.asarray(img, dtype=np.float32) * (1 / 127.5) - 1.0
    h, w = x.shape[:2]
    m = model.multiple
    pad_h, pad_w = -h % m, -w % m
    if pad_h or pad_w:
        x = np.pad(x, ((0, pad_h), (0, pad_w), (0, 0)), mode="reflect")
    y = model(np.ascontiguousarray(x))[:h, :w]
    out = np.rint((y + 1.0) * 127.5)
    return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8), "RGB")


def convert_bytes(data: bytes, model: Stylizer, settings: ConvertSettings = ConvertSettings(),
                  face_tools: FaceTools | None = None) -> Converted:
    """The whole pipeline on one file's bytes. Raises ImageError for bad input.

    The face pass runs when ``settings.faces`` is on and ``face_tools`` is
    given; without them the result is exactly the whole-image pass.
    """
    t0 = time.perf_counter()
    faces_on = settings.faces and face_tools is not None
    # A reduced JPEG decode keeps at least three times the result's size. At 1x,
    # libjpeg's DCT scaling left tall_1280x1707 only 26 dB from a full decode
    # after the resize; at 2x, large_1365x2048 upscaled to 12 MP (decoded at
    # 1/2) came out 37.0 dB from the reference's output; at 3x every bench photo
    # is 39.7 dB or more, for 0.15 s more decoding of a 12 MP photo. Face crops
    # want those pixels too.
    photo = decode(data, settings.limits, at_least=3 * settings.max_side)
    small = resize(photo, settings.max_side)
    t1 = time.perf_counter()
    anime = np.asarray(stylize(small, model))
    t2 = time.perf_counter()
    timings = {"decode_s": t1 - t0, "model_s": t2 - t1}
    reports: list[dict[str, object]] = []
    if faces_on:
        original = np.asarray(photo)
        found = face_tools.detector.detect(original)
        t3 = time.perf_counter()
        anime, used = face_pass(original, anime, found,
                                lambda crop: np.asarray(stylize(Image.fromarray(crop), face_tools.model)),
                                face_model=face_tools.model.style != model.style)
        timings.update(detect_s=t3 - t2, faces_s=time.perf_counter() - t3)
        to_file = photo.info.get("source_size", photo.size)[0] / photo.width
        reports = [{**f.report(to_file), "pass": f in used} for f in found]
    if settings.keep_colours:
        anime = keep_colours(np.asarray(small), anime)
    if settings.strength < 100:
        anime = blend(np.asarray(small), anime, settings.strength / 100)
    t4 = time.perf_counter()
    out = encode(Image.fromarray(anime, "RGB"), settings.fmt, settings.jpeg_quality)
    timings["encode_s"] = time.perf_counter() - t4
    return Converted(
        data=out,
        input_size=photo.info.get("source_size", photo.size),
        output_size=small.size,
        style=model.style,
        backend=model.backend,
        timings=timings,
        faces=reports,
        frames=photo.info.get("frames", 1),
    )
