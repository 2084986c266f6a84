"""ONNX export of a generator for OpenVINO and onnxruntime, cached on disk.

Both run this net faster than PyTorch on the CPU (docs/benchmarks.md). The
exported graph takes and returns NHWC images, as the AnimeGANv3 exports do,
so one runner serves both. Torch is imported only to make an export: a
worker that finds its file in the cache never loads it.
"""
from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from base.files import write_atomically

if TYPE_CHECKING:
    import torch


def export(net: torch.nn.Module) -> bytes:
    """The ONNX model (opset 17) of an NCHW image net for any image size, NHWC in and out, as bytes.

    The net is first rewritten into the same maths in a leaner form (:mod:`inference.lean_graph`)."""
    import torch

    from inference.lean_graph import lean

    class Nhwc(torch.nn.Module):
        """The generator with NHWC in and out, so callers skip two transposes."""

        def __init__(self) -> None:
            super().__init__()
            self.net = lean(net.eval())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)

    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
        torch.onnx.export(
            Nhwc(), (torch.zeros(1, 64, 64, 3),), buf,  # type: ignore[arg-type]  # file objects work, stubs say paths
            dynamo=False, opset_version=17,
            input_names=["image"], output_names=["anime"],
            dynamic_axes={"image": {1: "height", 2: "width"}, "anime": {1: "height", 2: "width"}},
        )
    return buf.getvalue()


def load_or_export(build: Callable[[], torch.nn.Module], key: str, cache_dir: Path) -> Path:
    """The cached ONNX file named ``key``; on first use ``build()`` makes the net, saved atomically."""
    path = cache_dir / "onnx" / f"{key}.onnx"
    if path.is_file():
        return path
    write_atomically(path, export(build()))
    return path
