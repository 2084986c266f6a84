"""The selfie segmentation rebuild, checked against the original file run by a runner of our own.

Neither LiteRT nor OpenVINO runs the published file (its custom transposed
convolution), so the reference here is written separately from
inference/segmentation.py: it reads the flatbuffer itself, computes every
operator in TFLite's own NHWC layout with numpy, and turns float16 weights
into float32 by itself. The rebuild (PyTorch, exported to ONNX, run by
onnxruntime) must give the same mask.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import tflite
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image

from inference.segmentation import SIDE, Segmenter, exported, read_graph
from testkit.pictures import PHOTOS

OPS = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


class Reference:
    """The TFLite graph interpreted step by step in NHWC float32, with numpy only."""

    def __init__(self, data: bytes) -> None:
        self.m = tflite.Model.GetRootAsModel(data, 0)
        self.g = self.m.Subgraphs(0)

    def tensor(self, i: int) -> np.ndarray | None:
        t = self.g.Tensors(i)
        raw = self.m.Buffers(t.Buffer()).DataAsNumpy()
        if isinstance(raw, int):
            return None
        dtype = {tflite.TensorType.FLOAT32: np.float32, tflite.TensorType.FLOAT16: np.float16,
                 tflite.TensorType.INT32: np.int32}[t.Type()]
        return raw.view(dtype).reshape(t.ShapeAsNumpy())

    @staticmethod
    def opts(op: object, cls: type) -> object:
        o = cls()
        table = op.BuiltinOptions()  # type: ignore[attr-defined]
        o.Init(table.Bytes, table.Pos)
        return o

    @staticmethod
    def pad_same(x: np.ndarray, k: int, s: int) -> np.ndarray:
        n = x.shape[1]  # square maps only, as in this graph
        total = max(((n + s - 1) // s - 1) * s + k - n, 0)
        lo = total // 2
        return np.pad(x, ((0, 0), (lo, total - lo), (lo, total - lo), (0, 0)))

    def conv(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, s: int, same: bool, depthwise: bool) -> np.ndarray:
        k = w.shape[1]
        if same:
            x = self.pad_same(x, k, s)
        win = sliding_window_view(x[0], (k, k), axis=(0, 1))[::s, ::s]  # H', W', C, kh, kw
        if depthwise:  # w: 1, kh, kw, C
            y = np.einsum("hwcij,ijc->hwc", win, w[0])
        else:  # w: O, kh, kw, I
            y = np.einsum("hwcij,oijc->hwo", win, w)
        return (y + b)[None].astype(np.float32)

    @staticmethod
    def resize_half_pixel(x: np.ndarray, h: int, w: int) -> np.ndarray:
        def axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            pos = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
            lo = np.floor(pos).astype(int)
            return lo, np.minimum(lo + 1, n_in - 1), (pos - lo).astype(np.float32)

        y0, y1, fy = axis(x.shape[1], h)
        x0, x1, fx = axis(x.shape[2], w)
        rows = x[:, y0] * (1 - fy)[None, :, None, None] + x[:, y1] * fy[None, :, None, None]
        return rows[:, :, x0] * (1 - fx)[None, None, :, None] + rows[:, :, x1] * fx[None, None, :, None]

    def run(self, image: np.ndarray, replaced: dict[int, np.ndarray] | None = None) -> np.ndarray:
        """The mask of a 256 x 256 x 3 picture in [0, 1]; ``replaced`` gives some tensors other values."""
        vals: dict[int, np.ndarray] = {self.g.Inputs(0): image[None].astype(np.float32), **(replaced or {})}

        def get(i: int) -> np.ndarray:
            if i not in vals:
                c = self.tensor(i)
                assert c is not None, f"tensor {i} is neither computed nor constant"
                vals[i] = c.astype(np.float32)
            return vals[i]

        for n in range(self.g.OperatorsLength()):
            op = self.g.Operators(n)
            code = self.m.OperatorCodes(op.OpcodeIndex())
            kind = OPS[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())]
            ins = [op.Inputs(j) for j in range(op.InputsLength())]
            if op.Outputs(0) in vals:  # replaced
                continue
            x = get(ins[0])
            if kind == "DEQUANTIZE":
                y = x
            elif kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                o = self.opts(op, tflite.Conv2DOptions if kind == "CONV_2D" else tflite.DepthwiseConv2DOptions)
                y = self.conv(x, get(ins[1]), get(ins[2]), o.StrideW(), o.Padding() == tflite.Padding.SAME,
                              kind == "DEPTHWISE_CONV_2D")
            elif kind == "ADD":
                y = x + get(ins[1])
            elif kind == "MUL":
                y = x * get(ins[1])
            elif kind == "RELU":
                y = np.maximum(x, 0)
            elif kind == "HARD_SWISH":
                y = x * np.clip(x + 3, 0, 6) / 6
            elif kind == "LOGISTIC":
                y = 0.5 * (1 + np.tanh(x / 2))  # the sigmoid, without exp's overflow
            elif kind == "AVERAGE_POOL_2D":
                y = x.mean(axis=(1, 2), keepdims=True)
            elif kind == "RESIZE_BILINEAR":
                h, w = self.tensor(ins[1])  # type: ignore[misc]
                y = self.resize_half_pixel(x, int(h), int(w))
            elif kind == "CUSTOM":
                assert code.CustomCode() == b"Convolution2DTransposeBias"
                _pad, sw, sh = struct.unpack("<3i", op.CustomOptionsAsNumpy().tobytes()[:12])
                w, b = get(ins[1]), get(ins[2])  # w: O, kh, kw, I; each input pixel writes one kh x kw block
                _, hh, ww, _ = x.shape
                y = np.zeros((1, hh * sh, ww * sw, w.shape[0]), np.float32)
                for i in range(w.shape[1]):
                    for j in range(w.shape[2]):
                        y[:, i::sh, j::sw, :] = np.einsum("nhwc,oc->nhwo", x, w[:, i, j, :])
                y += b
            else:
                raise AssertionError(f"the reference does not know {kind}")
            vals[op.Outputs(0)] = y.astype(np.float32)
        return vals[self.g.Outputs(0)][0, :, :, 0]


def _square(photo: Path) -> np.ndarray:
    img = Image.open(photo).convert("RGB").resize((SIDE, SIDE), Image.Resampling.BILINEAR)
    return np.asarray(img, np.float32) / 255.0


@pytest.fixture(scope="module")
def segmenter(selfie_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Segmenter:
    return Segmenter(exported(selfie_file, "test", tmp_path_factory.mktemp("cache")), threads=1)


@pytest.mark.parametrize("name", ["portrait_closeup.jpg", "group_3_faces.jpg", "street_1279x867.jpg"])
def test_the_rebuild_gives_the_original_files_mask(segmenter: Segmenter, selfie_file: Path, photos: list[Path],
                                                   name: str) -> None:
    x = _square(PHOTOS / name)
    want = Reference(selfie_file.read_bytes()).run(x)
    got = segmenter.raw(x)
    assert got.shape == want.shape == (SIDE, SIDE)
    assert np.abs(got - want).max() < 1e-3
    # and the mask means something: a person fills the close-up's centre, no one stands in its top corners
    if name == "portrait_closeup.jpg":
        assert want[128, 128] > 0.9 and want[:20, :20].max() < 0.1 and want[:20, -20:].max() < 0.1


def test_the_reference_tells_a_wrong_transposed_kernel(selfie_file: Path, photos: list[Path]) -> None:
    """The comparison can fail: a custom operator whose kernel is read the other way round (HW swapped,
    what a wrong permutation gives) changes the mask's edges by more than the bound above."""
    graph = read_graph(selfie_file.read_bytes())
    step = next(s for s in graph.steps if s.kind == "TRANSPOSE_CONV_BIAS")
    w = graph.consts[step.ins[1]]
    assert w.shape == (1, 2, 2, 16) and not np.allclose(w, w.transpose(0, 2, 1, 3))
    ref = Reference(selfie_file.read_bytes())
    x = _square(PHOTOS / "portrait_closeup.jpg")
    right = ref.run(x)
    wrong = ref.run(x, {step.ins[1]: w.transpose(0, 2, 1, 3).copy()})
    assert np.abs(right - wrong).max() > 1e-2


def test_an_unknown_operator_is_refused(hayao_file: Path) -> None:
    """Another TFLite model (the Hayao generator) is no selfie segmentation: a sentence, not a wrong mask."""
    from inference.errors import ModelError

    with pytest.raises(ModelError, match="not part of the selfie segmentation"):
        read_graph(hayao_file.read_bytes())
