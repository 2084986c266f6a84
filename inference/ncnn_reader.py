"""Read an ncnn network (``.param`` text and ``.bin`` weights) without ncnn.

Real-CUGAN is published as ncnn files (realcugan-ncnn-vulkan). Rather than
take ncnn's runtime into every worker, we read the two files here and rebuild
the network as an ONNX graph (inference/upscale_graph.py) that OpenVINO runs
like every other model; ncnn's own runtime stays a test dependency, the
independent reference the rebuild is checked against.

``.param`` is text: the magic 7767517, the layer and blob counts, then one line
per layer: its type, name, input and output counts, the blob names, then
``key=value`` parameters (a negative key holds an array, ``-23300 - key`` is
its id, and its first value is the count). ``.bin`` holds each weighted
layer's blobs in ``.param`` order: the kernel behind a 4-byte tag saying how
it is stored (float16 here, padded to 4 bytes), then the float32 bias untagged.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inference.errors import ModelError

MAGIC = 7767517
FLOAT16_TAG = 0x01306B47  # ncnn's tag for a blob of float16 values
FLOAT32_TAG = 0  # raw float32 values
ARRAY_KEY = -23300  # key -23300 - n is an array for parameter n
# The layer types whose weights are in .bin: (the parameter holding the kernel's value count,
# the parameter saying whether a bias follows).
WEIGHTED = {"Convolution": (6, 5), "Deconvolution": (6, 5), "InnerProduct": (2, 1)}
Value = int | float | tuple[int | float, ...]


@dataclass
class Layer:
    """One ncnn layer: what it is, its blobs, its parameters by id, and its weights once read."""

    kind: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: dict[int, Value]
    weight: np.ndarray | None = None  # float32, flat, in the order ncnn stores it
    bias: np.ndarray | None = None

    def get(self, key: int, default: Value = 0) -> Value:
        return self.params.get(key, default)

    def number(self, key: int, default: int | float = 0) -> int | float:
        value = self.params.get(key, default)
        if isinstance(value, tuple):
            raise ModelError(f"{self.name}: parameter {key} is an array where a number is expected")
        return value

    def array(self, key: int) -> tuple[int | float, ...]:
        value = self.params.get(key, ())
        return value if isinstance(value, tuple) else (value,)


@dataclass
class Network:
    """Every layer in the file's order (also the order of the computation)."""

    layers: list[Layer] = field(default_factory=list)

    @property
    def input(self) -> str:
        return next(layer.outputs[0] for layer in self.layers if layer.kind == "Input")


def _number(text: str) -> int | float:
    return float(text) if any(c in text for c in ".eE") else int(text)


def _params(items: list[str], where: str) -> dict[int, Value]:
    params: dict[int, Value] = {}
    for item in items:
        key_text, sep, value = item.partition("=")
        try:
            key = int(key_text)
            if not sep:
                raise ValueError(item)
            if key <= ARRAY_KEY:
                count, *values = (_number(v) for v in value.split(","))
                if count != len(values):
                    raise ValueError(item)
                params[ARRAY_KEY - key] = tuple(values)
            else:
                params[key] = _number(value)
        except ValueError:
            raise ModelError(f"{where}: parameter {item!r} is not ncnn's key=value") from None
    return params


def read_param(text: str) -> Network:
    """The layers of a ``.param`` file; ModelError for anything that is not ncnn's text format."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0] != [str(MAGIC)] or len(lines[1]) != 2:
        raise ModelError("not an ncnn .param file (its first line must be 7767517)")
    net = Network()
    for number, words in enumerate(lines[2:], start=3):
        where = f"line {number}"
        try:
            kind, name, n_in, n_out = words[0], words[1], int(words[2]), int(words[3])
            blobs = words[4:4 + n_in + n_out]
            if len(blobs) != n_in + n_out:
                raise ValueError
        except (IndexError, ValueError):
            raise ModelError(f"{where}: not an ncnn layer line") from None
        net.layers.append(Layer(kind, name, tuple(blobs[:n_in]), tuple(blobs[n_in:]),
                                _params(words[4 + n_in + n_out:], where)))
    if int(lines[1][0]) != len(net.layers):
        raise ModelError(f"the .param file promises {lines[1][0]} layers and has {len(net.layers)}")
    return net


def _blob(data: bytes, at: int, count: int, where: str) -> tuple[np.ndarray, int]:
    """A tagged weight blob of ``count`` values at ``at``, as float32, and where the next begins."""
    if at + 4 > len(data):
        raise ModelError(f"{where}: the .bin file ends before its weights")
    (tag,) = struct.unpack_from("<I", data, at)
    at += 4
    if tag == FLOAT16_TAG:
        size, dtype = count * 2, np.float16
        padded = size + -size % 4  # ncnn pads float16 blobs to whole 4-byte words
    elif tag == FLOAT32_TAG:
        size = padded = count * 4
        dtype = np.float32
    else:
        raise ModelError(f"{where}: weights stored as tag {tag:#010x} (quantized); only float16 and float32 are read")
    if at + size > len(data):
        raise ModelError(f"{where}: the .bin file ends inside its weights")
    return np.frombuffer(data, dtype, count, at).astype(np.float32), at + padded


def _raw(data: bytes, at: int, count: int, where: str) -> tuple[np.ndarray, int]:
    """``count`` untagged float32 values (a bias) at ``at``."""
    if at + count * 4 > len(data):
        raise ModelError(f"{where}: the .bin file ends inside its bias")
    return np.frombuffer(data, "<f4", count, at).astype(np.float32), at + count * 4


def read_network(param: Path, weights: Path) -> Network:
    """The layers of ``param`` with their weights from ``weights``; ModelError if the two disagree."""
    try:
        net = read_param(param.read_text(encoding="ascii"))
    except UnicodeDecodeError:
        raise ModelError(f"{param.name}: not an ncnn .param file (it is not text)") from None
    data = weights.read_bytes()
    at = 0
    for layer in net.layers:
        if layer.kind not in WEIGHTED:
            continue
        count_key, bias_key = WEIGHTED[layer.kind]
        where = f"{weights.name}, layer {layer.name}"
        layer.weight, at = _blob(data, at, int(layer.number(count_key)), where)
        if layer.number(bias_key):
            layer.bias, at = _raw(data, at, int(layer.number(0)), where)
    if at != len(data):
        raise ModelError(f"{weights.name}: {len(data) - at} bytes are left after the last layer's weights; "
                         f"it is not the weights of {param.name}")
    return net
