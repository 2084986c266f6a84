"""The face pass on real photos with the real detector, and strength and colour on any model."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from inference.backends import TorchStylizer
from inference.colour import blend, keep_colours, srgb_to_oklab
from inference.engine import load_face_tools, load_stylizer
from inference.errors import ModelError
from inference.detector import Face, FaceDetector
from inference.faces import CROP, align_matrix, crop_mask, warp, worth_a_pass
from inference.pipeline import ConvertSettings, FaceTools, convert_bytes, resize
from testkit.models import DET_FILE
from testkit.pictures import PHOTOS
from testkit.bot_harness import REPO
from weights.store import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def detector(det_file: Path) -> FaceDetector:
    return FaceDetector(det_file)


@pytest.fixture(scope="module")
def face_store(real_store: ModelStore, detector: FaceDetector) -> ModelStore:
    return real_store  # it has the detector whenever the detector fixture did not skip


def rgb(name: str) -> np.ndarray:
    return np.asarray(Image.open(PHOTOS / name).convert("RGB"))


@pytest.mark.parametrize("name, count", [("group_3_faces.jpg", 3), ("portrait_closeup.jpg", 1), ("square_512.jpg", 0)])
def test_detector_finds_every_clear_face(detector: FaceDetector, name: str, count: int) -> None:
    faces = detector.detect(rgb(name))
    assert len(faces) == count
    for f in faces:
        x1, y1, x2, y2 = f.box
        assert f.score >= 0.5 and all(x1 <= x <= x2 and y1 <= y <= y2 for x, y in f.landmarks)


@pytest.mark.parametrize("name, cut", [("group_3_faces.jpg", None), ("town_1280x854.jpg", None),
                                       ("street_1279x867.jpg", None), ("portrait_closeup.jpg", None),
                                       ("group_3_faces.jpg", slice(100, 600))])
def test_detector_finds_what_insightface_finds(detector: FaceDetector, name: str, cut: slice | None) -> None:
    """Our decoding of SCRFD's maps against insightface's own SCRFD class on the same file: the
    same faces (wide photos and tall ones, so both ways of fitting the 640 px square), the same
    boxes and landmarks within a pixel, the same scores within float rounding."""
    from insightface.model_zoo.scrfd import SCRFD

    reference = SCRFD(model_file=str(DET_FILE))
    reference.prepare(ctx_id=-1, input_size=(640, 640), det_thresh=0.5)
    photo = rgb(name) if cut is None else rgb(name)[:, cut]  # cut: a tall part of a wide photo
    boxes, marks = reference.detect(np.ascontiguousarray(photo[..., ::-1]))  # insightface reads BGR
    ours = detector.detect(photo)
    assert len(ours) == len(boxes) > 0
    for face in ours:
        i = int(np.argmin(np.abs(boxes[:, :4] - np.array(face.box)).sum(axis=1)))
        assert np.abs(boxes[i, :4] - np.array(face.box)).max() < 1.0
        assert np.abs(marks[i] - face.landmarks).max() < 1.0
        assert abs(boxes[i, 4] - face.score) < 1e-3


def test_alignment_puts_the_eyes_where_the_template_says(detector: FaceDetector) -> None:
    photo = rgb("portrait_closeup.jpg")
    face = detector.detect(photo)[0]
    m = align_matrix(face)
    crop = warp(photo, m, (CROP, CROP))
    again = detector.detect(crop)
    assert crop.shape == (CROP, CROP, 3) and len(again) == 1
    eyes_in_crop = (m[:, :2] @ face.landmarks[:2].T).T + m[:, 2]
    assert np.allclose(again[0].landmarks[:2], eyes_in_crop, atol=12)  # the detector agrees, to a few px
    assert 0.40 * CROP < eyes_in_crop[:, 1].mean() < 0.52 * CROP  # room above for hair


def _coverage(photo: np.ndarray, out_size: tuple[int, int], faces: list) -> np.ndarray:  # type: ignore[type-arg]
    """Where the face pass may change the result, recomputed from the same transforms."""
    scale = out_size[0] / photo.shape[1]
    keep = np.ones(out_size[::-1], np.float32)
    for f in faces:
        if worth_a_pass(f, scale):
            m = cv2.invertAffineTransform(align_matrix(f)) * scale
            keep *= 1 - warp(crop_mask(), m, out_size, border=cv2.BORDER_CONSTANT)
    return 1 - keep


@pytest.fixture(scope="module")
def group_outputs(face_store: ModelStore) -> dict[str, object]:
    model = load_stylizer(face_store, "hayao")
    tools = load_face_tools(face_store, model)
    data = (PHOTOS / "group_3_faces.jpg").read_bytes()
    plain = convert_bytes(data, model, ConvertSettings(fmt="png", faces=False), tools)
    faced = convert_bytes(data, model, ConvertSettings(fmt="png"), tools)
    return {"plain": plain, "faced": faced, "tools": tools}


def _pixels(result: object) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(result.data)).convert("RGB")).astype(np.float32)  # type: ignore[attr-defined]


def test_faces_change_only_the_face_regions(group_outputs: dict[str, object]) -> None:
    plain, faced = _pixels(group_outputs["plain"]), _pixels(group_outputs["faced"])
    tools: FaceTools = group_outputs["tools"]  # type: ignore[assignment]
    faces = tools.detector.detect(rgb("group_3_faces.jpg"))
    cover = _coverage(rgb("group_3_faces.jpg"), (720, 720), faces)
    assert [f["pass"] for f in group_outputs["faced"].faces] == [True, True, True]  # type: ignore[attr-defined]
    diff = np.abs(faced - plain).mean(axis=2)
    assert np.array_equal(faced[cover == 0], plain[cover == 0]), "pixels outside every face mask changed"
    assert diff[cover > 0.9].mean() > 4, "the face regions were not redrawn"
    assert (cover == 0).mean() > 0.5


def test_no_seam_at_the_mask_border(group_outputs: dict[str, object]) -> None:
    faced = _pixels(group_outputs["faced"])
    plain = _pixels(group_outputs["plain"])
    tools: FaceTools = group_outputs["tools"]  # type: ignore[assignment]
    cover = _coverage(rgb("group_3_faces.jpg"), (720, 720), tools.detector.detect(rgb("group_3_faces.jpg")))

    def grad(img: np.ndarray) -> np.ndarray:
        grey = cv2.cvtColor(img.astype(np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
        return np.hypot(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1))

    g = grad(faced)
    border = (cover > 0.02) & (cover < 0.98)  # the feathered edge, where a seam would be
    inside = cover >= 0.98
    outside = (cover == 0) & (cv2.dilate((cover > 0).astype(np.uint8), np.ones((9, 9), np.uint8)) > 0)
    assert border.sum() > 500 and inside.sum() > 500 and outside.sum() > 500
    assert g[border].mean() <= 1.15 * max(g[inside].mean(), g[outside].mean())
    # no sharper than the picture was there: a 0.03-wide feather measures 1.27 here, ours 1.03
    assert g[border].mean() <= 1.15 * grad(plain)[border].mean()


def test_without_faces_the_result_is_the_whole_image_pass(real_store: ModelStore) -> None:
    model = load_stylizer(real_store, "hayao")
    data = (PHOTOS / "portrait_closeup.jpg").read_bytes()
    no_tools = convert_bytes(data, model, ConvertSettings(fmt="png"))
    switched_off = convert_bytes(data, model, ConvertSettings(fmt="png", faces=False))
    assert no_tools.data == switched_off.data and no_tools.faces == []


@pytest.mark.parametrize("offset", [(900.0, 800.0), (-40.0, 700.0), (2500.0, -30.0)])
def test_a_face_of_a_big_photo_is_cut_from_its_own_part(offset: tuple[float, float]) -> None:
    """A big reduction shrinks only the part of the photo the crop reads, not the whole photo;
    the crop is the one shrinking the whole photo gives. Past the photo's edges the mirrored
    border is there too, its mirror line within a pixel of the other's."""
    rng = np.random.default_rng(4)
    photo = cv2.resize(rng.integers(0, 256, (300, 300, 3), np.uint8), (3000, 3000), interpolation=cv2.INTER_CUBIC)
    angle, scale = np.deg2rad(12), 0.3
    m = np.array([[scale * np.cos(angle), -scale * np.sin(angle), 0.0],
                  [scale * np.sin(angle), scale * np.cos(angle), 0.0]])
    m[:, 2] = -m[:, :2] @ np.array(offset)  # the crop's corner at ``offset`` in the photo
    f = 2 * scale
    whole = cv2.resize(photo, None, fx=f, fy=f, interpolation=cv2.INTER_AREA)
    expected = cv2.warpAffine(whole, np.hstack([m[:, :2] / f, m[:, 2:]]), (256, 256), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_REFLECT101)
    ours = warp(photo, m, (256, 256))
    diff = np.abs(ours.astype(int) - expected.astype(int)).mean(axis=2)
    ys, xs = np.mgrid[0:256, 0:256]
    source = np.stack([xs, ys, np.ones_like(xs)], axis=-1) @ cv2.invertAffineTransform(m).T
    inside = ((source >= 0) & (source < 3000)).all(axis=-1)
    assert inside.mean() > 0.3 and diff[inside].mean() < 1.0
    assert diff.mean() < 5.0


