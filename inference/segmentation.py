"""Where the person is: MediaPipe's Selfie Segmentation, rebuilt from its TFLite file.

The published file is a float32 graph with float16 weights, and one custom
operator (``Convolution2DTransposeBias``, a transposed convolution plus bias)
that neither OpenVINO's TFLite reader nor the LiteRT interpreter knows. So the
graph is read here operator by operator and rebuilt as a PyTorch module of the
same maths, exported once to ONNX (cached, like the styles' exports) and run by
onnxruntime: a drawing process that finds the export never imports torch.

The model wants the picture stretched to 256 x 256, RGB in [0, 1], and gives
the probability of "person" per pixel (already through its sigmoid). It is made
for one or two people near the camera, so it is given a head-and-shoulders
crop (inference/sticker.py), not a whole group photo.
"""
from __future__ import annotations

import io
import struct
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from storage.files import write_atomically
from inference.backends import onnx_session
from inference.errors import ModelError

if TYPE_CHECKING:
    import torch

SIDE = 256  # the model's input, square: the picture is stretched to it, as MediaPipe's own graph does
EXPORT_REVISION = 1  # raise when the rebuild changes, so cached exports are made again
CUSTOM_TRANSPOSE = "Convolution2DTransposeBias"


@dataclass(frozen=True)
class Step:
    """One operator of the graph: its kind, its input and output tensors, and what its options say
    (padding, strides, activation, or a resize's grid)."""

    kind: str
    ins: tuple[int, ...]
    out: int
    same: bool = False  # "SAME" padding, else "VALID"
    stride: tuple[int, int] = (1, 1)  # (height, width)
    act: int = 0  # TFLite's fused activation: 0 none, 1 relu, 3 relu6
    size: tuple[int, int] = (0, 0)  # a pool's window, a resize's output (height, width)
    half_pixel: bool = True  # a resize's grid


@dataclass
class Graph:
    """The graph's steps in order, its constants (as stored: NHWC, float32) and its ends."""

    steps: list[Step]
    consts: dict[int, np.ndarray]
    input: int
    output: int


