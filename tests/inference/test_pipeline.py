"""Photo in, anime out: sizes, padding, rounding, backends, on real photos."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from inference.backends import TorchStylizer
from inference.engine import load_stylizer
from inference.imageio import decode
from inference.onnx_export import load_or_export as onnx_load_or_export
from inference.pipeline import ConvertSettings, convert_bytes, fit_size, resize, stylize
from inference.torchscript import export, load_or_export
from testkit.pictures import panorama, psnr
from weights.store import ModelStore

pytestmark = pytest.mark.slow  # every test here traces and exports generators to TorchScript and ONNX


def test_fit_size_caps_the_long_side_and_keeps_aspect() -> None:
    assert fit_size(1280, 854, 720) == (720, 480)
    assert fit_size(854, 1280, 720) == (480, 720)
    assert fit_size(500, 300, 720) == (500, 300)  # never enlarged
    assert fit_size(2000, 1000, 720) == (720, 360)  # 2:1 is the longest drawn this way


def test_a_panorama_keeps_its_height_within_a_square_photo_s_pixels() -> None:
    assert fit_size(4000, 300, 720) == (2629, 197)  # not a 720x54 strip
    assert fit_size(300, 4000, 720) == (197, 2629)
    assert fit_size(3000, 1000, 720) == (1080, 360)  # short side kept at half of max_side
    assert fit_size(1500, 100, 720) == (1500, 100)  # never enlarged
    assert fit_size(6000, 300, 720) == (2880, 144)  # long side at most 4x max_side


@pytest.mark.parametrize("max_side", [256, 720, 2048, 4096])
def test_results_stay_within_the_model_budget_and_telegram_s_photo_limits(max_side: int) -> None:
    for width in range(32, 20_001, 997):
        for height in (32, 100, 333, 1000, 2999, 8000, 20_000):
            if max(width, height) > 20 * min(width, height):
                continue  # decode() refuses those
            w, h = fit_size(width, height, max_side)
            assert w <= width and h <= height
            assert w + h <= 10_000 and max(w, h) <= 20 * min(w, h)
            assert w * h <= max_side**2 * 1.01
            assert abs(w / h - width / height) <= width / height / min(w, h)


def test_a_real_panorama_comes_back_a_panorama(real_store: ModelStore, photos: list[Path]) -> None:
    data = panorama(photos, 4000, 300)
    result = convert_bytes(data, load_stylizer(real_store, "hayao"), ConvertSettings(faces=False))
    out = Image.open(io.BytesIO(result.data))
    assert out.size == result.output_size == (2629, 197)
    plain = np.asarray(resize(decode(data), 720), np.float32)
    anime = np.asarray(out.convert("RGB"), np.float32)
    assert 6 < np.abs(plain - anime).mean() < 80  # stylized...
    assert np.corrcoef(plain.mean(2).ravel(), anime.mean(2).ravel())[0, 1] > 0.5  # ...yet the same picture


class _Unchanged:
    """A "style" that returns its input, so that what the test sees is the pipeline's resizing alone."""

    style = "unchanged"
    backend = "numpy"
    multiple = 1
    min_side = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x


def test_a_large_panorama_is_decoded_with_pixels_enough_for_its_result(photos: list[Path]) -> None:
    # A reduced JPEG decode sized for a 720 px result would leave this one
    # 3000x225 for a 2629x197 result: 35 dB from a full decode's.
    data = panorama(photos, 12_000, 900)
    result = convert_bytes(data, _Unchanged(), ConvertSettings(fmt="png", faces=False))
    assert result.output_size == (2629, 197)
    full = np.asarray(resize(decode(data), 720))
    assert psnr(np.asarray(Image.open(io.BytesIO(result.data))), full) > 40


def test_stylize_pads_and_crops_back_for_any_size(tiny_model: TorchStylizer) -> None:
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (37, 61, 3), np.uint8))
    out = stylize(img, tiny_model)
    assert out.size == (61, 37) and out.mode == "RGB"


def test_padding_does_not_change_the_pixels_it_keeps(tiny_model: TorchStylizer) -> None:
    # A multiple-of-4 image needs no padding; its output is the model's output rounded.
    rng = np.random.default_rng(1)
    arr = rng.integers(0, 255, (32, 48, 3), np.uint8)
    out = np.asarray(stylize(Image.fromarray(arr), tiny_model), np.int32)
    x = torch.from_numpy(arr.astype(np.float32) / 127.5 - 1).permute(2, 0, 1)[None]
    with torch.no_grad():
        y = tiny_model.module(x)[0].permute(1, 2, 0).numpy()
    expected = np.clip(np.rint((y + 1) * 127.5), 0, 255)
    assert np.array_equal(out, expected)


def test_convert_settings_choose_format_and_size(tiny_model: TorchStylizer, photos: list[Path]) -> None:
    data = photos[0].read_bytes()
    png = convert_bytes(data, tiny_model, ConvertSettings(max_side=200, fmt="png"))
    assert png.data.startswith(b"\x89PNG") and max(png.output_size) == 200
    jpg = convert_bytes(data, tiny_model, ConvertSettings(max_side=128, fmt="jpg", jpeg_quality=50))
    assert jpg.data.startswith(b"\xff\xd8") and max(jpg.output_size) == 128
    assert set(jpg.timings) == {"decode_s", "model_s", "encode_s"}


