"""`animebot` as a person runs it: a separate process, a fresh data dir, real files."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from testkit.phone_files import FORMATS as PHONE_FORMATS, SUFFIX, as_phone_file
from testkit.cli import animebot
from testkit.models import DET_FILE, HAYAO_FILE, MODELS
from testkit.pictures import psnr


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, hayao_file: Path) -> Path:
    home = tmp_path_factory.mktemp("home")
    done = animebot(home, "weights", "import", str(hayao_file))
    assert done.returncode == 0, done.stderr
    assert "installed as hayao" in done.stdout
    return home


def test_weights_list_shows_installed_models_and_licences(home: Path) -> None:
    out = animebot(home, "weights", "list").stdout
    hayao_line = next(line for line in out.splitlines() if line.strip().startswith("hayao"))
    assert "installed" in hayao_line
    paprika_line = next(line for line in out.splitlines() if line.strip().startswith("paprika"))
    assert "installed" not in paprika_line
    assert out.count("non-commercial") >= 7


def test_convert_json_reports_sizes_style_and_timings(home: Path, photos: list[Path], tmp_path: Path) -> None:
    src = next(p for p in photos if p.name.startswith("street"))
    out = tmp_path / "out.jpg"
    done = animebot(home, "convert", str(src), "-o", str(out), "--style", "hayao", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip())
    assert report["ok"] and report["style"] == "hayao" and report["backend"] == "openvino"
    assert report["input_size"] == [1279, 867] and report["output_size"] == [720, 488]
    assert all(report[k] > 0 for k in ("decode_s", "model_s", "encode_s"))
    with Image.open(out) as img:
        assert img.format == "JPEG" and img.size == (720, 488)


def test_convert_many_into_a_folder_with_a_bad_file_among_them(home: Path, photos: list[Path], tmp_path: Path) -> None:
    bad = tmp_path / "notes.jpg"
    bad.write_text("not a photo")
    small = [p for p in photos if p.name.startswith(("portrait_closeup", "square"))]
    done = animebot(home, "convert", *map(str, small), str(bad), "--out-dir", str(tmp_path / "o"),
                     "--format", "png", "--max-side", "256", "--json")
    assert done.returncode == 1  # one input failed
    assert "Traceback" not in done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["ok"] for r in reports] == [True, True, False]
    assert reports[-1]["error"] == "not_image"
    for r in reports[:2]:
        assert Path(r["output"]).suffix == ".png" and max(r["output_size"]) <= 256
        assert Path(r["output"]).is_file()


def test_an_iphone_s_heic_and_an_avif_convert_upright(home: Path, photos: list[Path], tmp_path: Path) -> None:
    """Files stored sideways with their turn (as a phone stores them) come out as the JPEG of the same photo does."""
    portrait = next(p for p in photos if p.name == "portrait_900x1200.jpg")
    phone_files = [tmp_path / f"IMG_{n}{SUFFIX[fmt].upper()}" for n, fmt in enumerate(PHONE_FORMATS)]
    for path, fmt in zip(phone_files, PHONE_FORMATS):
        path.write_bytes(as_phone_file(portrait.read_bytes(), fmt))
    done = animebot(home, "convert", str(portrait), *map(str, phone_files), "--out-dir", str(tmp_path / "o"),
                     "--max-side", "256", "--no-faces", "--json")
    assert done.returncode == 0, done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["input_size"], r["output_size"]) for r in reports] == [([900, 1200], [192, 256])] * 3
    jpeg, *phone = (np.asarray(Image.open(r["output"]).convert("RGB")) for r in reports)
    for drawn in phone:
        assert psnr(drawn, jpeg) > 30 and psnr(drawn, jpeg[::-1, ::-1]) < 20  # not upside down


def test_convert_without_a_model_says_how_to_get_one(tmp_path: Path, photos: list[Path]) -> None:
    done = animebot(tmp_path / "empty", "convert", str(photos[0]))
    assert done.returncode == 2
    assert "animebot weights download" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not MODELS.is_dir(), reason="../shared/models is absent")
def test_import_a_file_that_is_not_a_model(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00" * 100)
    done = animebot(tmp_path / "h", "weights", "import", str(junk), str(HAYAO_FILE))
    assert done.returncode == 1
    assert "not a known model" in done.stderr and "installed as hayao" in done.stdout


def _photo_copy(src: Path, dest: Path, fmt: str = "JPEG") -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    Image.open(src).convert("RGB").save(dest, fmt)
    return dest


def test_inputs_of_one_name_get_outputs_of_their_own_and_no_input_is_replaced(
    home: Path, photos: list[Path], tmp_path: Path
) -> None:
    square, closeup, street = (next(p for p in photos if p.name.startswith(n))
                               for n in ("square", "portrait_closeup", "street"))
    out = tmp_path / "out"
    inputs = [_photo_copy(square, tmp_path / "a" / "x.jpg"), _photo_copy(closeup, tmp_path / "b" / "x.jpg"),
              _photo_copy(street, tmp_path / "b" / "x.png", "PNG"),
              _photo_copy(square, out / "x.hayao.jpg")]  # an earlier result, converted again
    before = [p.read_bytes() for p in inputs]
    done = animebot(home, "convert", *map(str, inputs), "--out-dir", str(out), "--max-side", "64",
                     "--no-faces", "--json")
    assert done.returncode == 0, done.stderr
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    outputs = [Path(r["output"]) for r in reports]
    assert len(set(outputs)) == 4 and not set(outputs) & set(inputs)
    assert [p.read_bytes() for p in inputs] == before
    for path, report in zip(outputs, reports):  # each file is its own input's result
        with Image.open(path) as img:
            assert list(img.size) == report["output_size"]
    assert [r["output_size"] for r in reports] == [[64, 64], [61, 64], [64, 43], [64, 64]]


def test_an_output_onto_its_own_input_is_refused(home: Path, photos: list[Path], tmp_path: Path) -> None:
    src = _photo_copy(photos[0], tmp_path / "same.jpg")
    before = src.read_bytes()
    done = animebot(home, "convert", str(src), "-o", str(tmp_path / "." / "same.jpg"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"animebot: -o {tmp_path}/same.jpg is the input itself; "
                                                "choose another name for the output"]
    assert src.read_bytes() == before


def test_output_errors_are_one_line_each_and_the_other_inputs_still_convert(
    home: Path, photos: list[Path], tmp_path: Path
) -> None:
    a, b = (_photo_copy(p, tmp_path / f"{n}.jpg") for p, n in zip(photos[:2], "ab"))
    out = tmp_path / "out"
    (out / "a.hayao.jpg").mkdir(parents=True)  # a's output name is taken by a folder
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    runs = {
        "taken": ([str(a), str(b), "--out-dir", str(out)], [False, True]),
        "-o folder": ([str(a), "-o", str(out), "--format", "jpg"], [False]),
        "--out-dir file": ([str(a), str(b), "--out-dir", str(a_file)], [False, False]),
        "--out-dir nowhere": ([str(a), "--out-dir", "/proc/animebot/out"], [False]),
    }
    if Path("/dev/full").exists():
        runs["-o full disk"] = ([str(a), "-o", "/dev/full", "--format", "jpg"], [False])
    for name, (args, expected) in runs.items():
        done = animebot(home, "convert", *args, "--max-side", "64", "--no-faces", "--json")
        assert done.returncode == 1 and "Traceback" not in done.stderr, (name, done.stderr)
        reports = [json.loads(line) for line in done.stdout.splitlines()]
        assert [r["ok"] for r in reports] == expected, name
        assert all(r["error"] == "output" and r["message"].startswith("cannot write") for r in reports if not r["ok"])
    assert (out / "b.hayao.jpg").is_file()
    done = animebot(home, "convert", str(a), "--out-dir", str(a_file), "--max-side", "64", "--no-faces")
    assert done.stderr.strip().splitlines() == [f"{a}: cannot write {a_file}/a.hayao.jpg: "
                                                f"{a_file} is a file, not a folder"]


@pytest.mark.parametrize("threads", ["-3", "0", "257"])
def test_threads_out_of_range_is_one_line(home: Path, photos: list[Path], tmp_path: Path, threads: str) -> None:
    done = animebot(home, "convert", str(photos[0]), "--threads", threads, "-o", str(tmp_path / "o.jpg"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["animebot: --threads must be between 1 and 256"]
    assert not (tmp_path / "o.jpg").exists()


def test_an_output_name_and_format_that_disagree_are_refused(home: Path, photos: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out.png"
    done = animebot(home, "convert", str(photos[0]), "-o", str(out), "--format", "jpg")
    assert done.returncode == 2 and not out.exists()
    assert done.stderr.strip().splitlines() == ["animebot: -o out.png names a png file but --format is jpg; "
                                                "make them agree"]


def test_an_unknown_style_lists_the_installed_ones(home: Path, photos: list[Path]) -> None:
    done = animebot(home, "convert", str(photos[0]), "--style", "nope")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "installed styles: hayao " in line and "animebot weights download NAME" in line
    assert "det_500m" not in line and "paprika" not in line


def test_json_says_when_the_face_pass_did_not_run(home: Path, photos: list[Path], tmp_path: Path) -> None:
    src = str(next(p for p in photos if p.name.startswith("portrait_closeup")))
    for extra, why in (([], "det_500m"), (["--no-faces"], "--no-faces")):  # this home has no detector
        done = animebot(home, "convert", src, "-o", str(tmp_path / "o.jpg"), "--max-side", "64", "--json", *extra)
        report = json.loads(done.stdout)
        assert report["faces"] is None and why in report["faces_skipped"]


@pytest.mark.skipif(not MODELS.is_dir(), reason="../shared/models is absent")
def test_import_a_folder_installs_what_it_knows_and_names_the_rest(photos: list[Path], tmp_path: Path) -> None:
    home = tmp_path / "h"
    done = animebot(home, "weights", "import", str(MODELS))
    assert done.returncode == 0, done.stderr
    assert f"{HAYAO_FILE}: installed as hayao" in done.stdout
    assert f"{DET_FILE}: installed as det_500m" in done.stdout
    unknown = next(line for line in done.stdout.splitlines() if "not recognised" in line)
    assert "MODELS.md" in unknown and HAYAO_FILE.name not in unknown
    # With the detector the face pass runs: a list of faces, not null.
    src = str(next(p for p in photos if p.name.startswith("portrait_closeup")))
    report = json.loads(animebot(home, "convert", src, "-o", str(tmp_path / "o.jpg"), "--json").stdout)
    assert len(report["faces"]) == 1 and "faces_skipped" not in report
    (tmp_path / "empty").mkdir()
    done = animebot(home, "weights", "import", str(tmp_path / "empty"))
    assert done.returncode == 1
    assert done.stderr.strip() == f"animebot: {tmp_path / 'empty'}: no known model file in this folder"
