"""HD: Real-CUGAN 2x rebuilt from its ncnn files (inference/upscale*.py), against ncnn's own runtime
on real drawings, whole and in tiles."""
from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inference.drawer import Drawer, DrawerSpec, WorkFailed
from inference.engine import load_stylizer, load_upscaler
from inference.errors import ModelError
from inference.ncnn_reader import read_network
from inference.imageio import encode
from inference.pipeline import ConvertSettings, Converted, convert_bytes
from inference.upscale import CONTEXT, TILE_PIXELS, Upscaler, spans, tile_shape, upscale_file
from testkit import ncnn_reference
from testkit.models import CUGAN_BIN, CUGAN_PARAM
from testkit.pictures import psnr
from weights.store import ModelStore


def _drawing(store: ModelStore, photo: bytes, max_side: int) -> np.ndarray:
    """A real photo drawn in Hayao's style, as the bot draws it (the face pass aside)."""
    model = load_stylizer(store, "hayao", threads=1)
    done = convert_bytes(photo, model, ConvertSettings(max_side=max_side, fmt="png", faces=False))
    return np.asarray(Image.open(io.BytesIO(done.data)).convert("RGB"))


@pytest.fixture(scope="module")
def small_drawing(hd_store: ModelStore, shared_photo: Callable[[str], bytes]) -> np.ndarray:
    """191 x 201: both sides odd, the case that needs the extra reflected pixel."""
    return _drawing(hd_store, shared_photo("portrait_closeup.jpg"), 201)


@pytest.fixture(scope="module")
def reference(small_drawing: np.ndarray) -> np.ndarray:
    """The small drawing doubled by ncnn's own runtime, in fp32."""
    try:
        ncnn = ncnn_reference.load(CUGAN_PARAM, CUGAN_BIN, threads=1)
    except ImportError:
        pytest.skip("the ncnn package is absent (pip install ncnn; it is in the test extra)")
    return ncnn(small_drawing)


def _fp32(up: Upscaler) -> Upscaler:
    """``up`` computing in fp32 even on a CPU where OpenVINO would pick bfloat16."""
    config = getattr(up.model, "_config", None)
    if config is not None:
        config["INFERENCE_PRECISION_HINT"] = "f32"
    return up


@pytest.mark.parametrize("backend", ["openvino", "onnxruntime"])
def test_hd_of_a_real_drawing_is_ncnn_s_own_result(hd_store: ModelStore, small_drawing: np.ndarray,
                                                  reference: np.ndarray, backend: str) -> None:
    ours = _fp32(load_upscaler(hd_store, backend, threads=1))(small_drawing)  # type: ignore[arg-type]
    h, w = small_drawing.shape[:2]
    assert (h % 2, w % 2) == (1, 1) and ours.shape == reference.shape == (2 * h, 2 * w, 3)
    assert psnr(ours, reference) >= 40


def test_hd_is_clearly_closer_to_real_cugan_than_a_lanczos_resize(hd_store: ModelStore, small_drawing: np.ndarray,
                                                                   reference: np.ndarray) -> None:
    ours = _fp32(load_upscaler(hd_store, threads=1))(small_drawing)
    h, w = small_drawing.shape[:2]
    lanczos = np.asarray(Image.fromarray(small_drawing).resize((2 * w, 2 * h), Image.Resampling.LANCZOS))
    assert psnr(ours, reference) >= psnr(lanczos, reference) + 10


def test_a_big_drawing_in_tiles_is_the_drawing_in_one_pass(hd_store: ModelStore,
                                                            shared_photo: Callable[[str], bytes]) -> None:
    """Tiles overlap by the net's whole context; only the squeeze-excite gates, averaged over a tile
    instead of the picture, tell them apart."""
    drawing = _drawing(hd_store, shared_photo("town_1280x854.jpg"), 480)
    h, w = drawing.shape[:2]
    assert tile_shape(h, w) != (h, w)  # the default budget cuts it
    tiled = _fp32(load_upscaler(hd_store, threads=1))
    whole = Upscaler(tiled.model, budget=(h + 2 * CONTEXT) * (w + 2 * CONTEXT))
    a, b = tiled(drawing), whole(drawing)
    assert a.shape == b.shape == (2 * h, 2 * w, 3)
    assert psnr(a, b) >= 40


