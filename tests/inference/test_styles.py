"""The AnimeGANv3 styles (float16 files), and which model draws each style's faces."""
from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inference.engine import face_style_for, load_face_tools, load_stylizer
from inference.pipeline import ConvertSettings, convert_bytes, resize, stylize
from testkit.models import MODELS, STYLE_NAMES
from weights.hashing import file_digests
from weights.registry import builtin_entries
from weights.store import ModelStore, WeightsError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

V3_FP16 = ("hayao_v3", "shinkai", "jp_face", "sketch")
PNG = ConvertSettings(fmt="png", faces=False)


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0**2 / max(mse, 1e-12))


def onnxruntime_reference(path: Path, img: Image.Image, multiple: int, min_side: int) -> np.ndarray:
    """The original file run directly in onnxruntime, in its own float16, the way upstream's
    scripts feed it: RGB in [-1, 1], sides mirrored out to its size rule, cropped back."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.asarray(img, np.float32) / 127.5 - 1
    h, w = x.shape[:2]
    padded = [max(side, min_side) + -max(side, min_side) % multiple - side for side in (h, w)]
    x = np.pad(x, ((0, padded[0]), (0, padded[1]), (0, 0)), mode="reflect")
    feed = session.get_inputs()[0]
    y = session.run(None, {feed.name: x[None].astype(np.float16)})[0][0].astype(np.float32)[:h, :w]
    return np.clip(np.rint((y + 1) * 127.5), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("style, photo", [("hayao_v3", "town_1280x854.jpg"), ("shinkai", "street_1279x867.jpg"),
                                          ("jp_face", "portrait_closeup.jpg"), ("sketch", "portrait_900x1200.jpg")])
def test_each_float16_style_on_the_default_backend_matches_the_original_file(
        styles_store: ModelStore, shared_photo, style: str, photo: str) -> None:
    entry, path = styles_store.require(style)
    model = load_stylizer(styles_store, style)  # the default backend: OpenVINO
    data = shared_photo(photo)
    out = convert_bytes(data, model, PNG)
    ours = np.asarray(Image.open(io.BytesIO(out.data)).convert("RGB"))
    small = resize(Image.open(io.BytesIO(data)).convert("RGB"), PNG.max_side)
    assert entry.multiple is not None
    reference = onnxruntime_reference(path, small, entry.multiple, entry.min_side)
    precision = getattr(model, "precision", "?")
    assert ours.shape == reference.shape
    assert psnr(ours, reference) >= 35, f"{style} on {model.backend} {precision}: {psnr(ours, reference):.1f} dB"


@pytest.mark.parametrize("size", [(333, 201), (257, 719), (100, 80)])
def test_odd_and_small_sizes_are_padded_and_cropped_back(styles_store: ModelStore, size: tuple[int, int]) -> None:
    """Sides that are no multiple of 8, or under the 256 px the v3 nets want, come back at their own
    size and match the original file run on the same padding (not a stretched or squashed copy)."""
    from testkit.pictures import synthetic_image

    entry, path = styles_store.require("hayao_v3")
    img = synthetic_image(*size, seed=3)
    ours = np.asarray(stylize(img, load_stylizer(styles_store, "hayao_v3")))
    assert entry.multiple is not None
    reference = onnxruntime_reference(path, img, entry.multiple, entry.min_side)
    assert ours.shape == (size[1], size[0], 3)
    assert psnr(ours, reference) >= 35


class _Recorder:
    """A "style" that records the shapes it is given and returns its input."""

    style = "recorder"
    backend = "numpy"

    def __init__(self, multiple: int, min_side: int) -> None:
        self.multiple, self.min_side = multiple, min_side
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.shapes.append(x.shape)
        return x


@pytest.mark.parametrize("size, multiple, min_side, fed", [
    ((333, 201), 8, 256, (256, 336)), ((100, 80), 8, 256, (256, 256)), ((720, 480), 16, 0, (480, 720)),
    ((721, 257), 32, 256, (288, 736)),
])
def test_the_model_is_fed_sides_of_its_multiple_and_at_least_its_minimum(
        size: tuple[int, int], multiple: int, min_side: int, fed: tuple[int, int]) -> None:
    from testkit.pictures import synthetic_image

    model = _Recorder(multiple, min_side)
    img = synthetic_image(*size)
    out = stylize(img, model)
    assert model.shapes == [(*fed, 3)]
    assert out.size == size and np.array_equal(np.asarray(out), np.asarray(img))  # cropped back exactly


def test_every_shared_model_file_is_recognised_by_its_published_hashes(tmp_path: Path) -> None:
    entries = {e.filename: e for e in builtin_entries()}
    files = sorted(p for p in MODELS.glob("*") if p.name in entries) if MODELS.is_dir() else []
    if not files:
        pytest.skip(f"real model files are absent (expected in {MODELS})")
    store = ModelStore(tmp_path)
    for path in files:
        entry = entries[path.name]
        sha256, git_sha1 = file_digests(path)
        blob = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
        assert (entry.sha256, entry.git_sha1, entry.size) == (sha256, blob.stdout.strip(), path.stat().st_size)
        assert git_sha1 == entry.git_sha1
        assert store.import_file(path) == entry
    assert {e.name for e in store.installed("style")} >= set(STYLE_NAMES)


def test_a_changed_byte_is_refused_and_leaves_nothing_installed(tmp_path: Path) -> None:
    source = MODELS / "AnimeGANv3_Shinkai_37_fp16.onnx"
    if not source.is_file():
        pytest.skip(f"{source} is absent (it lives in ../shared/models on CI)")
    store = ModelStore(tmp_path)
    entry = store.entry("shinkai")
    tampered = store.temp_file()
    data = bytearray(source.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tampered.write_bytes(bytes(data))
    with pytest.raises(WeightsError) as err:
        store.install_verified(tampered, entry)
    assert err.value.code == "checksum" and not store.is_installed(entry) and not tampered.exists()


def test_scene_styles_draw_faces_with_jp_face_and_the_others_their_own(styles_store: ModelStore,
                                                                       real_store: ModelStore) -> None:
    assert {s: face_style_for(styles_store, s) for s in STYLE_NAMES} == {
        "hayao": "jp_face", "cute": "jp_face", "hayao_v3": "jp_face", "shinkai": "jp_face", "cartoon": "jp_face",
        "sketch": "sketch", "jp_face": "jp_face"}
    # Without jp_face a style draws its own faces, as before it existed (tests/inference/test_faces.py checks that pass).
    assert not real_store.is_installed(real_store.entry("jp_face"))
    model = load_stylizer(real_store, "hayao")
    assert face_style_for(real_store, "hayao") == "hayao" and load_face_tools(real_store, model).model is model


def _pixels(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.int16)


def test_jp_face_redraws_the_faces_and_leaves_the_rest_of_the_scene_alone(styles_store: ModelStore,
                                                                          shared_photo) -> None:
    data = shared_photo("group_3_faces.jpg")
    settings = ConvertSettings(fmt="png")
    scene = load_stylizer(styles_store, "shinkai")
    tools = load_face_tools(styles_store, scene)
    assert tools.model.style == "jp_face"
    paired = convert_bytes(data, scene, settings, tools)
    alone = convert_bytes(data, scene, ConvertSettings(fmt="png", faces=False))
    a, b = _pixels(paired.data), _pixels(alone.data)
    scale = a.shape[1] / paired.input_size[0]
    faces = [f for f in paired.faces if f["pass"]]
    assert len(faces) == 3
    near = np.zeros(a.shape[:2], bool)
    for f in faces:
        x1, y1, x2, y2 = (v * scale for v in f["box"])  # type: ignore[attr-defined]
        core = (slice(int(y1 + (y2 - y1) * 0.3), int(y2 - (y2 - y1) * 0.2)),
                slice(int(x1 + (x2 - x1) * 0.2), int(x2 - (x2 - x1) * 0.2)))
        assert np.abs(a[core] - b[core]).mean() > 8  # the face itself is drawn again
        w, h = x2 - x1, y2 - y1
        near[max(0, int(y1 - 1.2 * h)):int(y2 + 1.2 * h), max(0, int(x1 - 1.2 * w)):int(x2 + 1.2 * w)] = True
    assert np.array_equal(a[~near], b[~near])  # and nothing away from the faces changes
    assert (~near).mean() > 0.3


def test_a_selfie_keeps_its_style_and_sketch_has_no_face_pass(styles_store: ModelStore, shared_photo) -> None:
    """A face that fills the picture is the picture: with jp_face drawing it, every style's selfie came
    out as the same anime face. And sketch's face crops came back as grey patches in its ink."""
    from inference.drawer import Drawer, DrawerSpec

    scene = load_stylizer(styles_store, "shinkai")
    selfie = convert_bytes(shared_photo("portrait_closeup.jpg"), scene, ConvertSettings(fmt="png"),
                           load_face_tools(styles_store, scene))
    alone = convert_bytes(shared_photo("portrait_closeup.jpg"), scene, ConvertSettings(fmt="png", faces=False))
    assert [f["pass"] for f in selfie.faces] == [False] and selfie.data == alone.data
    assert load_face_tools(styles_store, load_stylizer(styles_store, "sketch")) is None
    assert Drawer(DrawerSpec(styles_store.home, "openvino", 1, "sketch")).face_tools("sketch") is None
