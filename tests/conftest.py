"""Shared fixtures: the real models and photos from ../shared, and a tiny
random generator for the logic that must be tested even without them."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from inference.backends import TorchStylizer
from inference.generator import Generator, GeneratorWidths
from weights.store import ModelStore

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MODELS = SHARED / "models"
PHOTOS = SHARED / "photos"
HAYAO_FILE = MODELS / "animeganv2_hayao_256x256_integer_quant.tflite"
CUTE_FILE = MODELS / "AnimeGANv3_tiny_Cute.onnx"
DET_FILE = MODELS / "det_500m.onnx"

TINY_WIDTHS = GeneratorWidths(
    a=(4, 8, 8), b=(8, 8), c_in=8, res=8, hidden=(8, 8, 8, 8), c_out=8, d=(8, 8), e=(8, 8, 4)
)


def photo_paths() -> list[Path]:
    return sorted(PHOTOS.glob("*.jpg")) if PHOTOS.is_dir() else []


def _need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"real model file {path} is absent (it lives in ../shared/models on CI)")
    return path


@pytest.fixture(scope="session")
def hayao_file() -> Path:
    return _need(HAYAO_FILE)


@pytest.fixture(scope="session")
def photos() -> list[Path]:
    found = photo_paths()
    if not found:
        pytest.skip(f"real photos are absent (expected in {PHOTOS})")
    return found


@pytest.fixture(scope="session")
def real_store(tmp_path_factory: pytest.TempPathFactory, hayao_file: Path) -> ModelStore:
    """A data dir with Hayao (and the cute style and face detector, when present), shared by readers."""
    store = ModelStore(tmp_path_factory.mktemp("home"))
    store.import_file(hayao_file)
    for optional in (CUTE_FILE, DET_FILE):
        if optional.is_file():
            store.import_file(optional)
    return store


@pytest.fixture
def tiny_model() -> TorchStylizer:
    """A randomly initialised, very narrow generator: real code path, milliseconds per image."""
    torch.manual_seed(0)
    net = Generator(TINY_WIDTHS).eval()
    return TorchStylizer("tiny", "eager", net)


def psnr(a: np.ndarray, b: np.ndarray, peak: float = 255.0) -> float:
    mse = float(np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(peak**2 / mse)
