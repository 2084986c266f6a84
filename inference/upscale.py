"""HD: a drawing doubled on each side by Real-CUGAN 2x, in tiles so memory stays bounded.

The net (inference/upscale_graph.py) takes RGB in [0, 1] with 18 px of
context on every side, which its unpadded convolutions and crops eat: an
input of (h + 36) x (w + 36) comes out 2h x 2w. Like realcugan-ncnn-vulkan,
the picture's own edges get that context by reflection, and a picture with an
odd side one more reflected pixel (the net halves the size twice inside).

A big picture is drawn in tiles that overlap by those 18 px, so each tile's
result is what the whole picture's pass gives there, but for the squeeze-and-
excite gates, which average over what the pass sees (a tile, not the
picture): a tiled 720 x 480 drawing is 48 dB from one pass, far closer than
any resize (docs/benchmarks.md, "HD"). Tiles start on even pixels, so the
net's stride-2 grid is the whole picture's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from inference.backends import OnnxStylizer, OpenVinoStylizer, Stylizer, onnx_session, release_buffers
from inference.errors import ModelError
from inference.imageio import decode, encode
from inference.pipeline import Converted
from inference.upscale_graph import exported

CONTEXT = 18  # px of context the net eats on each side
SCALE = 2
UPSCALER_NAME = "realcugan_up2x"  # what a result says drew it (Converted.style)
# The most input pixels (context included) drawn in one pass. A pass's memory grows with its pixels:
# the second UNet works at twice the size with 64 channels, about 2.4 KB an input pixel in fp32 (a
# 720 x 480 drawing in one pass peaked at 1034 MB; docs/benchmarks.md, "HD"). At 400 x 400 a tile's
# buffers are about 400 MB, and HD peaks near 500 MB on a 720 px drawing, a 1280 px one or a panorama
# alike, while the overlap a tile computes twice costs about a tenth more pixels on a 720 px drawing
# (tiles of 256 x 256 would cost a third more).
TILE_PIXELS = 400 * 400


@dataclass(frozen=True)
class Span:
    """Where one tile lies along one axis: its first pixel and its length, in the evened picture."""

    start: int
    length: int


def spans(n: int, tile: int) -> list[Span]:
    """Tiles of ``tile`` px (even) covering ``n`` px (even): equal tiles, the last one moved back to
    end at the edge, so every tile has one shape (OpenVINO compiles one); starts stay even, so the
    net's stride-2 grid is the whole picture's."""
    if n <= tile:
        return [Span(0, n)]
    starts = list(range(0, n - tile, tile)) + [n - tile]
    return [Span(s, tile) for s in starts]


def tile_shape(h: int, w: int, budget: int = TILE_PIXELS) -> tuple[int, int]:
    """The tile (height, width) for an evened ``h`` x ``w`` picture: the whole picture when it fits in
    ``budget`` pixels with its context, else the grid of equal even tiles that fits and computes the
    fewest pixels, overlap included."""
    best: tuple[int, int, int] | None = None
    for rows in range(1, h // 2 + 1):
        th = _even(-(-h // rows))
        room = (budget // (th + 2 * CONTEXT) - 2 * CONTEXT) // 2 * 2  # the widest even tile that fits
        if room < 2:
            continue
        cols = -(-w // room)
        tw = _even(-(-w // cols))
        cost = rows * cols * (th + 2 * CONTEXT) * (tw + 2 * CONTEXT)
        if best is None or cost < best[0]:
            best = (cost, th, tw)
    if best is None:
        raise ValueError(f"a tile budget of {budget} px is too small")
    return best[1], best[2]


def _even(n: int) -> int:
    return n + n % 2


class Upscaler:
    """Real-CUGAN 2x on a loaded runner (OpenVINO, or onnxruntime for the checks)."""

    def __init__(self, model: Stylizer, budget: int = TILE_PIXELS) -> None:
        self.model = model
        self.budget = budget
        self.backend = model.backend
        self.precision: str = getattr(model, "precision", "f32")

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        """An H x W x 3 uint8 picture doubled: 2H x 2W x 3 uint8."""
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
            raise ValueError("upscale takes an H x W x 3 uint8 RGB picture")
        h, w = rgb.shape[:2]
        x = rgb.astype(np.float32) * (1 / 255)
        padded = np.pad(x, ((CONTEXT, CONTEXT + h % 2), (CONTEXT, CONTEXT + w % 2), (0, 0)), mode="reflect")
        eh, ew = _even(h), _even(w)
        th, tw = tile_shape(eh, ew, self.budget)
        out = np.empty((SCALE * eh, SCALE * ew, 3), np.uint8)
        for ys in spans(eh, th):
            for xs in spans(ew, tw):
                part = padded[ys.start:ys.start + ys.length + 2 * CONTEXT, xs.start:xs.start + xs.length + 2 * CONTEXT]
                y = self.model(np.ascontiguousarray(part))
                out[SCALE * ys.start:SCALE * (ys.start + ys.length), SCALE * xs.start:SCALE * (xs.start + xs.length)] \
                    = np.clip(np.rint(y * 255), 0, 255).astype(np.uint8)
        release_buffers(self.model)
        return out[:SCALE * h, :SCALE * w]


def from_ncnn(param: Path, weights: Path, digest: str, cache_dir: Path, backend: str = "openvino",
              threads: int | None = None, budget: int = TILE_PIXELS) -> Upscaler:
    """Real-CUGAN from its installed ncnn files, rebuilt to ONNX once (cached under ``cache_dir``, named
    by ``digest``) and run by OpenVINO, or by onnxruntime when ``backend`` says so. A cached graph
    that does not load is made again, once."""
    onnx_path = exported(param, weights, digest, cache_dir)
    try:
        return _open(onnx_path, backend, threads, cache_dir, budget)
    except Exception:
        onnx_path.unlink(missing_ok=True)
    try:
        return _open(exported(param, weights, digest, cache_dir), backend, threads, cache_dir, budget)
    except Exception as exc:
        raise ModelError(f"{param.name}: {backend} cannot load the rebuilt network ({exc.__class__.__name__})") from exc


def _open(onnx_path: Path, backend: str, threads: int | None, cache_dir: Path, budget: int) -> Upscaler:
    if backend == "onnxruntime":
        return Upscaler(OnnxStylizer(UPSCALER_NAME, onnx_session(onnx_path, threads)), budget)
    return Upscaler(OpenVinoStylizer(UPSCALER_NAME, onnx_path, threads, cache_dir=cache_dir / "openvino"), budget)


def upscale_file(data: bytes, upscaler: Upscaler, fmt: str = "jpg", quality: int = 92) -> Converted:
    """A drawing's file doubled, as a ``fmt`` file: HD is made from the very file the user has (a
    result in the chat, or the CLI's drawing), so it is that picture, doubled. ImageError for bytes
    that are no picture."""
    t0 = time.perf_counter()
    drawing = np.asarray(decode(data))
    t1 = time.perf_counter()
    doubled = upscaler(drawing)
    t2 = time.perf_counter()
    out = encode(Image.fromarray(doubled, "RGB"), fmt, quality)
    h, w = drawing.shape[:2]
    return Converted(data=out, input_size=(w, h), output_size=(SCALE * w, SCALE * h), style=UPSCALER_NAME,
                     backend=upscaler.backend, timings={"decode_s": t1 - t0, "hd_s": t2 - t1,
                                                        "encode_s": time.perf_counter() - t2})