def test_real_photos_become_anime_of_the_right_size(real_store: ModelStore, photos: list[Path]) -> None:
    model = load_stylizer(real_store, "hayao", "torchscript")
    settings = ConvertSettings(max_side=320, fmt="png")
    for photo in photos:
        result = convert_bytes(photo.read_bytes(), model, settings)
        src = Image.open(photo)
        out = Image.open(io.BytesIO(result.data))
        assert out.size == result.output_size == fit_size(*src.size, 320)
        assert abs(out.width / out.height - src.width / src.height) < 0.01
        # Stylized: far from the resized photo, yet still the same picture.
        plain = np.asarray(resize(src.convert("RGB"), 320), np.float32)
        anime = np.asarray(out.convert("RGB"), np.float32)
        diff = np.abs(plain - anime).mean()
        assert 6 < diff < 80, (photo.name, diff)
        corr = np.corrcoef(plain.mean(2).ravel(), anime.mean(2).ravel())[0, 1]
        assert corr > 0.5, (photo.name, corr)


def test_torchscript_matches_eager(real_store: ModelStore, photos: list[Path]) -> None:
    eager = load_stylizer(real_store, "hayao", "eager")
    scripted = load_stylizer(real_store, "hayao", "torchscript")
    img = resize(Image.open(photos[-1]).convert("RGB"), 200)  # not the 64x64 trace size
    x = np.asarray(img, np.float32)[: img.height // 4 * 4, : img.width // 4 * 4] / 127.5 - 1
    assert np.abs(eager(x) - scripted(x)).max() < 1e-3


def test_onnxruntime_matches_eager_and_its_export_is_cached(real_store: ModelStore, photos: list[Path]) -> None:
    eager = load_stylizer(real_store, "hayao", "eager")
    fast = load_stylizer(real_store, "hayao", "onnxruntime")
    assert fast.backend == "onnxruntime" and fast.multiple == 4
    img = resize(Image.open(photos[-1]).convert("RGB"), 200)
    x = np.asarray(img, np.float32)[: img.height // 4 * 4, : img.width // 4 * 4] / 127.5 - 1
    assert np.abs(eager(x) - fast(x)).max() < 1e-3
    (cached,) = (real_store.cache_dir / "onnx").glob("*.onnx")
    cached.write_bytes(b"damaged")  # a damaged export is redone, not fatal
    again = load_stylizer(real_store, "hayao", "onnxruntime")
    assert np.abs(eager(x) - again(x)).max() < 1e-3 and cached.stat().st_size > 1000


def test_tiny_generator_exports_to_onnx_for_any_size(tiny_model: TorchStylizer, tmp_path: Path) -> None:
    import onnxruntime as ort

    path = onnx_load_or_export(lambda: tiny_model.module, "abc", tmp_path)
    mtime = path.stat().st_mtime_ns
    assert onnx_load_or_export(lambda: tiny_model.module, "abc", tmp_path) == path and path.stat().st_mtime_ns == mtime
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for h, w in ((20, 28), (64, 36)):  # neither is the 64x64 export size
        x = np.random.default_rng(h).uniform(-1, 1, (h, w, 3)).astype(np.float32)
        got = session.run(None, {"image": x[None]})[0][0]
        assert got.shape == (h, w, 3) and np.abs(got - tiny_model(x)).max() < 1e-4


def test_torchscript_artifact_is_cached_and_reused(tiny_model: TorchStylizer, tmp_path: Path) -> None:
    first = load_or_export(tiny_model.module, "abc", tmp_path)
    files = list((tmp_path / "torchscript").glob("*.pt"))
    assert len(files) == 1
    mtime = files[0].stat().st_mtime_ns
    again = load_or_export(tiny_model.module, "abc", tmp_path)
    assert files[0].stat().st_mtime_ns == mtime  # loaded, not re-exported
    x = torch.rand(1, 3, 20, 28)
    assert torch.allclose(first(x), again(x))
    # Other weights get their own artifact.
    load_or_export(tiny_model.module, "def", tmp_path)
    assert len(list((tmp_path / "torchscript").glob("*.pt"))) == 2


def test_damaged_torchscript_cache_is_rebuilt(tiny_model: TorchStylizer, tmp_path: Path) -> None:
    load_or_export(tiny_model.module, "abc", tmp_path)
    (cached,) = (tmp_path / "torchscript").glob("*.pt")
    cached.write_bytes(b"garbage")
    module = load_or_export(tiny_model.module, "abc", tmp_path)
    x = torch.rand(1, 3, 16, 16)
    assert torch.allclose(module(x), export(tiny_model.module)(x), atol=1e-5)


def test_onnx_style_runs_with_its_own_size_multiple(real_store: ModelStore, photos: list[Path]) -> None:
    if not real_store.is_installed(real_store.entry("cute")):
        pytest.skip("AnimeGANv3 Cute ONNX is absent from ../shared/models")
    for backend in ("openvino", "onnxruntime"):
        model = load_stylizer(real_store, "cute", backend)  # type: ignore[arg-type]
        assert model.backend == backend and model.multiple == 16
        result = convert_bytes(photos[0].read_bytes(), model, ConvertSettings(max_side=250))
        assert max(result.output_size) == 250
