"""Reading and writing clips (GIF, MP4, MOV, WebM) with PyAV, whose wheel bundles FFmpeg and x264.

A clip is read one frame at a time and written one frame at a time, so memory
stays the same whatever its length. Frames come out upright (a phone's
rotation is applied), flattened onto white where a GIF is transparent, and
resampled to a steady frame rate: :func:`read_frames` yields the frame shown
at each tick of the output's clock, dropping frames evenly when the input has
more than the cap and repeating one where a variable-rate input held it
longer, so the result lasts as long as the input did.

Everything the header declares is checked before any frame is decoded, and
every failure is a :class:`ClipError` whose message can go to the user as it is.

It is over 300 lines because reading and writing share one set of checks and
one idea of a clip's clock; split, each half would need the other's details.
"""
from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from PIL import Image

from storage.errors import AnimebotError
from inference.clip_settings import ClipLimits
from inference.scratch import scratch_dir

MAX_DECLARED_PIXELS = 36_000_000  # a frame above 8K's 33 MP is no phone's video
MIN_SIDE = 16
MAX_ASPECT = 20  # as for photos
MAX_INPUT_FRAMES_PER_S = 240  # frames decoded past this rate (per second kept) are a hostile file's
# Sound copied as it is; any other (a WebM's Opus or Vorbis, FLAC...) is re-encoded to AAC, which every
# Telegram client plays inside MP4 (Opus in MP4 is valid, but not every player takes it).
COPIED_AUDIO = frozenset({"aac", "mp3"})


class ClipError(AnimebotError):
    """The file is not a clip we can draw (corrupt, not a video, too big or too small)."""

    code = "bad_clip"


@dataclass(frozen=True)
class ClipInfo:
    """What the file's header says, upright (``width`` x ``height`` as shown, after ``rotation``)."""

    width: int
    height: int
    rotation: int  # degrees counter-clockwise to turn the stored frames, a multiple of 90
    fps: float  # the rate its frames come at (see probe); 0 where the header does not say
    seconds: float  # 0 where the header does not say
    audio: str | None  # the audio codec's name, None for a silent clip
    codec: str


@dataclass(frozen=True)
class ClipPlan:
    """The output: one size for every frame (even sides, as H.264's 4:2:0 needs), a steady rate,
    and how many frames that makes."""

    size: tuple[int, int]
    fps: Fraction
    frames: int
    seconds: float
    trimmed: bool  # the input was longer than ``ClipLimits.max_seconds``
    crop: tuple[int, int, int, int] | None = None  # the part of each upright frame drawn (an avatar's square)


def _open(data: bytes) -> Any:
    try:
        return av.open(io.BytesIO(data), "r", options={"probesize": "5000000"})
    except (av.FFmpegError, ValueError, OSError):
        raise ClipError("That file is not a video or GIF I can read.") from None


def _rotation(container: Any, stream: Any) -> int:
    """The display rotation a phone recorded (degrees CCW, a multiple of 90), which FFmpeg hands
    to each decoded frame; 0 when the first frame does not decode (reading will say so)."""
    try:
        frame = next(container.decode(stream))
    except (StopIteration, av.FFmpegError, ValueError):
        return 0
    return int(round((frame.rotation or 0) / 90)) % 4 * 90


def probe(data: bytes) -> ClipInfo:
    """Read the header only: size, rotation, rate, length and sound. Raises :class:`ClipError`."""
    with _open(data) as container:
        if not container.streams.video:
            raise ClipError("That file has no pictures in it.")
        stream = container.streams.video[0]
        ctx = stream.codec_context
        width, height = int(ctx.width or 0), int(ctx.height or 0)
        if width * height > MAX_DECLARED_PIXELS:
            raise ClipError(f"That video's frames are {width}x{height}, too big for me to draw.")
        if min(width, height) < MIN_SIDE:
            raise ClipError(f"That video's frames are {width}x{height}, too small to draw.")
        if max(width, height) > MAX_ASPECT * min(width, height):
            raise ClipError(f"That video's frames are {width}x{height}, too long and thin to draw "
                            f"(at most {MAX_ASPECT}:1).")
        rotation = _rotation(container, stream)
        if rotation in (90, 270):
            width, height = height, width
        # The higher of the average rate and FFmpeg's guess of the steady one: frames that come
        # faster than on average (a GIF that pauses on its last frame, a phone's variable rate)
        # would lose their motion at the average.
        rates = [float(r) for r in (stream.average_rate, stream.guessed_rate or stream.base_rate) if r]
        fps = max(rates, default=0.0)
        seconds = 0.0
        if stream.duration is not None and stream.time_base is not None:
            seconds = float(stream.duration * stream.time_base)
        elif container.duration is not None:
            seconds = container.duration / av.time_base
        audio = container.streams.audio[0].codec_context.name if container.streams.audio else None
        return ClipInfo(width, height, rotation, fps if math.isfinite(fps) else 0.0, max(0.0, seconds), audio,
                        ctx.name)