@pytest.mark.parametrize("size", [(33, 47), (50, 34), (64, 64)])
def test_hd_doubles_each_side_exactly(hd_store: ModelStore, size: tuple[int, int]) -> None:
    w, h = size
    picture = np.random.default_rng(w * h).integers(0, 256, (h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(picture).save(buf, "PNG")
    done = upscale_file(buf.getvalue(), load_upscaler(hd_store, threads=1), "jpg")
    with Image.open(io.BytesIO(done.data)) as img:
        assert img.format == "JPEG" and img.size == done.output_size == (2 * w, 2 * h)


@pytest.mark.parametrize("h, w", [(480, 720), (720, 720), (360, 1440), (1280, 960), (2560, 1920), (64, 64)])
def test_tiles_cover_the_picture_within_the_budget(h: int, w: int) -> None:
    th, tw = tile_shape(h, w)
    assert (th + 2 * CONTEXT) * (tw + 2 * CONTEXT) <= TILE_PIXELS
    for n, t in ((h, th), (w, tw)):
        covered = np.zeros(n, bool)
        for span in spans(n, t):
            assert span.start % 2 == 0 and span.length == t  # the net's stride-2 grid, one compiled shape
            covered[span.start:span.start + span.length] = True
        assert covered.all()


def test_weights_that_are_not_the_network_s_are_refused(tmp_path: Path) -> None:
    if not CUGAN_PARAM.is_file():
        pytest.skip(f"real model file {CUGAN_PARAM} is absent (it lives in ../shared/models on CI)")
    short = tmp_path / "short.bin"
    short.write_bytes(b"\x47\x6b\x30\x01" + bytes(100))
    with pytest.raises(ModelError, match="ends inside its weights"):
        read_network(CUGAN_PARAM, short)


def test_a_drawer_doubles_a_result_s_file_or_says_in_one_sentence_why_not(
        hd_store: ModelStore, small_drawing: np.ndarray, hayao_file: Path, tmp_path: Path) -> None:
    """What a worker will call for the chat's HD button: the result's file in, the file doubled out."""
    result = encode(Image.fromarray(small_drawing), "jpg")
    done = Drawer(DrawerSpec(hd_store.home, "openvino", 1, "hayao")).hd("job-1", result)
    h, w = small_drawing.shape[:2]
    assert isinstance(done, Converted) and done.output_size == (2 * w, 2 * h)
    with Image.open(io.BytesIO(done.data)) as img:
        assert img.format == "JPEG" and img.size == (2 * w, 2 * h)
    bare = ModelStore(tmp_path)
    bare.import_file(hayao_file)
    failed = Drawer(DrawerSpec(bare.home, "openvino", 1, "hayao")).hd("job-2", result)
    assert isinstance(failed, WorkFailed) and failed.code == "not_installed"
    assert failed.message == "model 'realcugan_up2x' is not installed; run: animebot weights download realcugan_up2x"


def test_a_damaged_cached_graph_is_made_again(hd_store: ModelStore, tmp_path: Path) -> None:
    """(``hd_store`` only skips this where ../shared lacks the files.)"""
    store = ModelStore(tmp_path)
    for path in (CUGAN_PARAM, CUGAN_BIN):
        store.import_file(path)
    load_upscaler(store, "onnxruntime", threads=1)
    (cached,) = (store.cache_dir / "onnx").glob("ncnn-*.onnx")
    cached.write_bytes(b"half a file")  # a disk that filled up under another program, say
    picture = np.full((40, 40, 3), 200, np.uint8)
    assert load_upscaler(store, "onnxruntime", threads=1)(picture).shape == (80, 80, 3)
    assert cached.stat().st_size > 1_000_000