def read_graph(data: bytes) -> Graph:
    """Every operator of the selfie segmentation graph, with its options; ModelError for any
    operator or option this rebuild does not do (rather than a wrong mask)."""
    import tflite

    from inference.tflite_import import TfliteGraph, op_options

    g = TfliteGraph(data)
    steps: list[Step] = []
    consts: dict[int, np.ndarray] = {}

    def const(index: int) -> int:
        consts[index] = g.const(index)
        return index

    for kind, ins, outs, op in g.ops:
        if kind == "DEQUANTIZE":  # float16 weights to float32: done once, by g.const
            continue
        out = outs[0]
        if kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            o = op_options(op, tflite.Conv2DOptions if kind == "CONV_2D" else tflite.DepthwiseConv2DOptions)
            if o.DilationWFactor() != 1 or o.DilationHFactor() != 1:  # type: ignore[attr-defined]
                raise ModelError(f"{kind} with dilation is not supported")
            if kind == "DEPTHWISE_CONV_2D" and o.DepthMultiplier() != 1:  # type: ignore[attr-defined]
                raise ModelError("a depthwise convolution with a depth multiplier is not supported")
            steps.append(Step(kind, (ins[0], const(ins[1]), const(ins[2])), out, same=o.Padding() == 0,  # type: ignore[attr-defined]
                              stride=(o.StrideH(), o.StrideW()), act=o.FusedActivationFunction()))  # type: ignore[attr-defined]
        elif kind in ("ADD", "MUL"):
            o = op_options(op, tflite.AddOptions if kind == "ADD" else tflite.MulOptions)
            steps.append(Step(kind, (ins[0], ins[1]), out, act=o.FusedActivationFunction()))  # type: ignore[attr-defined]
        elif kind in ("RELU", "HARD_SWISH", "LOGISTIC"):
            steps.append(Step(kind, (ins[0],), out))
        elif kind == "AVERAGE_POOL_2D":
            o = op_options(op, tflite.Pool2DOptions)
            shape = tuple(g.graph.Tensors(ins[0]).ShapeAsNumpy())
            window = (o.FilterHeight(), o.FilterWidth())  # type: ignore[attr-defined]
            if window != shape[1:3] or o.FusedActivationFunction():  # type: ignore[attr-defined]
                raise ModelError("only a global average pool is supported")
            steps.append(Step(kind, (ins[0],), out, size=window))
        elif kind == "RESIZE_BILINEAR":
            o = op_options(op, tflite.ResizeBilinearOptions)
            if o.AlignCorners():  # type: ignore[attr-defined]
                raise ModelError("align_corners upsampling is not supported")
            h, w = (int(v) for v in g.model.Buffers(g.graph.Tensors(ins[1]).Buffer()).DataAsNumpy().view(np.int32))
            steps.append(Step(kind, (ins[0],), out, size=(h, w), half_pixel=bool(o.HalfPixelCenters())))  # type: ignore[attr-defined]
        elif kind == "CUSTOM" and g.model.OperatorCodes(op.OpcodeIndex()).CustomCode() == CUSTOM_TRANSPOSE.encode():  # type: ignore[attr-defined]
            padding, stride_w, stride_h = struct.unpack("<3i", op.CustomOptionsAsNumpy().tobytes()[:12])  # type: ignore[attr-defined]
            steps.append(Step("TRANSPOSE_CONV_BIAS", (ins[0], const(ins[1]), const(ins[2])), out, same=padding == 1,
                              stride=(stride_h, stride_w)))
        else:
            raise ModelError(f"operator {kind} is not part of the selfie segmentation rebuild")
    return Graph(steps, consts, int(g.graph.Inputs(0)), int(g.graph.Outputs(0)))


def _nchw_weight(step: Step, w: np.ndarray) -> np.ndarray:
    """A kernel in PyTorch's layout: CONV_2D's OHWI to OIHW; a depthwise 1HWC to C1HW and the transposed
    convolution's OHWI to IOHW, which are the same move (the last axis first)."""
    return w.transpose(0, 3, 1, 2) if step.kind == "CONV_2D" else w.transpose(3, 0, 1, 2)


def build_net(graph: Graph) -> torch.nn.Module:
    """The graph as a PyTorch module (NCHW inside, NHWC in and out, as the file is)."""
    import torch
    import torch.nn.functional as F

    class SegmentationNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for step in graph.steps:
                if step.kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV_BIAS"):
                    w, b = (graph.consts[i] for i in step.ins[1:])
                    self.register_buffer(f"w{step.out}", torch.from_numpy(np.ascontiguousarray(_nchw_weight(step, w))))
                    self.register_buffer(f"b{step.out}", torch.from_numpy(np.ascontiguousarray(b.reshape(-1))))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            values = {graph.input: x.permute(0, 3, 1, 2)}
            for step in graph.steps:
                operands = step.ins[:2] if step.kind in ("ADD", "MUL") else step.ins[:1]  # the rest are weights
                values[step.out] = self._run(step, [values[i] for i in operands])
            return values[graph.output].permute(0, 2, 3, 1)

        def _run(self, step: Step, xs: list[torch.Tensor]) -> torch.Tensor:
            x = xs[0]
            if step.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
                w, b = getattr(self, f"w{step.out}"), getattr(self, f"b{step.out}")
                if step.same:
                    x = F.pad(x, _same_padding(x.shape[2:], w.shape[2:], step.stride))
                y = F.conv2d(x, w, b, stride=step.stride, groups=x.shape[1] if step.kind == "DEPTHWISE_CONV_2D" else 1)
            elif step.kind == "TRANSPOSE_CONV_BIAS":
                w, b = getattr(self, f"w{step.out}"), getattr(self, f"b{step.out}")
                if tuple(w.shape[2:]) != step.stride:  # SAME or VALID alike: each input pixel writes its own block
                    raise ModelError("a transposed convolution whose kernel is not its stride is not supported")
                y = F.conv_transpose2d(x, w, b, stride=step.stride)
            elif step.kind == "ADD":
                y = x + xs[1]
            elif step.kind == "MUL":
                y = x * xs[1]
            elif step.kind == "RELU":
                y = F.relu(x)
            elif step.kind == "HARD_SWISH":
                y = x * F.relu6(x + 3) / 6
            elif step.kind == "LOGISTIC":
                y = torch.sigmoid(x)
            elif step.kind == "AVERAGE_POOL_2D":
                y = x.mean(dim=(2, 3), keepdim=True)
            else:  # RESIZE_BILINEAR; read_graph turned away the grids this cannot do
                if not step.half_pixel:
                    raise ModelError("only half-pixel bilinear resizing is supported")
                y = F.interpolate(x, size=step.size, mode="bilinear", align_corners=False)
            return F.relu(y) if step.act == 1 else F.relu6(y) if step.act == 3 else y

    for step in graph.steps:
        if step.act not in (0, 1, 3):
            raise ModelError(f"fused activation {step.act} is not supported")
    return SegmentationNet().eval()


