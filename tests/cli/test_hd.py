"""`animebot convert --hd` as a person runs it: the drawing `animebot convert` gives, doubled by
Real-CUGAN, in any picture format."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inference.engine import load_upscaler
from testkit import ncnn_reference
from testkit.clip_maker import gif, numbered_frames
from testkit.models import CUGAN_BIN, CUGAN_PARAM
from testkit.cli import animebot
from weights.store import ModelStore

BORDER = 24  # px left out at each edge, as the independent check does


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, hayao_file: Path) -> Path:
    for path in (CUGAN_PARAM, CUGAN_BIN):
        if not path.is_file():
            pytest.skip(f"real model file {path} is absent (it lives in ../shared/models on CI)")
    home = tmp_path_factory.mktemp("hd-home")
    done = animebot(home, "weights", "import", str(hayao_file), str(CUGAN_PARAM), str(CUGAN_BIN))
    assert done.returncode == 0, done.stderr
    return home


def _convert(home: Path, *args: str) -> dict[str, object]:
    done = animebot(home, "convert", *args, "--style", "hayao", "--max-side", "256", "--threads", "1", "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_hd_png_is_real_cugan_of_the_plain_drawing(home: Path, photos: list[Path], tmp_path: Path) -> None:
    src = next(p for p in photos if p.name == "portrait_closeup.jpg")
    plain = _convert(home, str(src), "-o", str(tmp_path / "plain.png"))
    hd = _convert(home, str(src), "--hd", "--format", "png", "--out-dir", str(tmp_path))
    w, h = plain["output_size"]  # type: ignore[misc]
    assert hd["output_size"] == [2 * w, 2 * h] and float(hd["hd_s"]) > 0  # type: ignore[arg-type]
    assert Path(str(hd["output"])).name == "portrait_closeup.hayao-hd.png"
    drawing = np.asarray(Image.open(tmp_path / "plain.png").convert("RGB"))
    with Image.open(str(hd["output"])) as img:
        assert img.format == "PNG" and img.size == (2 * w, 2 * h)
        ours = np.asarray(img.convert("RGB"))
    # The drawing inside --hd is plain convert's, pixel for pixel: doubled here the same way, it is the same file's.
    assert np.array_equal(ours, load_upscaler(ModelStore(home), threads=1)(drawing))
    to_reference, lanczos_to_reference = ncnn_reference.closeness(ours, drawing, CUGAN_PARAM, CUGAN_BIN, BORDER)
    assert to_reference >= 38 and to_reference >= lanczos_to_reference + 10


def test_hd_jpeg_is_twice_the_plain_jpeg(home: Path, photos: list[Path], tmp_path: Path) -> None:
    src = next(p for p in photos if p.name == "square_512.jpg")
    plain = _convert(home, str(src), "-o", str(tmp_path / "plain.jpg"))
    hd = _convert(home, str(src), "--hd", "-o", str(tmp_path / "hd.jpg"))
    w, h = plain["output_size"]  # type: ignore[misc]
    with Image.open(tmp_path / "hd.jpg") as img:
        assert img.format == "JPEG" and img.size == (2 * w, 2 * h) == tuple(hd["output_size"])  # type: ignore[arg-type]


def test_hd_of_a_clip_is_refused_in_one_line(home: Path, tmp_path: Path) -> None:
    clip = tmp_path / "wave.gif"
    clip.write_bytes(gif(numbered_frames(4, (64, 48)), 8))
    done = animebot(home, "convert", str(clip), "--hd", "--out-dir", str(tmp_path / "o"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"{clip}: {clip} is a clip; --hd doubles pictures only"
    assert not (tmp_path / "o").exists()
