"""Runners that apply one style model to one padded image.

Every backend takes and returns float32 HWC arrays in [-1, 1], so the image
pipeline never needs to know whether PyTorch or onnxruntime does the work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch


class Stylizer(Protocol):
    """A loaded style model: ``multiple`` is the size both sides must divide by."""

    style: str
    backend: str
    multiple: int

    def __call__(self, x: np.ndarray) -> np.ndarray: ...


@dataclass
class TorchStylizer:
    """An AnimeGANv2 generator, eager or TorchScript (NCHW inside)."""

    style: str
    backend: str
    module: torch.nn.Module | torch.jit.ScriptModule
    multiple: int = 4

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            t = torch.from_numpy(x).permute(2, 0, 1).unsqueeze(0)
            return self.module(t)[0].permute(1, 2, 0).numpy()


@dataclass
class OnnxStylizer:
    """An ONNX model through onnxruntime; AnimeGANv3 exports take NHWC directly."""

    style: str
    session: object  # onnxruntime.InferenceSession
    multiple: int = 16
    backend: str = "onnxruntime"

    def __call__(self, x: np.ndarray) -> np.ndarray:
        name = self.session.get_inputs()[0].name  # type: ignore[attr-defined]
        return self.session.run(None, {name: x[None]})[0][0]  # type: ignore[attr-defined]
