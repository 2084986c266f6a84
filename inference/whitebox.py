"""White-box Cartoonization (Wang and Yu, CVPR 2020) as a PyTorch module, read from its TFLite export.

The published TFLite file fixes its input at 512x512, but the network is a
fully convolutional U-Net followed by a guided filter, so rebuilt here it
runs at any size whose sides divide by 4. The TFLite graph is the authority
for every setting: its convolutions give the weights in graph order, their
options give the strides, and the LeakyReLU slope, the guided filter's
epsilon and radius, and the upsampling grid are read from their operators
rather than taken from the upstream source.

The graph also quantizes every activation to int8, the guided filter's
included; this float32 module does not, which is why it is close to, not
equal to, the TFLite runtime's output.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tflite
import torch
import torch.nn.functional as F
from torch import nn

from inference.errors import ModelError
from inference.generator import upsample_asymmetric
from inference.tflite_import import TfliteGraph, op_options

_CHANNEL = 32
_BLOCKS = 4
_CONVS = 5 + 2 * _BLOCKS + 5  # down path, residual blocks, up path (registration order below)


@dataclass(frozen=True)
class _GraphFacts:
    """What the TFLite graph says, checked before any module is built."""

    kernels: list[np.ndarray]  # OIHW, in graph order
    biases: list[np.ndarray]
    strides: list[int]
    alpha: float
    eps: float
    radius: int


class _ResBlock(nn.Module):
    """conv, LeakyReLU, conv, plus the input: upstream's ``resblock`` (no norm, no activation after the add)."""

    def __init__(self, ch: int, alpha: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.leaky_relu(self.conv1(x), self.alpha))


