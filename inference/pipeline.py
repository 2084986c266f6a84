"""Photo bytes in, anime bytes out: decode, resize, pad, stylize, crop, faces, colour, encode.

Each step is a small function so the bot's workers, the CLI and the
benchmarks share one pipeline, and each is timed so ``--json`` and the logs
can say where the time went.
"""
from __future__ import annotations

import io
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from inference import sticker
from inference.avatar import avatar_square, subject
from inference.backends import Stylizer, release_buffers
from inference.colour import blend, keep_colours
from inference.detector import FaceDetector
from inference.faces import Framing, face_pass
from inference.imageio import ImageLimits, decode, encode
from inference.segmentation import Segmenter

# 720 px on the long side, chosen by measurement (docs/benchmarks.md, "Choosing max_side",
# has the numbers): smaller outputs look blurry on a phone screen; larger ones
# cost time super-linearly for strokes no one sees in a chat.
DEFAULT_MAX_SIDE = 720
# A panorama's result is at most this many times max_side long (fit_size).
PANORAMA_LONG_SIDES = 4
# Telegram refuses a photo whose width + height is over 10000 px, or one
# longer than 20:1.
PHOTO_MAX_SUM = 10_000
PHOTO_MAX_ASPECT = 20
EXIF_ORIENTATION = 0x0112


@dataclass(frozen=True)
class ConvertSettings:
    """Everything besides the model that changes the output pixels or bytes."""

    max_side: int = DEFAULT_MAX_SIDE
    fmt: str = "jpg"
    jpeg_quality: int = 92
    faces: bool = True  # a pass per face at its own crop, when a detector is given
    strength: int = 100  # percent of the style over the photo
    keep_colours: bool = False  # anime lightness and lines, the photo's colours
    limits: ImageLimits = field(default_factory=ImageLimits)
    avatar: bool = False  # cut to a square around the largest face first (inference/avatar.py)
    # "sticker": the person cut out, outlined, as a 512 px WebP; "cutout": the person cut out, as a
    # transparent PNG; "": the whole photo (inference/sticker.py)
    cut: str = ""


@dataclass
class FaceTools:
    """What the face pass needs: a detector, the model that draws faces, and how that model's
    crops are cut (see faces.Framing)."""

    detector: FaceDetector
    model: Stylizer
    framing: Framing = field(default_factory=Framing)


@dataclass(frozen=True)
class ClipFacts:
    """What a drawn clip is, for the reply and the logs (see inference/clips.py)."""

    fps: float
    seconds: float
    drawn: int  # frames the model drew; the others repeat their predecessor
    trimmed: bool  # cut to the longest clip drawn
    sound: str | None  # "kept"; "damaged" when the input's sound could not be read; None: silent


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
    frames: int = 1  # frames written for a clip; for an animated picture its count (its first frame is drawn)
    clip: ClipFacts | None = None  # set for a clip: ``data`` is an MP4
    cut: str = ""  # for a sticker or cut-out, how the person was cut: "person" (segmented) or "oval"

    @property
    def face_passes(self) -> int:
        """How many faces were drawn again by the face pass: what the bot logs, counts and settles a drawing
        by. A face a release before it sent without a "pass" was not drawn again."""
        return sum(1 for f in self.faces if f.get("pass"))


def fit_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """The result's size for a ``width`` x ``height`` photo: same aspect, never larger than the photo.

    Usually the long side is ``max_side``. A photo longer than 2:1 (a
    panorama) would come out a thin strip that way (4000x300 at 720 px:
    720x54, its faces a few pixels tall), so its short side is kept at half
    of ``max_side`` instead, as long as the result has no more pixels than a
    square one (``max_side``², the same model time), its long side is at
    most ``PANORAMA_LONG_SIDES`` times ``max_side``, and Telegram still
    takes it as a photo (width + height, aspect ratio).
    """
    long, short = max(width, height), min(width, height)
    panorama = long > 2 * short
    scale = max_side / long
    if panorama:
        scale = min(max_side / 2 / short, max_side / math.sqrt(width * height),
                    PANORAMA_LONG_SIDES * max_side / long, (PHOTO_MAX_SUM - 1) / (width + height))
    if scale >= 1:
        return width, height
    short_out, long_out = max(1, round(short * scale)), round(long * scale)
    if panorama:
        # Rounding both sides could turn a 20:1 photo into 20.01:1.
        long_out = min(long_out, PHOTO_MAX_ASPECT * short_out)
    return (long_out, short_out) if width >= height else (short_out, long_out)


def resize(img: Image.Image, max_side: int) -> Image.Image:
    """Lanczos down to :func:`fit_size`; sized from the file's own size when decoding reduced it."""
    source = img.info.get("source_size", img.size)
    size = fit_size(source[0], source[1], max_side)
    return img if size == img.size else img.resize(size, Image.Resampling.LANCZOS)


