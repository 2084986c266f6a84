"""An ncnn network (read by inference/ncnn_reader.py) rebuilt as an ONNX graph, NHWC in and out.

ONNX, written directly with ``onnx.helper``, rather than a PyTorch module
exported: a worker that makes the graph on first use then needs neither torch
(about 190 MB of RSS) nor ncnn, and the same file runs on OpenVINO (the
default backend) and on onnxruntime (the check, as for the styles). Only the
layer types Real-CUGAN uses are rebuilt; any other is a ModelError naming it,
never a silently wrong picture.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from inference.errors import ModelError
from inference.ncnn_reader import Layer, Network, read_network
from storage.files import write_atomically

EXPORT_REVISION = 1  # raise when the rebuild changes, so cached graphs are made again
# ncnn's activation types (parameter 9) this rebuild knows; leaky ReLU's slope is in parameter 10.
RELU, LEAKY, SIGMOID = 1, 2, 4
ADD, MUL = 0, 2  # BinaryOp's operations (parameter 0)


class _Builder:
    """The nodes and weights of the graph as it grows, and which ONNX value each ncnn blob is."""

    def __init__(self) -> None:
        self.nodes: list[object] = []
        self.weights: list[object] = []
        self.blobs: dict[str, str] = {}

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.weights.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def activate(self, layer: Layer, value: str) -> str:
        """``value`` through the layer's fused activation (parameter 9), if it has one."""
        act = int(layer.number(9))
        if act == 0:
            return value
        if act == RELU:
            return self.node("Relu", [value], f"{layer.name}_relu")
        if act == LEAKY:
            slope = float(layer.array(10)[0]) if layer.array(10) else 0.0
            return self.node("LeakyRelu", [value], f"{layer.name}_leaky", alpha=slope)
        if act == SIGMOID:
            return self.node("Sigmoid", [value], f"{layer.name}_sigmoid")
        raise ModelError(f"{layer.name}: ncnn activation type {act} is not rebuilt")


def _kernel(layer: Layer, transposed: bool) -> tuple[np.ndarray, int]:
    """A (de)convolution's kernel in ONNX's layout, and its size.

    ncnn keeps both kinds as (out, in, kh, kw). ONNX's ConvTranspose wants
    (in, out, kh, kw) and applies the kernel the same way round as ncnn's
    Deconvolution does (checked against ncnn's own run, tests/inference/test_upscale.py).
    """
    assert layer.weight is not None
    out, k = int(layer.number(0)), int(layer.number(1))
    if int(layer.number(2, 1)) != 1 or int(layer.number(11, k)) != k:
        raise ModelError(f"{layer.name}: dilated or non-square kernels are not rebuilt")
    w = layer.weight.reshape(out, -1, k, k)
    return (np.ascontiguousarray(w.transpose(1, 0, 2, 3)) if transposed else w), k


def _bias(b: _Builder, layer: Layer) -> list[str]:
    return [b.const(f"{layer.name}_b", layer.bias)] if layer.bias is not None else []


