"""Clips drawn as anime: every frame through the same model as a photo, streamed in and out.

The clip is planned from its header (size, rate, length: :mod:`inference.clip_io`),
the model is compiled once for the one output shape, and each new input frame is
drawn as the photo path would draw it (the same resize, model and strength), then
steadied against the previous frame (:mod:`inference.steady`) and encoded at
once. A frame the rate cap repeats is not drawn again. Memory holds a frame or
two and the encoded output, whatever the clip's length.
"""
from __future__ import annotations

import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from storage.errors import AnimebotError
from inference import clip_io, sticker
from inference.backends import Stylizer
from inference.clip_io import ClipInfo, ClipPlan
from inference.clip_settings import ClipSettings
from inference.colour import blend, keep_colours
from inference.pipeline import ClipFacts, Converted, _compile_ahead, stylize
from inference.avatar import avatar_square, subject
from inference.detector import FaceDetector
from inference.segmentation import Segmenter
from inference.steady import Steadier

FORMATS = ("mp4", "gif", "webm")  # webm: a video sticker only


class ClipCancelled(AnimebotError):
    code = "cancelled"


@dataclass
class ConvertedClip:
    """A finished clip, with what the CLI's --json and the bot's logs report."""

    data: bytes
    fmt: str
    source: ClipInfo
    plan: ClipPlan
    frames: int  # frames written
    drawn: int  # of those, frames the model drew (the rest repeat their predecessor)
    sound: str | None  # "kept", or "damaged" when the input's sound could not be read; None: silent
    style: str
    backend: str
    timings: dict[str, float]
    cut: str = ""  # a video sticker's: "person" (segmented) or "oval"

    def as_converted(self) -> Converted:
        """The clip as the bot's workers report any drawing."""
        return Converted(self.data, (self.source.width, self.source.height), self.plan.size, self.style,
                         self.backend, self.timings, frames=self.frames,
                         clip=ClipFacts(float(self.plan.fps), self.frames / float(self.plan.fps), self.drawn,
                                        self.plan.trimmed, self.sound), cut=self.cut)


def is_clip(data: bytes) -> bool:
    """Whether a file is a moving picture: a GIF of more than one frame, or a video container
    (MP4/MOV, WebM/Matroska, AVI). A one-frame GIF is a picture, and goes the photo's way."""
    if data[:6] in (b"GIF87a", b"GIF89a"):
        try:
            with Image.open(io.BytesIO(data)) as img:
                return getattr(img, "n_frames", 1) > 1
        except (OSError, ValueError, Image.DecompressionBombError):
            return False
    iso = data[4:8] == b"ftyp" and data[8:12] not in (b"heic", b"heix", b"mif1", b"avif")
    return iso or data[:4] == b"\x1a\x45\xdf\xa3" or (data[:4] == b"RIFF" and data[8:12] == b"AVI ")


def draw_frame(photo: np.ndarray, model: Stylizer, settings: ClipSettings) -> np.ndarray:
    """One frame as the photo path draws a photo of that size (no face pass: clips skip it)."""
    anime = np.asarray(stylize(Image.fromarray(photo, "RGB"), model))
    if settings.keep_colours:
        anime = keep_colours(photo, anime)
    if settings.strength < 100:
        anime = blend(photo, anime, settings.strength / 100)
    return anime