def test_a_missing_or_corrupt_detector_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not installed; run: animebot weights download det_500m"):
        FaceDetector(tmp_path / "det_500m.onnx")
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(os.urandom(4096))
    with pytest.raises(ModelError, match="does not load"):
        FaceDetector(broken)


def test_cli_reports_faces_and_falls_back_without_a_detector(face_store: ModelStore, tmp_path: Path) -> None:
    env = {**os.environ, "ANIMEBOT_HOME": str(face_store.home)}
    cmd = [sys.executable, "-m", "bot", "convert", str(PHOTOS / "group_3_faces.jpg"), "--out-dir", str(tmp_path), "--json"]
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert len(report["faces"]) == 3 and report["detect_s"] > 0 and report["faces_s"] > 0

    bare = ModelStore(tmp_path / "bare")  # hayao only: no detector installed
    bare.models_dir.mkdir(parents=True)
    (bare.models_dir / face_store.entry("hayao").filename).symlink_to(face_store.path(face_store.entry("hayao")))
    done = subprocess.run(cmd[:-1], env={**env, "ANIMEBOT_HOME": str(bare.home)}, cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "face detector det_500m.onnx is not installed" in done.stderr and "without the face pass" in done.stderr


@pytest.mark.slow  # draws a 720 px picture three ways
def test_strength_zero_is_the_photo_and_full_is_the_style(tiny_model: TorchStylizer) -> None:
    data = (PHOTOS / "street_1279x867.jpg").read_bytes() if PHOTOS.is_dir() else _gradient_png()
    photo = np.asarray(resize(Image.open(io.BytesIO(data)).convert("RGB"), 720))
    full = convert_bytes(data, tiny_model, ConvertSettings(fmt="png", faces=False)).data
    at_0 = convert_bytes(data, tiny_model, ConvertSettings(fmt="png", strength=0)).data
    at_100 = convert_bytes(data, tiny_model, ConvertSettings(fmt="png", strength=100)).data
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(at_0))), photo)
    assert at_100 == full


