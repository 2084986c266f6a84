"""The White-box cartoonizer rebuilt from its TFLite file: against the TFLite runtime at the file's
fixed 512x512, and through ONNX and OpenVINO at a size the file cannot take."""
from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from inference.errors import ModelError
from inference.onnx_export import export
from inference.whitebox import load_whitebox_generator
from testkit.models import MODELS
from testkit.pictures import psnr

WHITEBOX_FILE = MODELS / "whitebox_cartoon_gan_int8.tflite"
# A face in a group, a close-up portrait and a street scene: the kinds of photo people send.
PSNR_PHOTOS = ("group_3_faces.jpg", "portrait_closeup.jpg", "town_1280x854.jpg")
SEAM_PHOTO = "town_1280x854.jpg"  # 3:2, so 720x480 is a plain downscale; straight walls test the seam check
BORDER = 16  # the net's own zero padding legitimately marks lines near the edges (seen up to 15 px in)


@pytest.fixture(scope="module")
def whitebox_file() -> Path:
    if not WHITEBOX_FILE.is_file():
        pytest.skip(f"real model file {WHITEBOX_FILE} is absent (it lives in ../shared/models on CI)")
    return WHITEBOX_FILE


@pytest.fixture(scope="module")
def whitebox(whitebox_file: Path) -> torch.nn.Module:
    return load_whitebox_generator(whitebox_file)


