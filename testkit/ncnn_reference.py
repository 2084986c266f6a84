"""Real-CUGAN run by ncnn's own runtime (PyPI ``ncnn``), the way realcugan-ncnn-vulkan runs it: the
reference our rebuild (inference/upscale.py) is checked and timed against.

The two files go in as they are; the picture is padded by 18 px of reflection (one more on an odd
side), run whole (no tiles), cropped to twice its size, scaled to 0-255, rounded and clipped
(../shared/models/MODELS.md). Tests and the bench import ``ncnn`` through :func:`load`, which the
tests skip on where the package is absent.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

CONTEXT = 18


class NcnnUpscaler:
    """One loaded ncnn network, on the CPU with ``threads`` threads; ``fp32`` turns off ncnn's float16
    storage and arithmetic (its defaults on a CPU that has them), for an exact reference."""

    def __init__(self, ncnn: Any, param: Path, weights: Path, threads: int = 2, fp32: bool = True) -> None:
        self.net = ncnn.Net()
        self.net.opt.use_vulkan_compute = False
        self.net.opt.num_threads = threads
        if fp32:
            for option in ("use_fp16_storage", "use_fp16_packed", "use_fp16_arithmetic", "use_bf16_storage"):
                setattr(self.net.opt, option, False)
        self.net.load_param(str(param))
        self.net.load_model(str(weights))
        self.ncnn = ncnn

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        """An H x W x 3 uint8 picture doubled by ncnn: 2H x 2W x 3 uint8."""
        h, w = rgb.shape[:2]
        x = np.pad(rgb.astype(np.float32) / 255, ((CONTEXT, CONTEXT + h % 2), (CONTEXT, CONTEXT + w % 2), (0, 0)),
                   mode="reflect")
        chw = np.ascontiguousarray(x.transpose(2, 0, 1))
        mat = self.ncnn.Mat(chw)  # wraps chw's memory without owning it: both stay referenced until the run ends
        extractor = self.net.create_extractor()
        extractor.input("in0", mat)
        _, out = extractor.extract("out0")
        y = np.array(out).transpose(1, 2, 0)[:2 * h, :2 * w]
        return np.clip(np.rint(y * 255), 0, 255).astype(np.uint8)


def load(param: Path, weights: Path, threads: int = 2, fp32: bool = True) -> NcnnUpscaler:
    """The reference, with ncnn imported here (an ImportError where the package is absent)."""
    import ncnn

    return NcnnUpscaler(ncnn, param, weights, threads, fp32)


def closeness(ours: np.ndarray, drawing: np.ndarray, param: Path, weights: Path, border: int = 24
              ) -> tuple[float, float]:
    """How close ``ours`` (an HD of ``drawing``) is to ncnn's Real-CUGAN of it, and how close a 2x Lanczos
    resize is, in dB, ``border`` px left out at each edge as the independent check does; the test is
    skipped where ncnn is absent."""
    import pytest
    from PIL import Image

    from testkit.pictures import psnr

    try:
        reference = load(param, weights, threads=1)(drawing)
    except ImportError:
        pytest.skip("the ncnn package is absent (pip install ncnn; it is in the test extra)")
    h, w = drawing.shape[:2]
    lanczos = np.asarray(Image.fromarray(drawing).resize((2 * w, 2 * h), Image.Resampling.LANCZOS))
    inner = np.s_[border:-border, border:-border]
    return psnr(ours[inner], reference[inner]), psnr(lanczos[inner], reference[inner])