def convert_clip(data: bytes, model: Stylizer, settings: ClipSettings = ClipSettings(),
                 progress: Callable[[int, int], None] | None = None,
                 cancelled: Callable[[], bool] | None = None, segmenter: Segmenter | None = None,
                 finder: FaceDetector | None = None) -> ConvertedClip:
    """Draw a clip. ``progress(done, total)`` hears of each frame written; ``cancelled()`` is asked
    before each frame is drawn, and True stops the work with :class:`ClipCancelled`. A video sticker
    (``settings.cut``) is cut out of each frame by ``segmenter`` where it and ``finder`` see a person
    in the first frame, or else by an oval; an avatar (``settings.avatar``) is the square around the
    largest face ``finder`` sees in the first frame (the centre without one), as inference/avatar.py
    cuts a photo's.

    Raises :class:`~inference.clip_io.ClipError` for a file that is not a clip we can draw.
    """
    if settings.fmt not in FORMATS or (settings.fmt == "webm") != (settings.cut == "sticker"):
        raise AnimebotError(f"Unknown clip format {settings.fmt!r}: use one of mp4, gif (webm: a video sticker).")
    t0 = time.perf_counter()
    info = clip_io.probe(data)
    clip = clip_io.plan(info, settings.limits)
    if settings.avatar:
        clip = avatar_plan(data, info, settings, finder)
    if settings.cut:  # one side exactly 512, as Telegram wants a video sticker, enlarged if need be
        clip = replace(clip, size=sticker.video_size(*clip.size))
    ahead = _compile_ahead(model, clip.size)
    if ahead is not None:
        ahead.join()
    steady = Steadier() if settings.steady else None
    counts = {"written": 0, "drawn": 0}
    model_s = 0.0

    def frames() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Each frame of the input at the output's rate, with its drawing."""
        nonlocal model_s
        shown: np.ndarray | None = None
        for photo, new in clip_io.read_frames(data, info, clip):
            if new or shown is None:
                if cancelled is not None and cancelled():
                    raise ClipCancelled("Cancelled.")
                t = time.perf_counter()
                anime = draw_frame(photo, model, settings)
                model_s += time.perf_counter() - t
                shown = steady(photo, anime) if steady is not None else anime
                counts["drawn"] += 1
            counts["written"] += 1
            yield photo, shown
            if progress is not None:
                progress(counts["written"], clip.frames)

    sound, cut = None, ""
    if settings.cut:
        cut_frames, cut = cut_out_frames(frames(), segmenter, finder)
        out = clip_io.write_webm(cut_frames, clip.fps, sticker.VIDEO_MAX_BYTES)
    elif settings.fmt == "gif":
        out = clip_io.write_gif((shown for _, shown in frames()), clip.fps)
    else:
        writer = clip_io.Mp4Writer(clip, data if settings.sound and info.audio else None)
        try:
            for _, frame in frames():
                writer.write(frame)
        except BaseException:
            writer.discard()
            raise
        out, sound = writer.finish(), writer.sound
    total = time.perf_counter() - t0
    return ConvertedClip(out, settings.fmt, info, clip, counts["written"], counts["drawn"], sound, model.style,
                         model.backend, {"model_s": model_s, "total_s": total}, cut)


def avatar_plan(data: bytes, info: ClipInfo, settings: ClipSettings, finder: FaceDetector | None) -> ClipPlan:
    """The plan for an animated avatar: the square around the first frame's largest face, drawn at
    most ``settings.limits.max_side`` (and no larger than it is), an even side."""
    found = finder.detect(clip_io.first_frame(data, info)) if finder is not None else []
    size = (info.width, info.height)
    box = avatar_square(size, subject(size, [f.box for f in found]))
    side = box[2] - box[0]
    square = clip_io.plan(replace(info, width=side, height=side), settings.limits)
    return replace(square, crop=box)


def cut_out_frames(drawn: Iterator[tuple[np.ndarray, np.ndarray]], segmenter: Segmenter | None,
                   finder: FaceDetector | None = None) -> tuple[list[np.ndarray], str]:
    """Each drawn frame with the person cut out of it and outlined (RGBA), and how: the first frame
    decides person, person rounded by the oval, or the oval (no one there, as its mask and the faces
    ``finder`` sees in it say, or no segmenter), and every frame is cut that way, so the sticker's
    shape never jumps as it loops."""
    out: list[np.ndarray] = []
    how = ""
    oval: np.ndarray | None = None
    for photo, anime in drawn:
        h, w = anime.shape[:2]
        mask = segmenter.mask(photo) if segmenter is not None and how != "oval" else None
        if not how:
            faces = [f.box for f in finder.detect(photo)] if finder is not None and mask is not None else None
            how = sticker.how_to_cut(mask, faces)
        if how == "oval":
            oval = oval if oval is not None else sticker.cut_by(None, w, h, how)[0]
            alpha = oval
        else:
            alpha, _ = sticker.cut_by(mask, w, h, how)
        out.append(sticker.outlined(anime, alpha))
    if not out:
        raise clip_io.ClipError("I could not read any frame of that video.")
    return out, "oval" if how == "oval" else "person"
