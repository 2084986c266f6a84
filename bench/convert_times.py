"""An independent timing: ``animebot convert`` with its defaults against the eager reference, in one run.

    python -m bench.convert_times --home DIR [--rounds 2] [--big 4]

The photos of ``bench.speed`` (the shared ones and 12 MP JPEG upscales) are
written to files. Each round then runs three commands, one after another,
each a process of its own:

* the reference: the unpruned generator in eager fp32 PyTorch, full Pillow
  decode, Lanczos, 720 px, JPEG q92, over every photo;
* ``animebot convert --json`` as a user runs it (the face pass on);
* ``animebot convert --json --no-faces``, the whole-image pass the reference
  also does, whose outputs are compared with the reference's (PSNR).

For each command it prints the whole command's wall time (start, model load
and every photo) and the sum of per-photo seconds, with their ratios to the
reference, taking each command's best round.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from bench.speed import load_variant, photo_set, quality, reference_convert

COMMANDS = ("reference", "animebot convert", "animebot convert --no-faces")


def _reference_child(home: Path, src: Path, out: Path) -> None:
    """Convert every photo in ``src`` the reference way; print seconds per photo as JSON."""
    model = load_variant("reference", home)
    for photo in sorted(src.glob("*.jpg")):
        t0 = time.perf_counter()
        data, _ = reference_convert(photo.read_bytes(), model)
        (out / photo.name).write_bytes(data)
        print(json.dumps({"input": str(photo), "seconds": time.perf_counter() - t0}))


def _run(command: str, home: Path, src: Path, out: Path) -> tuple[float, float]:
    """Wall seconds of the whole command, and the sum of its per-photo seconds."""
    photos = [str(p) for p in sorted(src.glob("*.jpg"))]
    if command == "reference":
        argv = [sys.executable, "-m", "bench.convert_times", "--reference-child", str(src), str(out),
                "--home", str(home)]
    else:
        argv = [str(Path(sys.executable).with_name("animebot")), "convert", *photos, "--out-dir", str(out), "--json"]
        argv += ["--no-faces"] if command.endswith("--no-faces") else []
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=True,
                          env={**os.environ, "ANIMEBOT_HOME": str(home)})
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    per_photo = sum(r["seconds"] if "seconds" in r else
                    sum(v for k, v in r.items() if k.endswith("_s")) for r in rows)
    if len(rows) != len(photos):
        raise SystemExit(f"{command}: {len(rows)} results for {len(photos)} photos\n{done.stderr[-2000:]}")
    return wall, per_photo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="data dir with hayao (and det_500m) installed")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--big", type=int, default=4, help="how many photos to also convert as 12 MP JPEGs")
    ap.add_argument("--reference-child", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    home = args.home.resolve()
    if args.reference_child:
        _reference_child(home, *args.reference_child)
        return

    work = Path(tempfile.mkdtemp(prefix="convert-times-"))
    src = work / "photos"
    src.mkdir()
    for name, data in photo_set(args.big, tiny=False).items():
        (src / f"{name}.jpg").write_bytes(data)
    outs = {c: work / f"out{i}" for i, c in enumerate(COMMANDS)}
    best = {c: (float("inf"), float("inf")) for c in COMMANDS}
    for _ in range(args.rounds):
        for command in COMMANDS:  # alternating, so drift hits them alike
            outs[command].mkdir(exist_ok=True)
            wall, per_photo = _run(command, home, src, outs[command])
            best[command] = (min(best[command][0], wall), min(best[command][1], per_photo))

    worst = min(
        quality(np.asarray(Image.open(ref).convert("RGB")),
                np.asarray(Image.open(outs[COMMANDS[2]] / f"{ref.stem}.hayao.jpg").convert("RGB")))["psnr"]
        for ref in sorted(outs["reference"].glob("*.jpg")))
    ref_wall, ref_photos = best["reference"]
    print(f"{len(list(src.glob('*.jpg')))} photos, 720 px, best of {args.rounds} rounds")
    print("| command | whole command s | x ref | sum per photo s | x ref |\n|---|---|---|---|---|")
    for command, (wall, per_photo) in best.items():
        print(f"| {command} | {wall:.2f} | {ref_wall / wall:.2f} | {per_photo:.2f} | {ref_photos / per_photo:.2f} |")
    print(f"worst PSNR of `animebot convert --no-faces` against the reference: {worst:.1f} dB")


if __name__ == "__main__":
    main()
