"""The generator's structure: what loading published weights depends on."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from inference.generator import Generator, GeneratorWidths, upsample_asymmetric
from testkit.models import TINY_WIDTHS


def test_full_width_generator_has_the_published_parameter_count() -> None:
    # 2,143,552 is the count of the original AnimeGANv2 generator (MODELS.md).
    assert sum(p.numel() for p in Generator().parameters()) == 2_143_552


def test_state_dict_uses_the_published_key_names() -> None:
    keys = set(Generator().state_dict())
    # A few keys as they appear in bryandlee/animegan2-pytorch's weight files.
    for key in (
        "block_a.0.1.weight",
        "block_a.0.2.bias",
        "block_c.1.layers.0.1.weight",
        "block_c.1.layers.1.1.bias",
        "block_c.4.layers.3.weight",
        "block_e.2.1.weight",
        "out_layer.0.weight",
    ):
        assert key in keys
    assert len(keys) == 25 + 24 * 2 + 4  # 25 conv kernels, 24 norms (weight, bias), 4 depthwise biases


def test_narrower_widths_are_the_same_class_with_fewer_parameters() -> None:
    small = Generator(TINY_WIDTHS)
    assert isinstance(small, Generator)
    assert sum(p.numel() for p in small.parameters()) < 20_000
    # Same key names, so the same loading and export code serves pruned models.
    assert set(small.state_dict()) == set(Generator().state_dict())


def test_widths_round_trip_through_json_data() -> None:
    w = GeneratorWidths(a=(16, 48, 48), hidden=(128, 256, 256, 200))
    assert GeneratorWidths.from_dict(w.to_dict()) == w


def test_output_keeps_the_input_size_and_range() -> None:
    torch.manual_seed(0)
    net = Generator(TINY_WIDTHS).eval()
    for mode in ("half_pixel", "asymmetric"):
        net.upsample = mode
        with torch.no_grad():
            y = net(torch.rand(1, 3, 36, 52) * 2 - 1)
        assert y.shape == (1, 3, 36, 52)
        assert y.abs().max() <= 1


def test_asymmetric_upsampling_is_tf1_legacy_bilinear() -> None:
    x = torch.arange(12, dtype=torch.float32).reshape(1, 1, 3, 4)
    y = upsample_asymmetric(x)
    # Source coordinate = destination / 2, clamped at the last row and column.
    for i in range(6):
        for j in range(8):
            si, sj = i / 2, j / 2
            i0, j0 = int(si), int(sj)
            i1, j1 = min(i0 + 1, 2), min(j0 + 1, 3)
            fi, fj = si - i0, sj - j0
            top = x[0, 0, i0, j0] * (1 - fj) + x[0, 0, i0, j1] * fj
            bot = x[0, 0, i1, j0] * (1 - fj) + x[0, 0, i1, j1] * fj
            assert torch.isclose(y[0, 0, i, j], top * (1 - fi) + bot * fi)
    # and it is not the half-pixel grid
    assert not torch.allclose(y, F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False))
