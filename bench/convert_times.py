"""Time ``convert`` on every shared photo, eager PyTorch against TorchScript.

Run: ``.venv/bin/python -m bench.convert_times [--runs 3] [--max-side 720] [--home data]``.
Both backends are loaded in one process and alternate run by run on each
photo, so machine noise hits both alike; the ratio is the number to read.
Peak RSS is measured separately, one child process per backend converting
every photo once, so each figure is that backend's own.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.memory import peak_rss_mb
from inference.engine import load_stylizer
from inference.pipeline import ConvertSettings, convert_bytes
from weights.store import ModelStore

COMPARED = ("eager", "torchscript")  # bench.speed compares every backend with the reference
PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"


def _peak_rss_child(backend: str, max_side: int, home: str) -> None:
    model = load_stylizer(ModelStore(Path(home)), "hayao", backend)  # type: ignore[arg-type]
    for photo in sorted(PHOTOS.glob("*.jpg")):
        convert_bytes(photo.read_bytes(), model, ConvertSettings(max_side=max_side))
    print(peak_rss_mb())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-side", type=int, default=720)
    ap.add_argument("--home", default="data", help="ANIMEBOT_HOME with hayao installed")
    ap.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        _peak_rss_child(args.rss_child, args.max_side, args.home)
        return

    store = ModelStore(Path(args.home))
    models = {b: load_stylizer(store, "hayao", b) for b in COMPARED}  # type: ignore[arg-type]
    settings = ConvertSettings(max_side=args.max_side)
    times: dict[str, dict[str, list[float]]] = {b: {} for b in COMPARED}
    sizes = {}
    for photo in sorted(PHOTOS.glob("*.jpg")):
        data = photo.read_bytes()
        for b in COMPARED:
            convert_bytes(data, models[b], settings)  # warm-up
            times[b][photo.name] = []
        for _ in range(args.runs):
            for b in COMPARED:
                t = time.perf_counter()
                r = convert_bytes(data, models[b], settings)
                times[b][photo.name].append(time.perf_counter() - t)
        sizes[photo.name] = "x".join(map(str, r.output_size))

    e, s = times["eager"], times["torchscript"]
    print(f"{'photo':<24} {'output':>9} {'eager min/med s':>16} {'script min/med s':>17} {'script/eager':>12}")
    for name in e:
        print(f"{name:<24} {sizes[name]:>9} {min(e[name]):>7.2f}/{statistics.median(e[name]):<7.2f}"
              f" {min(s[name]):>8.2f}/{statistics.median(s[name]):<7.2f} {min(s[name]) / min(e[name]):>12.2f}")
    te, ts = sum(map(min, e.values())), sum(map(min, s.values()))
    print(f"{'all photos (sum of mins)':<34} {te:>16.2f} {ts:>17.2f} {ts / te:>12.2f}")
    for b in COMPARED:
        cmd = [sys.executable, "-m", "bench.convert_times", "--rss-child", b, "--max-side", str(args.max_side),
               "--home", args.home]
        rss = float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1])
        print(f"peak RSS, {b}, all photos once: {rss:.0f} MB")


if __name__ == "__main__":
    main()
