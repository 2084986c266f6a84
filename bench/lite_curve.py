"""Quality of a pruned "lite" Hayao against CPU training time: the curve ``animebot prune`` climbs.

    python -m bench.lite_curve --home DIR [--width 0.75] [--minutes 30] [--every 5] [--crop 192] [--batch 4]

It prunes Hayao to ``--width``, then distils it on the shared photos with
``town_1280x854`` held out, on the CPU, in sessions of ``--every`` minutes
(the same resumable training as ``animebot prune``). After each session it
draws the held-out photo at 720 px with the student and with Hayao (eager
fp32, the same run) and prints PSNR, SSIM, mean Oklab dE and hue error,
the student's model-only time as a ratio to Hayao's, and steps so far.
Rows are printed as they come, so a run cut short still shows its curve.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from bench.speed import quality
from inference.backends import TorchStylizer
from inference.engine import build_animeganv2
from inference.pipeline import resize, stylize
from inference.prune import Budget, Recipe, distill, parameter_count, prune
from weights.store import ModelStore

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"
HELD_OUT = "town_1280x854.jpg"


def draw(net: torch.nn.Module, img: Image.Image, runs: int = 3) -> tuple[np.ndarray, float]:
    """The drawing, and the fastest of ``runs`` timings (eager timings right after training are noisy)."""
    model = TorchStylizer("bench", "eager", net.eval())
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        out = np.asarray(stylize(img, model))
        best = min(best, time.perf_counter() - t0)
    return out, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="data dir with hayao installed")
    ap.add_argument("--width", type=float, default=0.75)
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--every", type=float, default=5.0, help="minutes of training between measurements")
    ap.add_argument("--crop", type=int, default=192)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    entry, path = ModelStore(args.home.resolve()).require("hayao")
    teacher = build_animeganv2(entry, path).eval()
    student = prune(teacher, args.width)
    names = [p for p in sorted(PHOTOS.glob("*.jpg")) if p.name != HELD_OUT] + [PHOTOS / HELD_OUT]
    photos = [np.asarray(resize(Image.open(p).convert("RGB"), 1024)) for p in names]
    held = resize(Image.open(PHOTOS / HELD_OUT).convert("RGB"), 720)
    reference, ref_s = draw(teacher, held)
    print(f"width {args.width}: {parameter_count(teacher):,} -> {parameter_count(student):,} parameters; "
          f"CPU, {torch.get_num_threads()} threads, crops {args.batch} x {args.crop} px; held out {HELD_OUT}")
    print("| training min | steps | PSNR dB | SSIM | dE x100 | hue err deg | model time vs Hayao |")
    print("|---|---|---|---|---|---|---|", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp) / "lite.pt"
        trained = 0.0
        while True:
            out, s = draw(student, held)
            _, ref_s = draw(teacher, held)  # the reference again, so both times share the moment's load
            q = quality(reference, out)
            steps = int(torch.load(checkpoint, weights_only=True)["step"]) if checkpoint.is_file() else 0
            row = {"minutes": trained, "steps": steps, **q, "speed_vs_hayao": ref_s / s}
            rows.append(row)
            print(f"| {trained:.0f} | {steps} | {q['psnr']:.2f} | {q['ssim']:.3f} | {q['de']:.2f} | "
                  f"{q['hue_deg']:.1f} | {ref_s / s:.2f}x |", flush=True)
            if trained >= args.minutes - 1e-9:
                break
            session = min(args.every, args.minutes - trained)
            distill(student, teacher, photos, Budget(session * 60),  # fresh crops each session
                    Recipe(crop=args.crop, batch=args.batch, eval_every=10**9, seed=len(rows)), checkpoint=checkpoint)
            trained += session
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
