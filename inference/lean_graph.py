"""Rewrites of a net into forms OpenVINO runs leaner, computing the same maths.

Used only when exporting to ONNX (:mod:`inference.onnx_export`); the PyTorch
modules themselves keep the published layout, so weights load as they are.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from inference.generator import Generator

# Row 2k + e of TF1's legacy 2x bilinear upsampling (e = -1, 0, 1, 2), as weights
# on low-resolution rows k - 1, k and k + 1: odd rows average two neighbours.
_LEGACY_ROWS = torch.tensor([[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])


def lean(net: nn.Module) -> nn.Module:
    """A copy of ``net`` with both rewrites below applied where they fit."""
    return sub_pixel_upsampling(plain_norms(net))


class PlainNorm(nn.Module):
    """One-group GroupNorm written out as mean and variance."""

    def __init__(self, norm: nn.GroupNorm) -> None:
        super().__init__()
        self.eps = norm.eps
        self.weight = nn.Parameter(norm.weight.detach()[None, :, None, None])
        self.bias = nn.Parameter(norm.bias.detach()[None, :, None, None])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(dim=(1, 2, 3), keepdim=True)
        var = (centred * centred).mean(dim=(1, 2, 3), keepdim=True)
        return centred / torch.sqrt(var + self.eps) * self.weight + self.bias


def plain_norms(net: nn.Module) -> nn.Module:
    """A copy of ``net`` whose one-group GroupNorms are :class:`PlainNorm`.

    torch exports GroupNorm as reshape, InstanceNormalization, reshape; the
    reshapes make OpenVINO convert every activation's memory layout before and
    after each norm (27% of its time). Written out, OpenVINO fuses the same
    maths into one normalisation over (C, H, W) in the convolutions' layout:
    Hayao at 720x544 took 0.30 s instead of 0.49 s, 53.8 dB from eager instead
    of 52.7. onnxruntime runs both forms alike.
    """
    plain = copy.deepcopy(net)
    for parent in plain.modules():
        for name, child in parent.named_children():
            if isinstance(child, nn.GroupNorm) and child.num_groups == 1:
                setattr(parent, name, PlainNorm(child))
    return plain


class SubPixelUp(nn.Module):
    """TF1 legacy 2x upsampling, reflection pad and a 3x3 convolution, done at the low resolution.

    Each of the four pixels of a 2x2 output cell is a fixed 3x3 mix of the
    low-resolution input, so the convolution's weights are composed with the
    upsampling's into one convolution with four times the outputs, and a
    depth-to-space puts them in place. The full-resolution input (the widest
    tensor in the net: 128 channels) and its padded copy are never made.
    Padding the low-resolution input by reflection at the top and left and by
    repetition at the bottom and right gives exactly the border the original
    order gives (legacy sampling repeats the last row; reflecting row 1 of the
    upsampled image is reflecting low-resolution row 1).
    """

    def __init__(self, pad_conv: nn.Sequential) -> None:
        super().__init__()
        pad, conv = pad_conv[0], pad_conv[1]
        if not (isinstance(pad, nn.ReflectionPad2d) and tuple(pad.padding) == (1, 1, 1, 1)
                and isinstance(conv, nn.Conv2d) and conv.kernel_size == (3, 3) and conv.stride == (1, 1)
                and conv.groups == 1 and conv.bias is None):
            raise ValueError("SubPixelUp folds a reflection pad of 1 and a plain 3x3 convolution only")
        w = conv.weight.detach()  # (out, in, 3, 3)
        phases = torch.stack([
            torch.einsum("oiyx,ya,xb->oiab", w, _LEGACY_ROWS[r:r + 3], _LEGACY_ROWS[c:c + 3])
            for r in (0, 1) for c in (0, 1)
        ], dim=1)  # (out, row phase * 2 + column phase, in, 3, 3): pixel_shuffle's channel order
        self.conv = nn.Conv2d(w.shape[1], 4 * w.shape[0], 3, bias=False)
        self.conv.weight = nn.Parameter(phases.reshape(4 * w.shape[0], w.shape[1], 3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.pad(F.pad(x, (1, 0, 1, 0), mode="reflect"), (0, 1, 0, 1), mode="replicate")
        return F.pixel_shuffle(self.conv(x), 2)


class _SubPixelGenerator(nn.Module):
    """An AnimeGANv2 generator on the legacy grid whose two upsamplings are :class:`SubPixelUp`."""

    def __init__(self, net: Generator) -> None:
        super().__init__()
        self.net = net
        self.blocks = nn.ModuleList(self._folded(block) for block in (net.block_d, net.block_e))

    @staticmethod
    def _folded(block: nn.Sequential) -> nn.Sequential:
        first = block[0]  # a ConvNormLReLU: pad, convolution, norm, activation
        assert isinstance(first, nn.Sequential)
        return nn.Sequential(SubPixelUp(first), *list(first)[2:], *list(block)[1:])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.net.block_c(self.net.block_b(self.net.block_a(x)))
        for block in self.blocks:
            x = block(x)
        return self.net.out_layer(x)


def sub_pixel_upsampling(net: nn.Module) -> nn.Module:
    """``net`` with its upsamplings folded into the convolutions after them, where that is exact.

    The largest activations of an AnimeGANv2 generator are the upsampled
    128-channel maps before its last blocks: folded, OpenVINO needs 211 MB
    instead of 336 MB for Hayao at 720x720 in bfloat16 (344 instead of 594 in
    fp32), at the same speed and within float rounding of the original
    (docs/benchmarks.md, "Memory"). Only the legacy grid folds exactly; a net on the
    half-pixel grid (the PyTorch-format styles), or any other net, comes back
    unchanged.
    """
    if isinstance(net, Generator) and net.upsample == "asymmetric":
        return _SubPixelGenerator(net)
    return net
