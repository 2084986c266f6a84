"""Clips made in the tests themselves with PyAV: pans and zooms over a photo, with or without sound.

Nothing is downloaded: each clip is a camera path over a real photo, encoded
the way a phone or Telegram would (H.264 in MP4, VP9 in WebM, a palette GIF).
"""
from __future__ import annotations

import io
from fractions import Fraction

import av
import numpy as np
from PIL import Image


def pan_frames(photo: bytes, frames: int, size: tuple[int, int], travel: float = 0.15,
               zoom: float = 1.0) -> list[np.ndarray]:
    """``frames`` views of ``size`` sliding ``travel`` of the photo's width to the right (and
    zooming in by ``zoom`` over the clip); travel 0 and zoom 1: a still camera."""
    img = Image.open(io.BytesIO(photo)).convert("RGB")
    w, h = img.size
    aspect = size[0] / size[1]
    out = []
    for i in range(frames):
        f = i / max(1, frames - 1)
        scale = 1 + (zoom - 1) * f
        ch = min(h, w / aspect / (1 + travel)) / scale
        cw = ch * aspect
        left = max(0.0, (w - cw * (1 + travel * scale)) / 2) + travel * cw * f
        top = max(0.0, (h - ch) / 2)
        view = img.resize(size, Image.Resampling.BILINEAR, box=(left, top, left + cw, top + ch))
        out.append(np.asarray(view))
    return out


def mp4(frames: list[np.ndarray], fps: float, sound_s: float = 0.0, rotation: int = 0, fmt: str = "mp4",
        codec: str = "libx264", audio_codec: str = "aac", times: list[float] | None = None,
        garbled_sound: bool = False) -> bytes:
    """Encode ``frames`` (RGB arrays of one size): H.264 MP4 by default, any container and codec
    PyAV has; ``sound_s`` seconds of a 440 Hz tone (``garbled_sound``: each sound packet's bytes
    replaced by random ones, as in a damaged file); ``rotation`` stored as display side data
    (degrees counter-clockwise, as a phone records a portrait video); ``times`` (seconds) for a
    variable frame rate, without B-frames as a phone records it (with them, the MP4 muxer
    declares the length up to the last decode time, short of the last frame's)."""
    buf = io.BytesIO()
    rng = np.random.default_rng(0)
    with av.open(buf, "w", format=fmt) as out:
        h, w = frames[0].shape[:2]
        video = out.add_stream(codec, rate=Fraction(fps).limit_denominator(1001))
        video.width, video.height, video.pix_fmt = w, h, "yuv420p"
        if times:
            video.options = {"bf": "0"}
        ticks = 1000
        video.codec_context.time_base = Fraction(1, ticks)
        if rotation:
            video.set_display_rotation(rotation)
        # FFmpeg's own Vorbis encoder (the wheel has no libvorbis) is experimental and stereo only
        layout = "stereo" if audio_codec == "vorbis" else "mono"
        audio = out.add_stream(audio_codec, rate=48000, layout=layout) if sound_s else None
        if audio is not None and audio_codec == "vorbis":
            audio.codec_context.options = {"strict": "experimental"}
        out.start_encoding()
        for i, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            frame.pts = round((times[i] if times else i / fps) * ticks)
            frame.time_base = video.codec_context.time_base
            out.mux(video.encode(frame))
        out.mux(video.encode(None))
        if audio is not None:
            rate, chunk = 48000, 1024
            t = np.arange(int(sound_s * rate)) / rate
            tone = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
            for start in range(0, len(tone), chunk):
                part = tone[start:start + chunk]
                channels = np.repeat(part[None, :], 2 if layout == "stereo" else 1, axis=0)
                frame = av.AudioFrame.from_ndarray(channels, format="fltp", layout=layout)
                frame.sample_rate = rate
                frame.pts = start
                out.mux(_garbled(audio.encode(frame), rng) if garbled_sound else audio.encode(frame))
            out.mux(audio.encode(None))
    return buf.getvalue()


