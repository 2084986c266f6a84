"""The AnimeGANv2 generator as a PyTorch module.

The layer layout and attribute names follow the published PyTorch weights
(``block_a.0.1.weight`` and so on), so those state_dicts load with
``strict=True``. Every channel width is a constructor parameter: a pruned
"lite" generator is the same class built with smaller widths, which keeps one
code path for loading, export and inference.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

UpsampleMode = Literal["half_pixel", "asymmetric"]


@dataclass(frozen=True)
class GeneratorWidths:
    """Output channels of every convolution whose width pruning may change.

    ``res`` is shared by the four inverted residual blocks because their
    skip connections add tensors of that width; ``hidden`` holds each
    block's own expansion width.
    """

    a: tuple[int, int, int] = (32, 64, 64)
    b: tuple[int, int] = (128, 128)
    c_in: int = 128
    res: int = 256
    hidden: tuple[int, int, int, int] = (256, 512, 512, 512)
    c_out: int = 128
    d: tuple[int, int] = (128, 128)
    e: tuple[int, int, int] = (64, 64, 32)

    def to_dict(self) -> dict[str, object]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "GeneratorWidths":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})  # type: ignore[arg-type]


class ConvNormLReLU(nn.Sequential):
    """Reflection pad, convolution, one-group GroupNorm, LeakyReLU(0.2).

    One-group GroupNorm is TensorFlow's LayerNorm over (H, W, C), which is
    what the original model was trained with.
    """

    def __init__(
        self,
        in_ch: int,
        out_ch: int,
        kernel_size: int = 3,
        stride: int = 1,
        padding: int | tuple[int, int, int, int] = 1,
        groups: int = 1,
        bias: bool = False,
        eps: float = 1e-5,
    ) -> None:
        super().__init__(
            nn.ReflectionPad2d(padding),
            nn.Conv2d(in_ch, out_ch, kernel_size, stride=stride, groups=groups, bias=bias),
            nn.GroupNorm(1, out_ch, eps=eps),
            nn.LeakyReLU(0.2, inplace=True),
        )


class InvertedResBlock(nn.Module):
    """MobileNetV2-style block: 1x1 expand, 3x3 depthwise, 1x1 project.

    The skip connection exists only when input and output widths match, as
    in the original model (the first block widens 128 to 256 without one).
    """

    def __init__(self, in_ch: int, hidden: int, out_ch: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.use_skip = in_ch == out_ch
        self.layers = nn.Sequential(
            ConvNormLReLU(in_ch, hidden, kernel_size=1, padding=0, eps=eps),
            ConvNormLReLU(hidden, hidden, groups=hidden, bias=True, eps=eps),
            nn.Conv2d(hidden, out_ch, 1, bias=False),
            nn.GroupNorm(1, out_ch, eps=eps),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(x)
        return x + out if self.use_skip else out


class Generator(nn.Module):
    """Photo to anime: RGB in [-1, 1], NCHW, height and width multiples of 4.

    Two stride-2 convolutions go down, two 2x bilinear upsamplings come back,
    so the output has the input's size exactly when both sides divide by 4.
    ``upsample`` picks the bilinear sampling grid: ``half_pixel`` is
    PyTorch's ``align_corners=False``; ``asymmetric`` is TensorFlow 1's legacy
    ``resize_bilinear`` (source = destination / 2), which TFLite exports of
    the original model record.
    """

    def __init__(
        self,
        widths: GeneratorWidths = GeneratorWidths(),
        upsample: UpsampleMode = "half_pixel",
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        w = widths
        self.widths = widths
        self.upsample = upsample
        down = (0, 1, 0, 1)  # TF pads stride-2 convs on the bottom/right only
        self.block_a = nn.Sequential(
            ConvNormLReLU(3, w.a[0], kernel_size=7, padding=3, eps=eps),
            ConvNormLReLU(w.a[0], w.a[1], stride=2, padding=down, eps=eps),
            ConvNormLReLU(w.a[1], w.a[2], eps=eps),
        )
        self.block_b = nn.Sequential(
            ConvNormLReLU(w.a[2], w.b[0], stride=2, padding=down, eps=eps),
            ConvNormLReLU(w.b[0], w.b[1], eps=eps),
        )
        res_in = (w.c_in, w.res, w.res, w.res)
        self.block_c = nn.Sequential(
            ConvNormLReLU(w.b[1], w.c_in, eps=eps),
            *(InvertedResBlock(i, h, w.res, eps=eps) for i, h in zip(res_in, w.hidden)),
            ConvNormLReLU(w.res, w.c_out, eps=eps),
        )
        self.block_d = nn.Sequential(
            ConvNormLReLU(w.c_out, w.d[0], eps=eps),
            ConvNormLReLU(w.d[0], w.d[1], eps=eps),
        )
        self.block_e = nn.Sequential(
            ConvNormLReLU(w.d[1], w.e[0], eps=eps),
            ConvNormLReLU(w.e[0], w.e[1], eps=eps),
            ConvNormLReLU(w.e[1], w.e[2], kernel_size=7, padding=3, eps=eps),
        )
        self.out_layer = nn.Sequential(nn.Conv2d(w.e[2], 3, 1, bias=False), nn.Tanh())

    def _up(self, x: torch.Tensor) -> torch.Tensor:
        if self.upsample == "half_pixel":
            return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        return upsample_asymmetric(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block_a(x)
        x = self.block_c(self.block_b(x))
        x = self.block_d(self._up(x))
        x = self.block_e(self._up(x))
        return self.out_layer(x)


def upsample_asymmetric(x: torch.Tensor) -> torch.Tensor:
    """2x bilinear upsampling on TF1's legacy grid: output pixel i samples input i / 2.

    TF clamps at the last row and column. Padding one replicated row and
    column and sampling that with ``align_corners=True`` at 2n+1 points puts
    output i exactly at input i / 2; cropping to 2n gives the legacy result
    with one native kernel (2.3x faster than composing it from slices).
    """
    h, w = x.shape[-2:]
    padded = F.pad(x, (0, 1, 0, 1), mode="replicate")
    up = F.interpolate(padded, size=(2 * h + 1, 2 * w + 1), mode="bilinear", align_corners=True)
    return up[..., : 2 * h, : 2 * w]
