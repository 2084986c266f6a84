"""Clips: drawing speed, peak memory and flicker, against the per-frame photo path in the same run.

    python -m bench.clips --home DIR [--style hayao] [--seconds 5] [--photo PATH]

``DIR`` needs the style installed. Two clips are made from a real photo with
PyAV (testkit/clip_maker.py), 30 fps in, 480 px long side, ``--seconds`` long:
a *still* camera (a tripod shot: the same view with a little sensor noise) and
a slow *pan*. Each is drawn as the bot draws a clip (15 fps out), with and
without the flicker remedy (inference/steady.py), in a child process so its peak
RSS is its own. The reference is the photo path: the same frames, each a JPEG
through ``convert_bytes`` as if sent one by one.

Flicker is the mean absolute difference between consecutive output frames,
divided by the input's (1.0: the drawing changes as much as the scene does).
For the pan, the *warped* figure first shifts the previous frame by the known
camera motion, so only what should not have changed is counted.
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from testkit.clip_maker import mp4, pan_frames, read_back

PHOTO = Path(__file__).resolve().parents[2] / "shared" / "photos" / "street_1279x867.jpg"
SIZE = (480, 320)
IN_FPS = 30
TRAVEL = 0.12  # of the view's width over the clip: a slow pan


def still_frames(photo: bytes, frames: int, seed: int = 0) -> list[np.ndarray]:
    """A tripod shot: one view, with the per-frame noise of a real camera sensor (sigma 2 levels)."""
    base = pan_frames(photo, 1, SIZE, travel=0.0)[0].astype(np.float32)
    rng = np.random.default_rng(seed)
    return [np.clip(base + rng.normal(0, 2.0, base.shape), 0, 255).astype(np.uint8) for _ in range(frames)]


def mad(frames: list[np.ndarray], shift_px: float = 0.0) -> float:
    """Mean absolute difference between consecutive frames; with ``shift_px``, the previous frame is
    first moved left by the camera's motion and only the columns both frames show are compared."""
    total = []
    for prev, cur in zip(frames, frames[1:]):
        a, b = prev.astype(np.float32), cur.astype(np.float32)
        if shift_px:
            m = np.float32([[1, 0, -shift_px], [0, 1, 0]])
            a = cv2.warpAffine(a, m, (a.shape[1], a.shape[0]), flags=cv2.INTER_LINEAR)
            edge = int(np.ceil(shift_px)) + 1
            a, b = a[:, :-edge], b[:, :-edge]
        total.append(float(np.abs(a - b).mean()))
    return float(np.mean(total))


def draw_in_child(home: Path, style: str, clip: Path, steady: bool) -> dict[str, float]:
    """One clip drawn in a fresh process: its timings, frame count and peak RSS."""
    code = (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from bench.memory import peak_rss_mb\n"
        "from inference.clip_settings import ClipSettings\nfrom inference.clips import convert_clip\n"
        "from inference.engine import load_stylizer\n"
        "from weights.store import ModelStore\n"
        "home, style, clip, steady, out = sys.argv[1:6]\n"
        "model = load_stylizer(ModelStore(Path(home)), style)\n"
        "base = peak_rss_mb()\n"
        "t = time.perf_counter()\n"
        "r = convert_clip(Path(clip).read_bytes(), model, ClipSettings(steady=steady == '1'))\n"
        "wall = time.perf_counter() - t\n"
        "Path(out).write_bytes(r.data)\n"
        "print(json.dumps({'wall_s': wall, 'model_s': r.timings['model_s'], 'frames': r.frames,\n"
        "                  'peak_mb': peak_rss_mb(), 'loaded_mb': base}))\n"
    )
    out = clip.with_suffix(f".out{int(steady)}.mp4")
    done = subprocess.run([sys.executable, "-c", code, str(home), style, str(clip), "1" if steady else "0", str(out)],
                          check=True, capture_output=True, text=True)
    report: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    report["out"] = str(out)  # type: ignore[assignment]
    return report


def photo_path_fps(home: Path, style: str, frames: list[np.ndarray]) -> float:
    """Frames per second when each frame is sent as a photo (JPEG in, JPEG out, no face pass)."""
    from inference.engine import load_stylizer
    from inference.pipeline import ConvertSettings, convert_bytes
    from weights.store import ModelStore

    model = load_stylizer(ModelStore(home), style)
    jpegs = []
    for f in frames:
        buf = io.BytesIO()
        Image.fromarray(f).save(buf, "JPEG", quality=92)
        jpegs.append(buf.getvalue())
    convert_bytes(jpegs[0], model, ConvertSettings(max_side=max(SIZE), faces=False))  # compile outside the clock
    t = time.perf_counter()
    for data in jpegs:
        convert_bytes(data, model, ConvertSettings(max_side=max(SIZE), faces=False))
    return len(jpegs) / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--style", default="hayao")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--photo", type=Path, default=PHOTO)
    ap.add_argument("--work", type=Path, default=Path("/tmp/animebot-bench-clips"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    photo = args.photo.read_bytes()
    count = round(args.seconds * IN_FPS)
    scenes = {"still": (still_frames(photo, count), 0.0),
              "pan": (pan_frames(photo, count, SIZE, travel=TRAVEL), TRAVEL * SIZE[0] / (count - 1))}
    print(f"{args.style}, {SIZE[0]}x{SIZE[1]} at {IN_FPS} fps in, {args.seconds:g} s; 15 fps out\n")
    print("| scene | remedy | frames | drawn fps | wall s | peak RSS MB | flicker (out/in) | warped flicker |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (frames, shift) in scenes.items():
        clip = args.work / f"{name}.mp4"
        clip.write_bytes(mp4(frames, IN_FPS))
        shown_in = read_back(clip.read_bytes())["frames"][::2]  # what the 15 fps output shows of the input
        assert isinstance(shown_in, list)
        in_mad, in_warped = mad(shown_in), mad(shown_in, 2 * shift)
        for steady in (False, True):
            r = draw_in_child(args.home, args.style, clip, steady)
            out = read_back(Path(str(r["out"])).read_bytes())["frames"]
            assert isinstance(out, list)
            warped = f"{mad(out, 2 * shift) / in_warped:.2f}" if shift else "-"
            print(f"| {name} | {'steady' if steady else 'none'} | {r['frames']:.0f} | "
                  f"{r['frames'] / r['wall_s']:.2f} | {r['wall_s']:.1f} | {r['peak_mb']:.0f} | "
                  f"{mad(out) / in_mad:.2f} | {warped} |")
    fps = photo_path_fps(args.home, args.style, scenes["pan"][0][::2][:30])
    print(f"\nphoto path, the same frames one by one as JPEG photos: {fps:.2f} frames/s")


if __name__ == "__main__":
    main()