def _same_padding(size: torch.Size, kernel: torch.Size, stride: tuple[int, int]) -> tuple[int, int, int, int]:
    """TensorFlow's SAME padding (left, right, top, bottom): the odd pixel goes after, not before."""
    pads: list[int] = []
    for n, k, s in ((size[1], kernel[1], stride[1]), (size[0], kernel[0], stride[0])):
        total = max((-(-int(n) // s) - 1) * s + int(k) - int(n), 0)
        pads += [total // 2, total - total // 2]
    return pads[0], pads[1], pads[2], pads[3]


def export_onnx(tflite_path: Path) -> bytes:
    """The rebuilt net as ONNX (opset 17), one fixed 1 x 256 x 256 x 3 input."""
    import torch

    net = build_net(read_graph(tflite_path.read_bytes()))
    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
        torch.onnx.export(net, (torch.zeros(1, SIDE, SIDE, 3),), buf,  # type: ignore[arg-type]
                          dynamo=False, opset_version=17, input_names=["image"], output_names=["person"])
    return buf.getvalue()


def exported(tflite_path: Path, digest: str, cache_dir: Path) -> Path:
    """The cached ONNX export of the installed file, made on first use."""
    path = cache_dir / "onnx" / f"selfie-{digest[:16]}-r{EXPORT_REVISION}.onnx"
    if not path.is_file():
        write_atomically(path, export_onnx(tflite_path))
    return path


class Segmenter:
    """The person mask of a picture, from the exported net on onnxruntime."""

    def __init__(self, onnx_path: Path, threads: int | None = None) -> None:
        self.session: Any = onnx_session(onnx_path, threads)

    def raw(self, square: np.ndarray) -> np.ndarray:
        """The model's own output for a 256 x 256 x 3 float32 input in [0, 1]: 256 x 256 in [0, 1]."""
        out = self.session.run(None, {"image": square[None].astype(np.float32)})[0]
        return np.asarray(out)[0, :, :, 0]

    def mask(self, rgb: np.ndarray) -> np.ndarray:
        """How much each pixel of an H x W x 3 uint8 picture is the person, H x W in [0, 1]."""
        h, w = rgb.shape[:2]
        square = cv2.resize(rgb, (SIDE, SIDE), interpolation=cv2.INTER_AREA if min(h, w) > SIDE else cv2.INTER_LINEAR)
        person = self.raw(square.astype(np.float32) / 255.0)
        return np.clip(cv2.resize(person, (w, h), interpolation=cv2.INTER_LINEAR), 0.0, 1.0)