def _convolution(b: _Builder, layer: Layer, x: str) -> str:
    transposed = layer.kind == "Deconvolution"
    w, k = _kernel(layer, transposed)
    stride, pad = int(layer.number(3, 1)), int(layer.number(4, 0))
    if pad < 0:
        raise ModelError(f"{layer.name}: ncnn's automatic padding ({pad}) is not rebuilt")
    y = b.node("ConvTranspose" if transposed else "Conv", [x, b.const(f"{layer.name}_w", w), *_bias(b, layer)],
               layer.name, kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    return b.activate(layer, y)


def _inner_product(b: _Builder, layer: Layer, x: str) -> str:
    """A fully connected layer on a pooled (N, C, 1, 1) value, as a 1x1 convolution, so its result
    keeps the four axes the gate it computes is multiplied in with."""
    assert layer.weight is not None
    w = layer.weight.reshape(int(layer.number(0)), -1, 1, 1)
    y = b.node("Conv", [x, b.const(f"{layer.name}_w", w), *_bias(b, layer)], layer.name, kernel_shape=[1, 1])
    return b.activate(layer, y)


def _pooling(b: _Builder, layer: Layer, x: str) -> str:
    if int(layer.number(0)) != 1 or int(layer.number(4)) != 1:
        raise ModelError(f"{layer.name}: only global average pooling is rebuilt")
    return b.node("GlobalAveragePool", [x], layer.name)


def _crop(b: _Builder, layer: Layer, x: str) -> str:
    """ncnn's Crop with arrays of starts, ends (negative: from the end) and axes (of C, H, W),
    which are ONNX Slice's own meanings once the batch axis is counted."""
    starts, ends, axes = (np.array(layer.array(key), np.int64) for key in (9, 10, 11))
    if not len(starts) or len(starts) != len(ends) or len(ends) != len(axes) or (ends == -233).any():
        raise ModelError(f"{layer.name}: only a Crop with starts, ends and axes is rebuilt")
    axes = np.where(axes >= 0, axes + 1, axes)  # ncnn's axis 0 is C, ONNX's is the batch
    return b.node("Slice", [x, b.const(f"{layer.name}_starts", starts), b.const(f"{layer.name}_ends", ends),
                            b.const(f"{layer.name}_axes", axes)], layer.name)


def _binary(b: _Builder, layer: Layer, xs: list[str]) -> str:
    op = int(layer.number(0))
    if op not in (ADD, MUL) or len(xs) != 2:
        raise ModelError(f"{layer.name}: BinaryOp {op} is not rebuilt (only add and multiply)")
    return b.node("Add" if op == ADD else "Mul", xs, layer.name)


_RULES: dict[str, Callable[[_Builder, Layer, str], str]] = {
    "Convolution": _convolution, "Deconvolution": _convolution, "InnerProduct": _inner_product,
    "Pooling": _pooling, "Crop": _crop,
}


def build_onnx(net: Network) -> bytes:
    """The network as an ONNX model (opset 17): ``image`` N x H x W x 3 in, ``out`` N x H' x W' x 3."""
    from onnx import TensorProto, helper

    b = _Builder()
    b.blobs[net.input] = b.node("Transpose", ["image"], "image_nchw", perm=[0, 3, 1, 2])
    consumed: set[str] = set()
    for layer in net.layers:
        if layer.kind == "Input":
            continue
        xs = [b.blobs[name] for name in layer.inputs]
        consumed.update(layer.inputs)
        if layer.kind == "Split":  # the same value under several names
            b.blobs.update({name: xs[0] for name in layer.outputs})
        elif layer.kind == "BinaryOp":
            b.blobs[layer.outputs[0]] = _binary(b, layer, xs)
        elif layer.kind in _RULES:
            b.blobs[layer.outputs[0]] = _RULES[layer.kind](b, layer, xs[0])
        else:
            raise ModelError(f"{layer.name}: ncnn layer type {layer.kind} is not rebuilt")
    ends = [name for layer in net.layers for name in layer.outputs if name not in consumed]
    if len(ends) != 1:
        raise ModelError(f"the network has {len(ends)} outputs; one was expected")
    b.node("Transpose", [b.blobs[ends[0]]], "out", perm=[0, 2, 3, 1])
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, "height", "width", 3])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "out_height", "out_width", 3])
    graph = helper.make_graph(b.nodes, "ncnn_rebuilt", [image], [out], b.weights)  # type: ignore[arg-type]
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="animebot")
    return bytes(model.SerializeToString())


def exported(param: Path, weights: Path, digest: str, cache_dir: Path) -> Path:
    """The cached ONNX rebuild of the installed ncnn files, made on first use (``digest`` names them)."""
    path = cache_dir / "onnx" / f"ncnn-{digest[:16]}-r{EXPORT_REVISION}.onnx"
    if not path.is_file():
        write_atomically(path, build_onnx(read_network(param, weights)))
    return path
