"""Int8 only where it keeps quality: the middle convolutions, calibrated on photos."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from PIL import Image

from inference.engine import exported_onnx, load_stylizer
from inference.generator import Generator
from inference.onnx_export import export
from inference.pipeline import ConvertSettings, convert_bytes, resize
from inference.quantize import conv_names, quantize, save_int8, worst_psnr
from testkit.pictures import PHOTOS, synthetic_image
from testkit.models import TINY_WIDTHS
from weights.store import ModelStore

pytestmark = pytest.mark.slow  # every test here quantizes and compiles a generator


def real_photos(names: list[str], side: int = 640) -> list[np.ndarray]:
    """Real photos (the ``photos`` fixture has checked they are there), scaled as the bot would."""
    return [np.asarray(resize(Image.open(PHOTOS / n).convert("RGB"), side)) for n in names]


def conv_inputs_from_dequantize(model: onnx.ModelProto) -> dict[str, bool]:
    """Each convolution: whether its weight comes through a DequantizeLinear (is int8)."""
    made_by = {out: node.op_type for node in model.graph.node for out in node.output}
    return {n.name: made_by.get(n.input[1]) == "DequantizeLinear" for n in model.graph.node if n.op_type == "Conv"}


def test_the_end_convolutions_stay_fp32_and_the_middle_ones_become_int8(tmp_path: Path) -> None:
    torch.manual_seed(0)
    fp32 = tmp_path / "tiny.onnx"
    fp32.write_bytes(export(Generator(TINY_WIDTHS).eval()))
    out = tmp_path / "tiny-int8.onnx"
    calibration = [np.asarray(synthetic_image(400, 340, seed)) for seed in (0, 1)]  # which convs: any input will do
    quantize(fp32, out, calibration, keep_fp32=2)
    int8 = conv_inputs_from_dequantize(onnx.load(str(out)))
    names = conv_names(fp32)
    assert list(int8) == names
    assert [int8[n] for n in names[:2] + names[-2:]] == [False] * 4
    assert all(int8[n] for n in names[2:-2])


def test_int8_hayao_stays_within_38_db_on_photos_it_was_not_calibrated_on(real_store: ModelStore, photos: list[Path],
                                                                          tmp_path: Path) -> None:
    entry, path = real_store.require("hayao")
    fp32 = exported_onnx(real_store, entry, path)
    out = tmp_path / "hayao-int8.onnx"
    # Two calibration photos, faces and a street: a third moved the worst held-out PSNR by 0.2 dB
    # (40.5 against 40.3) and cost 20 CPU-s.
    quantize(fp32, out, real_photos(["group_3_faces.jpg", "street_1279x867.jpg"]))
    held_out = real_photos(["town_1280x854.jpg", "portrait_closeup.jpg"], 720)
    assert worst_psnr(fp32, out, held_out, side=480) >= 38.0

    own = ModelStore(tmp_path / "home")  # not the shared store: the bots' style menus stay as they are
    saved = save_int8(own, entry, "hayao-int8", out, 2)
    model = load_stylizer(ModelStore(own.home), saved.name)  # as a fresh process finds it
    result = convert_bytes((PHOTOS / "square_512.jpg").read_bytes(), model, ConvertSettings(max_side=256, faces=False))
    assert result.output_size == (256, 256) and result.style == "hayao-int8"
