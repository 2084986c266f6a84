"""What the face pass costs, per photo, against the whole-image pass in the same run.

    python -m bench.face_pass --home DIR [--runs 2] [--fp32] [--save OUT_DIR] [PHOTO...]

``DIR`` needs ``hayao`` and ``det_500m`` installed (and ``jp_face``, for
Hayao's faces to be drawn by it). Default photos: every shared one. Both variants are
timed end to end (decode to encode), alternating run by run, min of
``--runs``. ``--fp32`` forces OpenVINO to compute in fp32, as on CPUs without
bfloat16 units. ``--save`` writes photo | whole-image | with-faces strips to
look at (they contain the shared photos, so keep them out of the repository).
"""
from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

from PIL import Image

from bench.peak import force_fp32
from inference.engine import load_face_tools, load_stylizer
from inference.pipeline import ConvertSettings, convert_bytes
from weights.store import ModelStore

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--fp32", action="store_true", help="compute in fp32, as CPUs without bfloat16 units do")
    ap.add_argument("--save", type=Path)
    ap.add_argument("photos", nargs="*", type=Path)
    args = ap.parse_args()
    store = ModelStore(args.home.resolve())
    model = load_stylizer(store, "hayao")
    tools = load_face_tools(store, model)
    assert tools is not None, "hayao has a face pass"
    if args.fp32:
        force_fp32(model, tools.model)
    print("| photo | output | faces found / drawn | whole-image s | with faces s | ratio | detection s |")
    print("|---|---|---|---|---|---|---|")
    for path in args.photos or sorted(PHOTOS.glob("*.jpg")):
        data = path.read_bytes()
        best = {"whole": float("inf"), "faces": float("inf")}
        for _ in range(args.runs):
            for name, settings in (("whole", ConvertSettings(faces=False)), ("faces", ConvertSettings())):
                t0 = time.perf_counter()
                result = convert_bytes(data, model, settings, tools)
                best[name] = min(best[name], time.perf_counter() - t0)
                if name == "faces":
                    with_faces = result
                else:
                    whole = result
        drawn = sum(1 for f in with_faces.faces if f["pass"])
        w, h = with_faces.output_size
        print(f"| {path.stem} | {w}x{h} | {len(with_faces.faces)} / {drawn} | {best['whole']:.2f} | "
              f"{best['faces']:.2f} | {best['faces'] / best['whole']:.2f} | {with_faces.timings['detect_s']:.3f} |")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            photo = Image.open(path).convert("RGB").resize((w, h), Image.Resampling.LANCZOS)
            strip = Image.new("RGB", (3 * w, h))
            for i, img in enumerate((photo, Image.open(io.BytesIO(whole.data)),
                                     Image.open(io.BytesIO(with_faces.data)))):
                strip.paste(img, (i * w, 0))
            strip.save(args.save / f"{path.stem}.png")


if __name__ == "__main__":
    main()