def _gradient_png() -> bytes:
    y, x = np.mgrid[0:240, 0:320]
    img = np.stack([x * 255 // 320, y * 255 // 240, (x + y) * 255 // 560], axis=2).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(img).save(out, "PNG")
    return out.getvalue()


def test_half_strength_does_not_turn_grey() -> None:
    red = np.full((8, 8, 3), (220, 40, 40), np.uint8)
    cyan = np.full((8, 8, 3), (40, 200, 210), np.uint8)

    def chroma(img: np.ndarray) -> float:
        lab = srgb_to_oklab(img)
        return float(np.hypot(lab[..., 1], lab[..., 2]).mean())

    ours = blend(red, cyan, 0.5)
    rgb_mix = ((red.astype(np.float32) + cyan) / 2).astype(np.uint8)
    assert chroma(ours) >= 0.9 * min(chroma(red), chroma(cyan))
    assert chroma(rgb_mix) < 0.35 * min(chroma(red), chroma(cyan))  # what naive mixing does


def test_a_grey_blended_with_a_colour_keeps_that_colours_hue() -> None:
    """A photo's white sky or grey wall, half way to a blue drawing, is a paler blue at every grey level: a
    pure grey has no hue of its own (float noise gave it a random one, and the mix turned purple or teal)."""
    levels = np.arange(256, dtype=np.uint8)
    greys = np.stack([levels] * 3, axis=-1)[None]
    blue = np.full_like(greys, (90, 150, 230))
    hue = lambda img: np.degrees(np.arctan2(srgb_to_oklab(img)[..., 2], srgb_to_oklab(img)[..., 1]))  # noqa: E731
    mixed = blend(greys, blue, 0.5)
    assert np.abs(hue(mixed)[0, 8:] - hue(blue)[0, 0]).max() < 3  # the darkest are too dark to have a hue
    assert np.abs(hue(blend(blue, greys, 0.5))[0, 8:] - hue(blue)[0, 0]).max() < 3  # and the other way round


@pytest.mark.slow  # draws a 720 px picture three ways
def test_keep_colours_holds_the_photos_mean_chroma(tiny_model: TorchStylizer) -> None:
    data = (PHOTOS / "town_1280x854.jpg").read_bytes() if PHOTOS.is_dir() else _gradient_png()
    photo = np.asarray(resize(Image.open(io.BytesIO(data)).convert("RGB"), 720))
    anime = np.asarray(Image.open(io.BytesIO(convert_bytes(data, tiny_model, ConvertSettings(fmt="png")).data)))
    kept = np.asarray(Image.open(io.BytesIO(
        convert_bytes(data, tiny_model, ConvertSettings(fmt="png", keep_colours=True)).data)))

    def mean_ab(img: np.ndarray) -> np.ndarray:
        lab = cv2.cvtColor(img.astype(np.float32) / 255, cv2.COLOR_RGB2LAB)
        return lab[..., 1:].reshape(-1, 2).mean(axis=0)

    delta_kept = float(np.linalg.norm(mean_ab(kept) - mean_ab(photo)))
    assert delta_kept < 2.0
    assert delta_kept < float(np.linalg.norm(mean_ab(anime) - mean_ab(photo)))
    lightness_gap = np.abs(srgb_to_oklab(kept)[..., 0] - srgb_to_oklab(anime)[..., 0]).mean()
    assert lightness_gap < 0.02, "the lines and shading should be the anime image's"
    assert np.array_equal(keep_colours(photo, anime), kept)


def test_which_faces_get_their_own_pass() -> None:
    def face(eye_px: float) -> Face:
        marks = np.array([[100, 100], [100 + eye_px, 100], [100 + eye_px / 2, 120], [105, 140], [95 + eye_px, 140]],
                         np.float32)
        return Face((90, 80, 110 + eye_px, 150), 0.9, marks)

    assert not worth_a_pass(face(10), 0.5)  # too small to gain anything
    assert worth_a_pass(face(60), 0.5)  # 30 px in the result, ~100 px in a crop
    assert not worth_a_pass(face(300), 0.5)  # already bigger in the result than in a crop
    assert worth_a_pass(face(300), 0.5, face_model=True, result_short=1000)  # a face model still has something to add
    assert not worth_a_pass(face(300), 0.5, face_model=True, result_short=80)  # unless it is 35 px of an 80 px picture