def grainy_mp4(photo: bytes, at_least: int, size: tuple[int, int] = (1280, 720), fps: int = 30) -> bytes:
    """A pan over a real photo with a camera's grain, in H.264 at the high bitrate a phone records grain at,
    as long as it takes to make at least ``at_least`` bytes: a clip too big for Telegram's 20 MB."""
    frames = pan_frames(photo, 2 * fps, size, travel=0.2)
    rng = np.random.default_rng(0)
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        video = out.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = size[0], size[1], "yuv420p"
        video.options = {"preset": "ultrafast", "crf": "18"}
        i = 0
        while buf.tell() < at_least:  # the pan goes back and forth until the file is big enough
            view = frames[i % len(frames)] if i // len(frames) % 2 == 0 else frames[-1 - i % len(frames)]
            grainy = np.clip(view + rng.integers(-12, 13, view.shape, dtype=np.int16), 0, 255).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(grainy, format="rgb24")
            frame.pts = i
            out.mux(video.encode(frame))
            i += 1
        out.mux(video.encode(None))
    return buf.getvalue()


def _garbled(packets: list[av.Packet], rng: np.random.Generator) -> list[av.Packet]:
    """``packets`` with their bytes replaced by random ones of the same length, timing kept."""
    out = []
    for p in packets:
        q = av.Packet(rng.integers(0, 256, p.size, dtype=np.uint8).tobytes())
        q.pts, q.dts, q.duration, q.time_base, q.stream = p.pts, p.dts, p.duration, p.time_base, p.stream
        out.append(q)
    return out


def numbered_frames(count: int, size: tuple[int, int], bits: int = 8) -> list[np.ndarray]:
    """``count`` frames of ``size`` (its width a multiple of ``bits``) that say which they are:
    frame ``i`` is ``bits`` vertical stripes, white where ``i`` has that bit set, black elsewhere,
    which any encoder and resize keep readable."""
    w, h = size
    assert w % bits == 0, "each stripe must be as wide as the others"
    out = []
    for i in range(count):
        row = np.repeat(np.array([255 if i >> b & 1 else 0 for b in range(bits)], np.uint8), w // bits)
        out.append(np.ascontiguousarray(np.broadcast_to(row[None, :, None], (h, w, 3))))
    return out


def frame_number(rgb: np.ndarray, bits: int = 8) -> int:
    """Which of :func:`numbered_frames` ``rgb`` shows (at any size): each stripe read at its middle."""
    step = rgb.shape[1] / bits
    return sum(1 << b for b in range(bits) if rgb[:, int((b + 0.5) * step)].mean() > 127)


def gif(frames: list[np.ndarray], fps: float, transparent_corner: bool = False) -> bytes:
    """A palette GIF, as people save them; with ``transparent_corner`` the top-left quarter is
    transparent in every frame."""
    images = []
    for rgb in frames:
        img = Image.fromarray(rgb).convert("RGBA")
        if transparent_corner:
            alpha = np.full(rgb.shape[:2], 255, np.uint8)
            alpha[: rgb.shape[0] // 2, : rgb.shape[1] // 2] = 0
            img.putalpha(Image.fromarray(alpha))
        images.append(img)
    out = io.BytesIO()
    images[0].save(out, "GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0,
                   disposal=2)
    return out.getvalue()


def read_back(data: bytes) -> dict[str, object]:
    """What a viewer sees in a clip: frames (RGB arrays), duration, frame rate, size and sound."""
    with av.open(io.BytesIO(data)) as c:
        v = c.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(v)]
        seconds = float(v.duration * v.time_base) if v.duration else (c.duration or 0) / av.time_base
        return {"frames": frames, "seconds": seconds, "fps": float(v.average_rate or 0),
                "size": (v.codec_context.width, v.codec_context.height), "codec": v.codec_context.name,
                "audio": c.streams.audio[0].codec_context.name if c.streams.audio else None,
                "audio_s": float(c.streams.audio[0].duration * c.streams.audio[0].time_base)
                if c.streams.audio and c.streams.audio[0].duration else 0.0}