def _photo(shared_photo: Callable[[str], bytes], name: str, width: int, height: int) -> np.ndarray:
    """An RGB photo centre-cropped to ``width:height`` and resized, HWC in [-1, 1]."""
    img = Image.open(io.BytesIO(shared_photo(name))).convert("RGB")
    scale = min(img.width / width, img.height / height)
    w, h = round(width * scale), round(height * scale)
    box = ((img.width - w) // 2, (img.height - h) // 2, (img.width - w) // 2 + w, (img.height - h) // 2 + h)
    img = img.crop(box).resize((width, height), Image.Resampling.LANCZOS)
    return np.asarray(img, np.float32) / 127.5 - 1


def _eager(net: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return net(torch.from_numpy(x).permute(2, 0, 1)[None])[0].permute(1, 2, 0).numpy()


def _pixels(y: np.ndarray) -> np.ndarray:
    """[-1, 1] to the 0..255 scale the pipeline saves, clipped as it clips."""
    return np.clip((y + 1.0) * 127.5, 0.0, 255.0)


@pytest.fixture(scope="module")
def litert(whitebox_file: Path) -> Any:
    """The TFLite runtime on the file itself: the reference the rebuild must reproduce."""
    runtime = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")
    interp = runtime.Interpreter(model_path=str(whitebox_file))
    interp.allocate_tensors()
    return interp


@pytest.mark.parametrize("name", PSNR_PHOTOS)
def test_matches_the_tflite_runtime_at_its_512x512(whitebox: torch.nn.Module, litert: Any,
                                                    shared_photo: Callable[[str], bytes], name: str) -> None:
    x = _photo(shared_photo, name, 512, 512)
    litert.set_tensor(litert.get_input_details()[0]["index"], np.ascontiguousarray(x[None, ..., ::-1]))  # BGR
    litert.invoke()
    ref = litert.get_tensor(litert.get_output_details()[0]["index"])[0, ..., ::-1]
    db = psnr(_pixels(_eager(whitebox, x)), _pixels(ref))
    print(f"{name}: {db:.1f} dB")
    # The runtime quantizes every activation to int8; the float rebuild measured 36.8-38.1 dB.
    assert db >= 30


@pytest.fixture(scope="module")
def at_720x480(whitebox: torch.nn.Module, shared_photo: Callable[[str], bytes]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(photo, eager output, OpenVINO output of the ONNX export) at 720x480, which the TFLite file cannot take."""
    import openvino as ov

    x = _photo(shared_photo, SEAM_PHOTO, 720, 480)
    core = ov.Core()
    model = core.read_model(export(whitebox), b"")
    model.reshape({0: [1, *x.shape]})
    compiled = core.compile_model(model, "CPU")
    return x, _eager(whitebox, x), compiled({0: x[None]})[0][0]


def test_openvino_runs_the_export_at_720x480_as_eager_does(at_720x480: tuple[np.ndarray, ...]) -> None:
    _x, eager, ov_out = at_720x480
    assert ov_out.shape == (480, 720, 3)
    assert psnr(_pixels(ov_out), _pixels(eager)) >= 40


def _peak_share(img: np.ndarray, axis: int, reach: int = 2) -> np.ndarray:
    """For each boundary between adjacent lines along ``axis``, the share of lines crossing it in which
    the jump there is larger than every jump within ``reach`` boundaries on either side.

    Photo edges are partial or slanted, so they peak at one boundary in few lines; a seam runs
    through every line at the same boundary. Boundaries within ``reach`` of the ends score 0.
    """
    jumps = np.abs(np.diff(img, axis=axis)).mean(axis=2)
    jumps = jumps if axis == 1 else jumps.T  # lines crossing the boundaries are rows now
    n = jumps.shape[1]
    mid = jumps[:, reach:n - reach]
    peak = np.ones(mid.shape, bool)
    for k in range(1, reach + 1):
        peak &= (mid > jumps[:, reach - k:n - reach - k]) & (mid > jumps[:, reach + k:n - reach + k])
    return np.pad(peak.mean(axis=0), reach)


def _seam_scores(out: np.ndarray, photo: np.ndarray) -> np.ndarray:
    """Every inner column and row boundary's peak share in ``out`` beyond what the photo explains.

    The photo's own share is taken as its highest at the boundary or either neighbour, since the
    net may move an edge by a pixel; the outermost lines are left out (see BORDER).
    """
    scores = []
    for axis in (1, 0):
        own = _peak_share(photo, axis)
        own = np.maximum(own, np.maximum(np.roll(own, 1), np.roll(own, -1)))
        scores.append((_peak_share(out, axis) - own)[BORDER:-BORDER])
    return np.concatenate(scores)


def _has_seam(out: np.ndarray, photo: np.ndarray) -> bool:
    """Whether some boundary stands out: beyond 3x the 99th percentile of all boundaries' scores.

    Measured at 720x480 on the 8 shared photos: no whole picture reached more than 0.86 of that
    limit, and 23 of 24 pictures stitched from two tiles (at column 360 or 512, or row 240) went
    past it. On SEAM_PHOTO the whole picture reaches 0.59 of it, stitched ones 1.76 to 3.21.
    """
    scores = _seam_scores(out, photo)
    return bool(scores.max() > 3 * np.percentile(scores, 99))


def test_the_openvino_picture_has_no_seams(at_720x480: tuple[np.ndarray, ...]) -> None:
    photo, _eager_out, ov_out = at_720x480
    assert not _has_seam(ov_out, photo)


def test_the_seam_check_flags_a_picture_stitched_from_two_tiles(whitebox: torch.nn.Module,
                                                                at_720x480: tuple[np.ndarray, ...]) -> None:
    # What drawing the 512 px TFLite model tile by tile would give: each tile's edges are padded, not seen.
    photo = at_720x480[0]
    stitched = np.concatenate([_eager(whitebox, photo[:, :512]), _eager(whitebox, photo[:, 512:])], axis=1)
    assert _has_seam(stitched, photo)


@pytest.mark.parametrize("content", [b"", b"\x00" * 64, b"TFL3" + bytes(range(256)) * 8])
def test_a_file_that_is_not_a_model_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(content)
    with pytest.raises(ModelError, match="bad.tflite is not a readable TFLite model"):
        load_whitebox_generator(bad)


@pytest.mark.real_model  # conftest marks by its own fixtures; this one needs only the model file
def test_a_truncated_model_is_a_clear_error(whitebox_file: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tflite"
    cut.write_bytes(whitebox_file.read_bytes()[: whitebox_file.stat().st_size // 2])
    with pytest.raises(ModelError, match="cut.tflite is not a readable TFLite model"):
        load_whitebox_generator(cut)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot read"):
        load_whitebox_generator(tmp_path / "absent.tflite")
