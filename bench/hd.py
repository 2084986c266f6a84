"""HD's cost: Real-CUGAN 2x against the drawing it doubles, and against ncnn's own runtime; its memory.

    python -m bench.hd --home DIR [--photo PATH] [--runs 3] [--threads 2] [--save OUT_DIR] [--part speed|memory]

DIR needs ``hayao`` and ``realcugan_up2x`` installed (and ``sketch`` for ``--save``). Times are
the best of ``--runs`` in one run, the engines taking turns in each round, shapes compiled
beforehand, every engine on the same ``--threads``:

- the drawing: Hayao's model pass on the photo at 720 px (as bench.styles times it);
- HD of that drawing on OpenVINO, at its default precision (bf16 where the CPU has bfloat16
  units) and in fp32, each as a ratio to the drawing's time at that precision;
- the same picture through ncnn's own runtime (PyPI ``ncnn``): with its defaults (Winograd
  convolutions; fp16 storage where the CPU has it), and in fp32; whole, as realcugan-ncnn-vulkan
  runs a picture of this size.

Peak memory (VmHWM) is read in a fresh process that loads HD and doubles one drawing: a 1280 px
result, a panorama (photos side by side, drawn at 720 px), and the 720 px drawing in one pass
(tiles off) to show what the tiles save. ``--save`` writes crops of HD against a 2x Lanczos resize,
side by side, to look at (they contain the shared photos: keep them out of the repository).
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"
PHOTO = PHOTOS / "town_1280x854.jpg"
PANORAMA = ("town_1280x854.jpg", "street_1279x867.jpg", "square_512.jpg")


def best(engines: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Each engine's best time of ``runs``, the engines taking turns in every round, so that a CPU
    shared with other work slows them alike; each runs once first (compiling its shape)."""
    for run in engines.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(runs):
        for name, run in engines.items():
            t0 = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - t0)
    return {name: min(t) for name, t in times.items()}


def draw(home: Path, photo: bytes, max_side: int, style: str = "hayao", threads: int = 2) -> np.ndarray:
    from inference.engine import load_stylizer
    from inference.pipeline import ConvertSettings, convert_bytes
    from weights.store import ModelStore

    model = load_stylizer(ModelStore(home), style, threads=threads)
    done = convert_bytes(photo, model, ConvertSettings(max_side=max_side, fmt="png", faces=False))
    return np.asarray(Image.open(io.BytesIO(done.data)).convert("RGB"))


def speed(home: Path, photo: Path, runs: int, threads: int) -> None:
    from bench.peak import force_fp32, precision_name
    from inference.engine import load_stylizer, load_upscaler
    from inference.pipeline import DEFAULT_MAX_SIDE, resize, stylize
    from testkit import ncnn_reference
    from testkit.models import CUGAN_BIN, CUGAN_PARAM
    from weights.store import ModelStore

    store = ModelStore(home)
    img = resize(Image.open(photo).convert("RGB"), DEFAULT_MAX_SIDE)
    drawing = np.asarray(stylize(img, load_stylizer(store, "hayao", threads=threads)))
    print(f"{photo.name} drawn at {img.width}x{img.height}; {threads} threads; best of {runs} runs, taking turns")
    print("| engine | precision | drawing s | HD s | HD / drawing | HD / ncnn (defaults) |")
    print("|---|---|---|---|---|---|")
    engines: dict[str, Callable[[], object]] = {}
    for fp32 in (False, True):
        reference = ncnn_reference.load(CUGAN_PARAM, CUGAN_BIN, threads, fp32)
        engines[f"ncnn {'fp32' if fp32 else 'defaults'}"] = lambda r=reference: r(drawing)
    default = load_upscaler(store, threads=threads)
    precisions = {precision_name(default.precision): (default, load_stylizer(store, "hayao", threads=threads))}
    if "fp32" not in precisions:
        fp32_up, fp32_style = load_upscaler(store, threads=threads), load_stylizer(store, "hayao", threads=threads)
        force_fp32(fp32_up.model, fp32_style)
        precisions["fp32"] = (fp32_up, fp32_style)
    for precision, (up, style) in precisions.items():
        engines[f"drawing {precision}"] = lambda s=style: stylize(img, s)
        engines[f"hd {precision}"] = lambda u=up: u(drawing)
    t = best(engines, runs)
    for precision in precisions:
        draw_s, hd_s = t[f"drawing {precision}"], t[f"hd {precision}"]
        print(f"| OpenVINO | {precision} | {draw_s:.2f} | {hd_s:.2f} | {hd_s / draw_s:.2f} | "
              f"{hd_s / t['ncnn defaults']:.2f} |")
    for name in ("defaults", "fp32"):
        print(f"| ncnn | {name} | | {t[f'ncnn {name}']:.2f} | | {t[f'ncnn {name}'] / t['ncnn defaults']:.2f} |")


