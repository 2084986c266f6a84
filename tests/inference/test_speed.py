"""What keeps a worker fast and small: face crop sizes, batched faces, the compiled-model cache,
and its peak memory with the face pass. No timing is asserted here (bench/ measures speed)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from inference.backends import OpenVinoStylizer, TorchStylizer
from inference.detector import Face
from inference.faces import CROP_SIZES, TEMPLATE, TEMPLATE_EYE_PX, ZOOM, Framing, crop_size, template
from inference.onnx_export import export
from inference.pipeline import stylize_crops
from testkit.pictures import PHOTOS
from testkit.bot_harness import REPO
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def face_with_eyes(eye_px: float) -> Face:
    """A frontal face whose eyes are ``eye_px`` apart: the template's landmarks, scaled."""
    marks = TEMPLATE * (eye_px / TEMPLATE_EYE_PX)
    return Face((0.0, 0.0, 10.0, 10.0), 0.9, marks.astype(np.float32))


@pytest.mark.parametrize("eye_px, scale, size", [
    (20, 1.0, 256),    # 20 px apart in the result: a 256 px crop holds it 2.5x larger
    (40, 1.0, 384),    # group_3_faces' faces at 720 px
    (40, 0.5, 256),    # the same face in a photo drawn at half its size
    (70, 1.0, 512),    # a selfie
    (300, 1.0, 512),   # never more than the largest crop
])
def test_a_face_is_drawn_at_the_smallest_crop_that_holds_its_detail(eye_px: float, scale: float, size: int) -> None:
    assert crop_size(face_with_eyes(eye_px), scale) == size


def eye_distance(marks: np.ndarray) -> float:
    return float(np.linalg.norm(marks[1] - marks[0]))


def test_a_face_model_gets_one_tight_crop_with_the_face_as_big_as_in_training() -> None:
    """jp_face draws anime eyes only on faces as big as in its 512 px training crops (at 384 px,
    framed as at 512, they close): its 384 px crop keeps that face size and frames it tighter,
    lifted so the chin is inside the paste mask. Scene styles keep the whole framing."""
    from inference.engine import crop_framing
    from weights.registry import builtin_entries

    entries = {e.name: e for e in builtin_entries()}
    jp = crop_framing(entries["jp_face"])
    assert jp == crop_framing(entries["face_paint_512_v2"]) == Framing((384,), 512)
    assert crop_size(face_with_eyes(10), 1.0, jp.sizes) == crop_size(face_with_eyes(90), 1.0, jp.sizes) == 384
    tight = template(384, jp.zoom(384))
    assert abs(eye_distance(tight) - TEMPLATE_EYE_PX) < 1e-3  # the face is as big as at 512
    assert tight[:, 1].mean() < TEMPLATE[:, 1].mean() * 384 / 512  # and sits higher in its crop
    scene = crop_framing(entries["hayao"])
    assert scene == Framing() and scene.sizes == CROP_SIZES and scene.zoom(256) == scene.zoom(512) == ZOOM


@pytest.mark.slow  # exports and compiles a model
def test_batched_faces_give_the_pixels_drawn_one_at_a_time(tiny_model: TorchStylizer, tmp_path: Path) -> None:
    onnx = tmp_path / "tiny.onnx"
    onnx.write_bytes(export(tiny_model.module))
    model = OpenVinoStylizer("tiny", onnx, threads=1)
    rng = np.random.default_rng(5)
    crops = [rng.integers(0, 256, (256, 256, 3), np.uint8) for _ in range(3)]
    together = stylize_crops(crops, model)
    assert (3, 256, 256, 3) in model._compiled  # it really ran as one batch
    alone = [stylize_crops([c], model)[0] for c in crops]
    assert all(np.abs(a.astype(int) - b.astype(int)).max() <= 1 for a, b in zip(together, alone))
    assert not np.array_equal(together[0], together[1])  # three different faces came back, in order


def test_a_model_whose_graph_refuses_a_batch_draws_faces_one_at_a_time(styles_store: ModelStore) -> None:
    """The AnimeGANv3 files write a batch of 1 into their attention block."""
    from inference.engine import load_stylizer

    model = load_stylizer(styles_store, "jp_face")
    rng = np.random.default_rng(6)
    crops = [rng.integers(0, 256, (512, 512, 3), np.uint8) for _ in range(2)]
    out = stylize_crops(crops, model)
    assert [o.shape for o in out] == [(512, 512, 3)] * 2 and not np.array_equal(out[0], out[1])


WORKER = """
import json, sys
from pathlib import Path
from bench.memory import peak_rss_mb
from inference.drawer import Drawer, DrawerSpec, WorkOrder
from inference.pipeline import ConvertSettings
home, style = Path(sys.argv[1]), sys.argv[2]
drawer = Drawer(DrawerSpec(home, "openvino", 2, style))
drawer.load()
faces = []
for name in sys.argv[3:]:
    result = drawer.draw(WorkOrder("j", Path(name).read_bytes(), style, ConvertSettings()))
    faces.append(sum(1 for f in result.faces if f["pass"]))
print(json.dumps({"peak_mb": peak_rss_mb(), "faces": faces}))
"""


def run_worker(home: Path, style: str, *photos: str) -> dict[str, object]:
    """A fresh worker process, as the bot spawns one, drawing ``photos`` at 720 px with the face pass."""
    out = subprocess.run([sys.executable, "-c", WORKER, str(home), style, *(str(PHOTOS / p) for p in photos)],
                         cwd=REPO, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_worker_drawing_faces_draws_each_photo_s_faces(styles_store: ModelStore) -> None:
    """Hayao with jp_face faces, on two photos of different shapes, in a fresh worker process: each
    photo's faces are redrawn. Its peak memory (about 430 MB in bfloat16, 560 MB in fp32, docs/benchmarks.md,
    "Memory") is measured, not bounded, by ``python -m bench.worker_memory``, on the same photos."""
    from inference.engine import exported_onnx

    entry, path = styles_store.require("hayao")
    exported_onnx(styles_store, entry, path)  # made at the bot's first start; a worker making it imports torch
    report = run_worker(styles_store.home, "hayao", "group_3_faces.jpg", "town_1280x854.jpg")
    assert report["faces"] == [3, 2]


def test_a_restarted_worker_finds_its_compiled_shapes(tmp_path: Path, styles_store: ModelStore) -> None:
    """OpenVINO's model cache under $ANIMEBOT_HOME/cache/openvino: the second process compiles nothing new."""
    home = tmp_path / "home"
    (home / "models").mkdir(parents=True)
    for name in ("hayao_v3", "det_500m", "jp_face"):
        entry = styles_store.entry(name)
        (home / "models" / entry.filename).symlink_to(styles_store.path(entry))
    run_worker(home, "hayao_v3", "group_3_faces.jpg")
    cache = home / "cache" / "openvino"
    first = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    assert len(first) >= 2  # the photo's shape and the face crop's, at least
    run_worker(home, "hayao_v3", "group_3_faces.jpg")
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == first