def _header_size(data: bytes) -> tuple[int, int] | None:
    """The photo's size as it will be shown (after its EXIF rotation), from the file's header alone.

    Any problem with the file is left to :func:`decode`, which reports it;
    here it only means no early guess.
    """
    try:
        with Image.open(io.BytesIO(data)) as img:
            rotated = img.getexif().get(EXIF_ORIENTATION, 1) in (5, 6, 7, 8)
            return (img.height, img.width) if rotated else img.size
    except Exception:
        return None


def padded_shape(width: int, height: int, model: Stylizer) -> tuple[int, int, int, int]:
    """The NHWC shape ``model`` is run at for a ``width`` x ``height`` image (see :func:`stylize`)."""
    def side(n: int) -> int:
        n = max(n, model.min_side)
        return n + -n % model.multiple

    return 1, side(height), side(width), 3


def _compile_ahead(model: Stylizer, size: tuple[int, int] | None) -> threading.Thread | None:
    """Compile ``model`` for a result of ``size`` while the photo decodes, where the backend
    compiles per shape (OpenVINO): the 0.3 s or more is then not added to the decode's."""
    prepare = getattr(model, "prepare", None)
    if prepare is None or size is None:
        return None
    thread = threading.Thread(target=prepare, args=(padded_shape(*size, model),), daemon=True)
    thread.start()
    return thread


def stylize(img: Image.Image, model: Stylizer) -> Image.Image:
    """Run ``model`` on an RGB image of any size; the result has the same size.

    The model needs sides divisible by ``model.multiple`` and at least
    ``model.min_side``; we mirror-pad the bottom and right edges (as the
    network pads internally) and crop the padding back off, so nothing is
    stretched.
    """
    x = np.asarray(img, dtype=np.float32) * (1 / 127.5) - 1.0
    h, w = x.shape[:2]
    _, full_h, full_w, _ = padded_shape(w, h, model)
    pad_h, pad_w = full_h - h, full_w - w
    if pad_h or pad_w:
        x = np.pad(x, ((0, pad_h), (0, pad_w), (0, 0)), mode="reflect")
    y = model(np.ascontiguousarray(x))[:h, :w]
    out = np.rint((y + 1.0) * 127.5)
    return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8), "RGB")


def stylize_crops(crops: list[np.ndarray], model: Stylizer) -> list[np.ndarray]:
    """Square RGB crops of one size through ``model``, in one batch where the model takes one.

    Crop sizes are multiples of every model's ``multiple`` and at least
    its ``min_side`` (faces.CROP_SIZES), so nothing is padded here.
    """
    x = np.stack(crops).astype(np.float32) * (1 / 127.5) - 1.0
    many = getattr(model, "many", None)
    y = many(x) if many is not None else np.stack([model(one) for one in x])
    return list(np.clip(np.rint((y + 1.0) * 127.5), 0, 255).astype(np.uint8))


@dataclass
class _Prepared:
    """A photo made ready to draw: the part drawn at the result's size, and what the later steps need of it."""

    small: Image.Image  # what the model draws
    original: np.ndarray | None  # the decoded part at full size, for the face pass (None without one)
    input_size: tuple[int, int]  # the file's own size
    frames: int
    to_file: float  # the file's pixels per decoded pixel: undoes a reduced decode, for the faces' boxes
    seen: list[sticker.Box] | None  # the faces a sticker's cut is decided by, in ``small``; None: no detector


def convert_bytes(data: bytes, model: Stylizer, settings: ConvertSettings = ConvertSettings(),
                  face_tools: FaceTools | None = None, finder: FaceDetector | None = None,
                  segmenter: Segmenter | None = None) -> Converted:
    """The whole pipeline on one file's bytes: prepare, draw, the face pass, colours, then cut and encode.
    Raises ImageError for bad input.

    The face pass runs when ``settings.faces`` is on and ``face_tools`` is
    given; without them the result is exactly the whole-image pass. An avatar
    (``settings.avatar``) or a sticker (``settings.cut``) finds its face with
    ``finder``, or without one takes the photo's centre or the whole photo; a
    sticker is cut out by ``segmenter`` where it and ``finder`` agree there is
    a person (:func:`sticker.how_to_cut`), or else by an oval.
    """
    t0 = time.perf_counter()
    ready = _prepare(data, model, settings, finder, faces=settings.faces and face_tools is not None)
    t1 = time.perf_counter()
    anime = np.asarray(stylize(ready.small, model))
    timings = {"decode_s": t1 - t0, "model_s": time.perf_counter() - t1}
    reports: list[dict[str, object]] = []
    if face_tools is not None and ready.original is not None:
        anime, reports = _faces(ready, anime, model, face_tools, timings)
    if settings.keep_colours:
        anime = keep_colours(np.asarray(ready.small), anime)
    if settings.strength < 100:
        anime = blend(np.asarray(ready.small), anime, settings.strength / 100)
    t4 = time.perf_counter()
    out, size, cut = _encoded(anime, ready, settings, segmenter)
    if settings.cut:
        timings["cut_s"] = time.perf_counter() - t4
    timings["encode_s"] = time.perf_counter() - t4
    return Converted(data=out, input_size=ready.input_size, output_size=size, style=model.style,
                     backend=model.backend, timings=timings, faces=reports, frames=ready.frames, cut=cut)