def plan(info: ClipInfo, limits: ClipLimits) -> ClipPlan:
    """The output for a clip: its long side at most ``limits.max_side`` (no panorama allowance, as
    photos have: every frame costs), at most ``limits.max_fps``, and at most ``limits.max_seconds`` long."""
    scale = min(1.0, limits.max_side / max(info.width, info.height))
    w, h = max(1, round(info.width * scale)), max(1, round(info.height * scale))
    size = (max(2, w - w % 2), max(2, h - h % 2))
    fps = Fraction(min(info.fps, limits.max_fps) if info.fps > 0 else limits.max_fps).limit_denominator(1001)
    seconds = min(info.seconds, limits.max_seconds) if info.seconds > 0 else limits.max_seconds
    return ClipPlan(size, fps, max(1, round(seconds * fps)), seconds, info.seconds > limits.max_seconds + 1e-3)


def _upright(frame: Any, rotation: int, size: tuple[int, int], crop: tuple[int, int, int, int] | None = None
             ) -> np.ndarray:
    """One decoded frame as an upright RGB array of ``size`` (of its ``crop`` only, when given),
    transparency flattened onto white."""
    rgba = frame.to_ndarray(format="rgba")
    if rotation:
        rgba = np.rot90(rgba, rotation // 90)
    if crop is not None:
        rgba = rgba[crop[1]:crop[3], crop[0]:crop[2]]
    img = Image.fromarray(np.ascontiguousarray(rgba), "RGBA")
    if int(rgba[..., 3].min()) < 255:
        img = Image.alpha_composite(Image.new("RGBA", img.size, (255, 255, 255, 255)), img)
    img = img.convert("RGB")
    if img.size != size:
        img = img.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    return np.asarray(img)


def _shown_for(frame: Any, info: ClipInfo, clip: ClipPlan) -> float:
    """How long the input shows ``frame``: its own duration where the file says, else one frame
    at the input's rate."""
    if frame.duration and frame.time_base:
        return float(frame.duration * frame.time_base)
    return 1 / (info.fps or float(clip.fps))


def read_frames(data: bytes, info: ClipInfo, clip: ClipPlan) -> Iterator[tuple[np.ndarray, bool]]:
    """The frame shown at each tick of ``clip.fps``, upright and at ``clip.size``, with whether it
    is a new input frame (False: the previous one repeated, so it needs no new drawing).

    Raises :class:`ClipError` when not one frame decodes; a file cut short yields the frames it has.
    """
    tick = 1 / float(clip.fps)
    # A frame counts as shown at a tick it starts up to half an input frame after, so that times
    # rounded to the millisecond (WebM's) or a 29.97 fps input still keep every other frame of 30
    # fps, not now one and now three.
    slack = 0.5 / (info.fps or float(clip.fps))
    given = 0
    held: np.ndarray | None = None
    held_new = False
    start: float | None = None
    decoded = 0
    until = 0.0  # when the held frame stops being shown, in seconds from the first frame
    budget = MAX_INPUT_FRAMES_PER_S * max(clip.seconds, 1.0)
    with _open(data) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        frames = container.decode(stream)
        while given < clip.frames:
            try:
                frame = next(frames)
            except StopIteration:
                break
            except (av.FFmpegError, ValueError):
                break  # cut short or damaged: keep what came before
            decoded += 1
            if decoded > budget:
                break
            at = frame.time if frame.time is not None else (decoded - 1) / (info.fps or float(clip.fps))
            start = at if start is None else start
            at -= start
            # Every tick before this frame's time (less the slack) shows the frame held until now.
            while held is not None and given < clip.frames and given * tick < at - slack:
                yield held, held_new
                held_new = False
                given += 1
            held, held_new = _upright(frame, info.rotation, clip.size, clip.crop), True
            until = at + _shown_for(frame, info, clip)
        # The last frame lasts as long as the file says it is shown: not to the declared end of a
        # file cut short, whose missing part would otherwise come out as a still picture.
        while held is not None and given < clip.frames and given * tick < until - slack:
            yield held, held_new
            held_new = False
            given += 1
    if held is None:
        raise ClipError("I could not read any frame of that video.")


def first_frame(data: bytes, info: ClipInfo) -> np.ndarray:
    """The clip's first frame, upright, at its full size (to find the face an avatar is cut around)."""
    with _open(data) as container:
        try:
            frame = next(container.decode(container.streams.video[0]))
        except (StopIteration, av.FFmpegError, ValueError):
            raise ClipError("I could not read any frame of that video.") from None
        return _upright(frame, info.rotation, (info.width, info.height))


def _audio_packets(container: Any, seconds: float) -> list[Any] | None:
    """The first audio stream's packets up to ``seconds``, each checked to decode; None for a
    silent clip or one whose sound is damaged."""
    if not container.streams.audio:
        return None
    stream = container.streams.audio[0]
    kept = []
    try:
        for packet in container.demux(stream):
            if packet.dts is None or packet.pts is None:
                continue
            if packet.is_corrupt:
                break  # the file is cut short inside this packet: the sound before it is whole
            if packet.time_base is not None and float(packet.pts * packet.time_base) >= seconds:
                break
            stream.codec_context.decode(packet)  # raises on a damaged packet
            kept.append(packet)
    except (av.FFmpegError, ValueError):
        return None
    return kept or None


class Mp4Writer:
    """H.264 video (yuv420p, constant rate) in an MP4 with its index first, so Telegram
    can stream it; with ``sound_from`` (the input file), its sound up to the clip's length beside
    it: copied as it is where MP4 carries its codec, else re-encoded to AAC."""

    def __init__(self, clip: ClipPlan, sound_from: bytes | None = None, crf: int = 20) -> None:
        # faststart rewrites the file to put the index first, which needs a real file to reopen
        self._dir = scratch_dir()
        self._path = Path(self._dir.name) / "out.mp4"
        self._out = av.open(str(self._path), "w", format="mp4", options={"movflags": "+faststart"})
        self._video = self._out.add_stream("libx264", rate=clip.fps)
        self._video.width, self._video.height = clip.size
        self._video.pix_fmt = "yuv420p"
        self._video.options = {"crf": str(crf), "preset": "veryfast"}
        self._count = 0
        self.sound: str | None = None  # "kept", or "damaged" when the input's could not be read
        if sound_from is None:
            self._out.start_encoding()
            return
        with _open(sound_from) as source:
            packets = _audio_packets(source, clip.seconds)
            self.sound = "kept" if packets is not None else "damaged"
            if packets is None:
                self._out.start_encoding()
                return
            self._add_audio(source.streams.audio[0], packets)

    def _add_audio(self, source: Any, packets: list[Any]) -> None:
        """Every stream must exist before the header is written, so the sound's comes first."""
        if source.codec_context.name in COPIED_AUDIO:
            copy = self._out.add_stream_from_template(source)
            self._out.start_encoding()
            for packet in packets:
                packet.stream = copy
                self._out.mux(packet)
            return
        encoder = self._out.add_stream("aac", rate=source.codec_context.sample_rate or 44100)
        encoder.layout = source.codec_context.layout
        self._out.start_encoding()
        decoder = av.CodecContext.create(source.codec_context.name, "r")
        decoder.extradata = source.codec_context.extradata
        for packet in [*packets, None]:
            for frame in decoder.decode(packet):
                frame.pts = None
                self._out.mux(encoder.encode(frame))
        self._out.mux(encoder.encode(None))

    def write(self, rgb: np.ndarray) -> None:
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
        frame.pts = self._count  # in ticks of the rate the stream was made with
        self._count += 1
        self._out.mux(self._video.encode(frame))

    def finish(self) -> bytes:
        try:
            self._out.mux(self._video.encode(None))
            self._out.close()
            return self._path.read_bytes()
        finally:
            self.discard()

    def discard(self) -> None:
        """Let go of the file (a cancelled or failed clip): idempotent."""
        with contextlib.suppress(av.FFmpegError, ValueError):
            self._out.close()
        self._dir.cleanup()


def write_gif(frames: Iterator[np.ndarray], fps: Fraction) -> bytes:
    """An animated GIF (Pillow's adaptive palette per frame); frames are consumed as they come."""
    first = next(frames, None)
    if first is None:
        raise ClipError("I could not read any frame of that video.")
    out = io.BytesIO()
    delay = round(1000 / float(fps))
    Image.fromarray(first).save(out, "GIF", save_all=True, loop=0, duration=delay, optimize=False,
                                append_images=(Image.fromarray(f) for f in frames))
    return out.getvalue()


def write_webm(frames: list[np.ndarray], fps: Fraction, max_bytes: int) -> bytes:
    """A silent WebM of VP9 with its alpha (yuva420p; libvpx keeps the alpha plane beside the picture,
    WebM's ``alpha_mode``), as Telegram's video stickers are: the best quality of a few that fits
    ``max_bytes``, else the smallest. ``frames`` are RGBA arrays of one size."""
    out = b""
    for crf in (30, 38, 46, 54, 63):
        buf = io.BytesIO()
        with av.open(buf, "w", format="webm") as container:
            video = container.add_stream("libvpx-vp9", rate=fps)
            video.height, video.width = frames[0].shape[:2]
            video.pix_fmt = "yuva420p"
            video.options = {"crf": str(crf), "b": "0", "deadline": "good", "cpu-used": "4"}
            for i, rgba in enumerate(frames):
                frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgba), format="rgba")
                frame.pts = i
                container.mux(video.encode(frame))
            container.mux(video.encode(None))
        out = buf.getvalue()
        if len(out) <= max_bytes:
            break
    return out