def memory_child(home: Path, drawing: Path, threads: int, whole: bool) -> None:
    from bench.memory import peak_rss_mb
    from inference.engine import load_upscaler
    from weights.store import ModelStore

    picture = np.asarray(Image.open(drawing).convert("RGB"))
    up = load_upscaler(ModelStore(home), threads=threads)
    if whole:
        up.budget = (picture.shape[0] + 40) * (picture.shape[1] + 40)
    loaded = peak_rss_mb()
    t0 = time.perf_counter()
    up(picture)
    print(json.dumps({"loaded": loaded, "peak": peak_rss_mb(), "s": time.perf_counter() - t0}))


def memory(home: Path, threads: int, scratch: Path) -> None:
    from testkit.pictures import panorama

    cases = [("1280 px result (tall_1280x1707)", draw(home, (PHOTOS / "tall_1280x1707.jpg").read_bytes(), 1280), False),
             ("panorama (3 photos side by side, 3840x854) at 720 px",
              draw(home, panorama([PHOTOS / name for name in PANORAMA], 3840, 854), 720), False)]
    cases.append(("720 px drawing (town), tiles", draw(home, PHOTO.read_bytes(), 720), False))
    cases.append(("720 px drawing (town), one pass (no tiles)", cases[-1][1], True))
    print("| HD of | drawing | after loading MB | peak MB | s |")
    print("|---|---|---|---|---|")
    for n, (what, picture, whole) in enumerate(cases):
        path = scratch / f"drawing-{n}.png"
        Image.fromarray(picture).save(path)
        out = subprocess.run([sys.executable, "-m", "bench.hd", "--home", str(home), "--threads", str(threads),
                              "--memory-child", str(path), *(["--whole"] if whole else [])],
                             capture_output=True, text=True, check=True)
        m = json.loads(out.stdout.strip().splitlines()[-1])
        h, w = picture.shape[:2]
        print(f"| {what} | {w}x{h} | {m['loaded']:.0f} | {m['peak']:.0f} | {m['s']:.1f} |")


def save_crops(home: Path, out_dir: Path, threads: int) -> None:
    """HD and a 2x Lanczos resize of the same crop, side by side: a face, a landscape, line art."""
    from inference.engine import load_upscaler
    from weights.store import ModelStore

    up = load_upscaler(ModelStore(home), threads=threads)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, photo, style, box in (("face", "portrait_closeup.jpg", "hayao", (100, 90, 260, 250)),
                                    ("landscape", "square_512.jpg", "hayao", (200, 150, 360, 310)),
                                    ("sketch", "portrait_closeup.jpg", "sketch", (100, 90, 260, 250))):
        crop = Image.fromarray(draw(home, (PHOTOS / photo).read_bytes(), 720, style, threads)).crop(box)
        hd = Image.fromarray(up(np.asarray(crop)))
        lanczos = crop.resize(hd.size, Image.Resampling.LANCZOS)
        pair = Image.new("RGB", (hd.width * 2 + 8, hd.height), "white")
        pair.paste(lanczos, (0, 0))
        pair.paste(hd, (hd.width + 8, 0))
        pair.save(out_dir / f"{name}-lanczos-vs-hd.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--photo", type=Path, default=PHOTO)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save", type=Path)
    ap.add_argument("--part", choices=("speed", "memory"), help="only this part (default: both)")
    ap.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--whole", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    home = args.home.resolve()
    if args.memory_child:
        memory_child(home, args.memory_child, args.threads, args.whole)
        return
    if args.save:
        save_crops(home, args.save, args.threads)
    if args.part != "memory":
        speed(home, args.photo, args.runs, args.threads)
    if args.part != "speed":
        with tempfile.TemporaryDirectory() as scratch:
            memory(home, args.threads, Path(scratch))


if __name__ == "__main__":
    main()
