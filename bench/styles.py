"""Each installed style's speed at 720 px on the default backend, against Hayao in the same run.

    python -m bench.styles --home DIR [--runs 3] [--photo PATH] [--save OUT_DIR]

The time is the model alone on one photo resized to 720 px (shape compiled
beforehand: a worker compiles each new shape once), min of ``--runs``.
The ratio is against ``hayao`` measured in the same run, so the column
means the same on any CPU. ``--save`` writes each style's result as PNG to
look at (they contain the shared photo: keep them out of the repository).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from PIL import Image

from inference.engine import load_stylizer
from inference.pipeline import DEFAULT_MAX_SIDE, resize, stylize
from weights.store import ModelStore

PHOTO = Path(__file__).resolve().parents[2] / "shared" / "photos" / "town_1280x854.jpg"


def seconds(model: object, img: Image.Image, runs: int) -> float:
    stylize(img, model)  # type: ignore[arg-type]  # compiles this shape
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        stylize(img, model)  # type: ignore[arg-type]
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--photo", type=Path, default=PHOTO)
    ap.add_argument("--save", type=Path)
    args = ap.parse_args()
    store = ModelStore(args.home.resolve())
    img = resize(Image.open(args.photo).convert("RGB"), DEFAULT_MAX_SIDE)
    names = [e.name for e in store.installed("style")]
    if "hayao" not in names:
        raise SystemExit("bench.styles needs hayao installed: it is the reference")
    times: dict[str, float] = {}
    precision = "?"
    for name in names:
        model = load_stylizer(store, name)
        precision = getattr(model, "precision", precision)
        times[name] = seconds(model, img, args.runs)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            stylize(img, model).save(args.save / f"{name}.png")
        del model
    print(f"{img.width}x{img.height}, default backend, {precision}; min of {args.runs} runs")
    print("| style | s per photo | x Hayao's time | photos/min on this CPU |")
    print("|---|---|---|---|")
    for name, s in times.items():
        print(f"| {name} | {s:.2f} | {s / times['hayao']:.2f} | {60 / s:.0f} |")


if __name__ == "__main__":
    main()