class WhiteboxCartoonizer(nn.Module):
    """Photo to cartoon: NCHW RGB in [-1, 1] in and out, height and width multiples of 4.

    The weights were trained on BGR. Rather than flipping channels at both
    ends, the loader reverses the first convolution's input channels and the
    last one's output channels; the guided filter treats each channel alike
    with the same constants, so it is indifferent to their order.
    Convolutions pad with zeros, as TF's 'SAME' does.
    """

    def __init__(self, alpha: float = 0.2, eps: float = 5e-3, radius: int = 1) -> None:
        super().__init__()
        c = _CHANNEL
        self.alpha, self.eps, self.radius = alpha, eps, radius
        # Registration order is the TFLite graph's CONV_2D order, which the loader relies on.
        self.conv_in = nn.Conv2d(3, c, 7, padding=3)
        self.down1 = nn.Conv2d(c, c, 3, stride=2)
        self.conv1 = nn.Conv2d(c, 2 * c, 3, padding=1)
        self.down2 = nn.Conv2d(2 * c, 2 * c, 3, stride=2)
        self.conv2 = nn.Conv2d(2 * c, 4 * c, 3, padding=1)
        self.blocks = nn.Sequential(*(_ResBlock(4 * c, alpha) for _ in range(_BLOCKS)))
        self.conv3 = nn.Conv2d(4 * c, 2 * c, 3, padding=1)
        self.up1 = nn.Conv2d(2 * c, 2 * c, 3, padding=1)
        self.conv4 = nn.Conv2d(2 * c, c, 3, padding=1)
        self.up2 = nn.Conv2d(c, c, 3, padding=1)
        self.conv_out = nn.Conv2d(c, 3, 7, padding=3)

    def _act(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, self.alpha)

    def _down(self, conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
        """A stride-2 3x3 conv padded as TF 'SAME' pads even sizes: one zero row and column, bottom and right."""
        return self._act(conv(F.pad(x, (0, 1, 0, 1))))

    def unet(self, x: torch.Tensor) -> torch.Tensor:
        """The generator before its guided filter (upstream ``unet_generator``)."""
        x0 = self._act(self.conv_in(x))
        x1 = self._act(self.conv1(self._down(self.down1, x0)))
        x2 = self.blocks(self._act(self.conv2(self._down(self.down2, x1))))
        x3 = upsample_asymmetric(self._act(self.conv3(x2)))
        x4 = upsample_asymmetric(self._act(self.conv4(self._act(self.up1(x3 + x1)))))
        return self.conv_out(self._act(self.up2(x4 + x0)))

    def forward(self, photo: torch.Tensor) -> torch.Tensor:
        out = guided_filter(photo, self.unet(photo), self.radius, self.eps)
        return out.clamp(-1.0, 1.0)  # upstream clips right after the net; the graph itself does not


def box_mean(x: torch.Tensor, radius: int) -> torch.Tensor:
    """Mean over each (2r+1)^2 window, counting only pixels inside the image.

    Upstream divides a zero-padded box sum by the box sum of ones; an average
    pool that leaves the padding out of its count is the same number, and it
    needs no ones tensor whose shape an exported graph might freeze.
    """
    k = 2 * radius + 1
    return F.avg_pool2d(x, k, stride=1, padding=radius, count_include_pad=False)


def guided_filter(x: torch.Tensor, y: torch.Tensor, radius: int, eps: float) -> torch.Tensor:
    """He et al.'s guided filter of ``y`` guided by ``x``, per channel, as upstream's ``guided_filter``."""
    mean_x, mean_y = box_mean(x, radius), box_mean(y, radius)
    cov_xy = box_mean(x * y, radius) - mean_x * mean_y
    var_x = box_mean(x * x, radius) - mean_x * mean_x
    a = cov_xy / (var_x + eps)
    b = mean_y - a * mean_x
    return box_mean(a, radius) * x + box_mean(b, radius)


def load_whitebox_generator(path: Path) -> nn.Module:
    """The White-box cartoonizer with the TFLite file's weights, dequantized to float32, in eval mode.

    Raises ModelError, with one sentence a person can read, for a file that cannot be read or
    parsed, or whose graph is not this network.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelError(f"cannot read the White-box model file {path} ({exc.strerror})") from exc
    unreadable = f"{path.name} is not a readable TFLite model (truncated, or not a model at all)"
    try:
        g = TfliteGraph(data)
    except ModelError as exc:  # its message does not name the file
        raise ModelError(unreadable) from exc
    try:
        facts = _read_graph(g)
    except ModelError:
        raise
    except Exception as exc:  # a truncated flatbuffer can parse, then fail where a read runs past its end
        raise ModelError(unreadable) from exc
    return _build(facts).eval()


def _read_graph(g: TfliteGraph) -> _GraphFacts:
    """Weights and settings from the graph, refusing any graph this module would not reproduce."""
    convs = [op for op in g.ops if op[0] == "CONV_2D"]
    if len(convs) != _CONVS:
        raise ModelError(f"a White-box generator has {_CONVS} convolutions; this TFLite model has {len(convs)}")
    kernels, biases, strides = [], [], []
    for _kind, ins, _outs, op in convs:
        kernels.append(g.const(ins[1]).transpose(0, 3, 1, 2))  # OHWI to OIHW
        biases.append(g.const(ins[2]))
        opts = op_options(op, tflite.Conv2DOptions)
        if opts.Padding() != tflite.Padding.SAME or opts.StrideH() != opts.StrideW():  # type: ignore[attr-defined]
            raise ModelError("a convolution of the White-box graph is not square-strided with 'SAME' padding")
        strides.append(int(opts.StrideH()))  # type: ignore[attr-defined]
    _check_upsampling(g)
    return _GraphFacts(kernels, biases, strides, _alpha(g), _eps(g), _radius(g))


def _check_upsampling(g: TfliteGraph) -> None:
    """Both upsamplings must use TF1's legacy grid, the one :func:`upsample_asymmetric` reproduces."""
    resizes = [op_options(op, tflite.ResizeBilinearOptions) for kind, _ins, _outs, op in g.ops
               if kind == "RESIZE_BILINEAR"]
    if len(resizes) != 2:
        raise ModelError(f"a White-box generator upsamples twice; this graph does {len(resizes)} times")
    if any(r.AlignCorners() or r.HalfPixelCenters() for r in resizes):  # type: ignore[attr-defined]
        raise ModelError("the White-box graph upsamples on a grid other than TF1's legacy one")


def _alpha(g: TfliteGraph) -> float:
    """The LeakyReLU slope, which every activation of the generator shares."""
    slopes = {round(float(op_options(op, tflite.LeakyReluOptions).Alpha()), 6)  # type: ignore[attr-defined]
              for kind, _ins, _outs, op in g.ops if kind == "LEAKY_RELU"}
    if len(slopes) != 1:
        raise ModelError(f"expected one LeakyReLU slope in the White-box graph, found {sorted(slopes)}")
    return slopes.pop()


def _eps(g: TfliteGraph) -> float:
    """The guided filter's epsilon: the one constant added to anything (var_x + eps)."""
    found = [float(g.const(ins[1]).reshape(-1)[0]) for kind, ins, _outs, _op in g.ops
             if kind == "ADD" and _is_constant(g, ins[1])]
    if len(found) != 1:
        raise ModelError(f"expected the guided filter's one epsilon in the White-box graph, found {len(found)}")
    return round(found[0], 9)  # an int8 step count times its scale: 0.005000000158 for 0.005


def _is_constant(g: TfliteGraph, index: int) -> bool:
    """Whether tensor ``index`` holds data in the file (activations have an empty buffer)."""
    return not isinstance(g.model.Buffers(g.graph.Tensors(index).Buffer()).DataAsNumpy(), int)


def _radius(g: TfliteGraph) -> int:
    """The box filter radius, from its depthwise kernel; every box filter must be a plain mean."""
    radii = set()
    for kind, ins, _outs, _op in g.ops:
        if kind != "DEPTHWISE_CONV_2D":
            continue
        k = g.const(ins[1])
        if k.shape[1] != k.shape[2] or not np.allclose(k, 1.0 / k[0, :, :, 0].size, rtol=1e-3):
            raise ModelError("a box filter of the White-box graph is not a plain mean")
        radii.add(k.shape[1] // 2)
    if len(radii) != 1:
        raise ModelError(f"expected one box filter radius in the White-box graph, found {sorted(radii)}")
    return radii.pop()


def _build(facts: _GraphFacts) -> WhiteboxCartoonizer:
    """The module with the graph's weights, each checked against its layer's shape and stride."""
    net = WhiteboxCartoonizer(facts.alpha, facts.eps, facts.radius)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    names = {m: n for n, m in net.named_modules()}
    state: dict[str, torch.Tensor] = {}
    for conv, w, b, stride in zip(convs, facts.kernels, facts.biases, facts.strides, strict=True):
        if tuple(conv.weight.shape) != w.shape or conv.stride[0] != stride:
            raise ModelError(f"{names[conv]}: the graph's kernel {w.shape} stride {stride} does not fit this layer")
        state[f"{names[conv]}.weight"] = torch.from_numpy(np.ascontiguousarray(w))
        state[f"{names[conv]}.bias"] = torch.from_numpy(np.ascontiguousarray(b))
    # RGB in and out: reverse the BGR channels the weights were trained on (see the class docstring).
    state["conv_in.weight"] = state["conv_in.weight"].flip(1)
    state["conv_out.weight"] = state["conv_out.weight"].flip(0)
    state["conv_out.bias"] = state["conv_out.bias"].flip(0)
    net.load_state_dict(state, strict=True)
    return net