def _prepare(data: bytes, model: Stylizer, settings: ConvertSettings, finder: FaceDetector | None,
             faces: bool) -> _Prepared:
    """Decode (reduced where the result allows), crop an avatar's square or a sticker's subject, resize.

    A reduced JPEG decode keeps at least three times the result's size. At 1x, libjpeg's DCT scaling left
    tall_1280x1707 only 26 dB from a full decode after the resize; at 2x, large_1365x2048 upscaled to 12 MP
    (decoded at 1/2) came out 37.0 dB from the reference's output; at 3x every bench photo is 39.7 dB or
    more, for 0.15 s more decoding of a 12 MP photo. Face crops want those pixels too.
    """
    shown = _header_size(data)
    result = fit_size(*shown, settings.max_side) if shown else None
    ahead = _compile_ahead(model, result)
    photo = decode(data, settings.limits, at_least=3 * (max(result) if result else settings.max_side))
    input_size = photo.info.get("source_size", photo.size)
    to_file = input_size[0] / photo.width
    seen: list[sticker.Box] | None = None
    box = (0, 0, *photo.size)  # the part of the photo drawn
    if settings.avatar or settings.cut:
        seen = [f.box for f in finder.detect(np.asarray(photo))] if finder is not None else None
        face = subject(photo.size, seen or [])
        box = avatar_square(photo.size, face) if settings.avatar else sticker.subject_box(photo.size, face)
        part = photo.crop(box)
        # the crop in the file's own pixels, which resize goes by
        part.info = {**photo.info, "source_size": (round(part.width * to_file), round(part.height * to_file))}
        photo = part
    small = resize(photo, settings.max_side)
    if seen is not None:
        seen = sticker.in_crop(seen, box, small.width / photo.width)
    # The face pass reads the decoded photo as an array; the decoded image itself goes now (the caller
    # holds none of it), so a 16 MP photo is held once (48 MB) while the model runs, and not at all
    # without the pass.
    frames = photo.info.get("frames", 1)
    original = np.asarray(photo) if faces else None
    del photo
    if ahead is not None:
        ahead.join()
    return _Prepared(small, original, input_size, frames, to_file, seen)


def _faces(ready: _Prepared, anime: np.ndarray, model: Stylizer, face_tools: FaceTools,
           timings: dict[str, float]) -> tuple[np.ndarray, list[dict[str, object]]]:
    """The face pass over the whole image's drawing; its timings go into ``timings``."""
    assert ready.original is not None
    t2 = time.perf_counter()
    found = face_tools.detector.detect(ready.original)  # its buffers are small and stay allocated
    t3 = time.perf_counter()

    def draw_faces(crops: list[np.ndarray]) -> list[np.ndarray]:
        # The whole image's model and the face model never need their buffers at once: the whole
        # image's are freed before the first face is drawn (they come back with its next inference,
        # 0.04 s) and the face model's after its faces, so a worker peaks at the larger pass, not at
        # the sum. A photo with no face to draw frees nothing.
        release_buffers(model)
        return stylize_crops(crops, face_tools.model)

    anime, used = face_pass(ready.original, anime, found, draw_faces, face_model=face_tools.model.style != model.style,
                            framing=face_tools.framing)
    if used:
        release_buffers(face_tools.model)
    timings.update(detect_s=t3 - t2, faces_s=time.perf_counter() - t3)
    return anime, [{**f.report(ready.to_file), "pass": f in used} for f in found]


def _encoded(anime: np.ndarray, ready: _Prepared, settings: ConvertSettings, segmenter: Segmenter | None
             ) -> tuple[bytes, tuple[int, int], str]:
    """The drawing as the file asked for: cut out (a sticker, a cut-out) or whole; with its size and how it
    was cut ("person", "oval", or "" for none)."""
    if not settings.cut:
        return encode(Image.fromarray(anime, "RGB"), settings.fmt, settings.jpeg_quality), ready.small.size, ""
    mask = segmenter.mask(np.asarray(ready.small)) if segmenter is not None else None
    alpha, how = sticker.person_alpha(mask, *ready.small.size, ready.seen)
    person = sticker.cut_out(anime, alpha)
    picture = sticker.sticker(person) if settings.cut == "sticker" else person
    out = sticker.webp(picture) if settings.fmt == "webp" else encode(picture, settings.fmt, settings.jpeg_quality)
    return out, picture.size, "oval" if how == "oval" else "person"
