"""The export's rewrites compute what the published net computes, in less memory."""
from __future__ import annotations

import numpy as np
import torch

from inference.backends import TorchStylizer
from inference.generator import Generator
from inference.lean_graph import lean
from testkit.models import TINY_WIDTHS


def legacy_net(seed: int) -> Generator:
    torch.manual_seed(seed)
    net = Generator(TINY_WIDTHS, upsample="asymmetric").eval()
    with torch.no_grad():  # norms with their own scale and shift, not the identity they start as
        for m in net.modules():
            if isinstance(m, torch.nn.GroupNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    return net


def test_the_lean_net_draws_the_same_picture_on_odd_and_even_sizes() -> None:
    """Borders included: the folded upsampling pads the low-resolution map so that its edges
    come out as the original's upsample-then-reflect did."""
    net = legacy_net(0)
    rewritten = lean(net)
    rng = np.random.default_rng(0)
    for h, w in ((32, 48), (36, 20), (64, 64)):
        x = rng.uniform(-1, 1, (h, w, 3)).astype(np.float32)
        ours = TorchStylizer("lean", "eager", rewritten)(x)
        ref = TorchStylizer("ref", "eager", net)(x)
        assert ours.shape == ref.shape
        assert np.abs(ours - ref).max() < 1e-4, (h, w)


def test_the_fold_removes_the_upsampled_maps() -> None:
    """The published net upsamples twice; the lean one upsamples nowhere (pixel shuffles instead)."""
    net = legacy_net(1)
    calls: list[str] = []
    original = torch.nn.functional.interpolate

    def counting(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append("interpolate")
        return original(*args, **kwargs)  # type: ignore[arg-type]

    torch.nn.functional.interpolate = counting  # type: ignore[assignment]
    try:
        with torch.no_grad():
            net(torch.zeros(1, 3, 32, 32))
            before = len(calls)
            lean(net)(torch.zeros(1, 3, 32, 32))
    finally:
        torch.nn.functional.interpolate = original
    assert before == 2 and len(calls) == before


def test_a_net_on_the_half_pixel_grid_keeps_its_upsampling() -> None:
    """Only the legacy grid folds exactly; the PyTorch-format styles are exported as they are."""
    torch.manual_seed(2)
    net = Generator(TINY_WIDTHS).eval()
    rewritten = lean(net)
    x = np.random.default_rng(2).uniform(-1, 1, (32, 32, 3)).astype(np.float32)
    ours = TorchStylizer("lean", "eager", rewritten)(x)
    ref = TorchStylizer("ref", "eager", net)(x)
    assert np.abs(ours - ref).max() < 1e-4
