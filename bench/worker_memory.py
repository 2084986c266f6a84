"""A worker's peak memory drawing photos at 720 px with the face pass, as the bot's workers do.

    python -m bench.worker_memory --home DIR [--style hayao] [--fp32] [PHOTO...]

Each style runs in a fresh process (a Drawer, the same class the bot's and
``animebot worker``'s processes use), which draws every photo in turn and
prints its peak RSS (VmHWM) after loading and after each photo. Default
photos: the shared ones with faces, in two shapes. ``--fp32`` forces OpenVINO to
compute in fp32, as on CPUs without bfloat16 units.

This is where a worker's peak with the face pass is read (tests/inference/test_speed.py used to bound
Hayao's at 650 MB on the first two default photos; README, "Memory", has the figures).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"
DEFAULT = ("group_3_faces.jpg", "town_1280x854.jpg", "portrait_closeup.jpg")


def child(home: Path, style: str, photos: list[str], fp32: bool) -> None:
    from bench.memory import peak_rss_mb
    from bench.peak import force_fp32
    from inference.drawer import Drawer, DrawerSpec, WorkOrder
    from inference.pipeline import ConvertSettings

    drawer = Drawer(DrawerSpec(home, "openvino", 2, style))
    drawer.load()
    if fp32:
        force_fp32(*drawer._models.values())  # before any shape is compiled
    steps = [("loaded", peak_rss_mb())]
    for photo in photos:
        drawer.draw(WorkOrder("bench", Path(photo).read_bytes(), style, ConvertSettings()))
        steps.append((Path(photo).stem, peak_rss_mb()))
    print(json.dumps(steps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--style", action="append", help="style to draw with (repeatable; default hayao)")
    ap.add_argument("--fp32", action="store_true", help="compute in fp32, as CPUs without bfloat16 units do")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("photos", nargs="*")
    args = ap.parse_args()
    photos = args.photos or [str(PHOTOS / p) for p in DEFAULT]
    if args.child:
        child(args.home.resolve(), args.style[0], photos, args.fp32)
        return
    print("| style | after loading MB | " + " | ".join(f"after {Path(p).stem} MB" for p in photos) + " |")
    print("|---|---|" + "---|" * len(photos))
    precision = ["--fp32"] if args.fp32 else []
    for style in args.style or ["hayao"]:
        out = subprocess.run([sys.executable, "-m", "bench.worker_memory", "--child", "--home", str(args.home),
                              "--style", style, *precision, *photos], capture_output=True, text=True, check=True)
        steps = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {style} | " + " | ".join(f"{mb:.0f}" for _, mb in steps) + " |")


if __name__ == "__main__":
    main()
