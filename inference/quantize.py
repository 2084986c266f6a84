"""Int8 where it keeps quality: static QDQ quantization of the middle convolutions only.

Measured on Hayao at 720 px, 2 cores, against our fp32 onnxruntime export
(docs/benchmarks.md, "Int8"): every convolution in int8 ran 1.26x faster but lost
colour (34 dB worst photo); quantizing the normalisations and activations
too, onnxruntime's default, gave a purple cast (25.5 dB). Keeping the two
convolutions at each end in fp32, with percentile calibration, measured
1.20x at 39 dB worst: that is what :func:`quantize` does.

Calibration needs photos, so the result is made on the operator's machine
(``animebot quantize``) and installed as a style of its own, like the lite
models; nothing quantized is part of the repository.
"""
from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from weights.registry import ModelEntry
    from weights.store import ModelStore

CROP = 320  # calibration crops: one size, so percentile statistics can be pooled
PERCENTILE = 99.99
KEEP_FP32 = 2  # convolutions kept in fp32 at each end of the net


def conv_names(onnx_path: Path) -> list[str]:
    """The graph's convolutions, input to output."""
    import onnx

    return [n.name for n in onnx.load(str(onnx_path)).graph.node if n.op_type == "Conv"]


def calibration_crops(photos: Sequence[np.ndarray], crop: int = CROP) -> Iterator[np.ndarray]:
    """NHWC float crops in [-1, 1] from RGB uint8 photos: the centre, and the corners of larger ones."""
    for photo in photos:
        h, w = photo.shape[:2]
        if min(h, w) < crop:
            continue
        corners = {((h - crop) // 2, (w - crop) // 2), (0, 0), (h - crop, w - crop)}
        for y, x in sorted(corners):
            tile = photo[y:y + crop, x:x + crop].astype(np.float32) / 127.5 - 1
            yield np.ascontiguousarray(tile[None])


def quantize(fp32: Path, out: Path, photos: Sequence[np.ndarray], keep_fp32: int = KEEP_FP32) -> None:
    """Write an int8 copy of the fp32 ONNX generator ``fp32`` to ``out``, calibrated on ``photos``."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    crops = list(calibration_crops(photos))
    if not crops:
        raise ValueError(f"no photo is at least {CROP} px on each side to calibrate with")
    convs = conv_names(fp32)
    keep = convs[:keep_fp32] + convs[len(convs) - keep_fp32:] if keep_fp32 else []

    class Crops(CalibrationDataReader):
        def __init__(self) -> None:
            self._items = iter({"image": c} for c in crops)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._items, None)

    with contextlib.redirect_stdout(io.StringIO()):  # the calibrator prints its histogram settings
        quantize_static(
            str(fp32), str(out), Crops(), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
            op_types_to_quantize=["Conv"], nodes_to_exclude=keep,
            calibrate_method=CalibrationMethod.Percentile, extra_options={"CalibPercentile": PERCENTILE},
        )


def worst_psnr(fp32: Path, int8: Path, photos: Sequence[np.ndarray], side: int = 720) -> float:
    """The lowest PSNR, over ``photos`` drawn at ``side`` px, of the int8 model against the fp32 one."""
    import onnxruntime as ort
    from PIL import Image

    from inference.backends import OnnxStylizer
    from inference.pipeline import resize, stylize

    def model(path: Path) -> OnnxStylizer:
        return OnnxStylizer(path.stem, ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]), 4)

    a, b = model(fp32), model(int8)
    worst = float("inf")
    for photo in photos:
        img = resize(Image.fromarray(photo), side)
        x, y = (np.asarray(stylize(img, m), np.float64) for m in (a, b))
        mse = float(np.mean((x - y) ** 2))
        worst = min(worst, float("inf") if mse == 0 else 10 * np.log10(255**2 / mse))
    return worst


def save_int8(store: "ModelStore", base: "ModelEntry", name: str, onnx_file: Path, keep_fp32: int) -> "ModelEntry":
    """Install the quantized generator as a style of its own (``name``) in the local registry."""
    return store.add_derived(base, name, f"int8 ({keep_fp32} fp32 convolutions at each end)", "onnx",
                             onnx_file.read_bytes())
