"""What a sticker and a cut-out cost, per photo, against the plain result in the same run.

    python -m bench.stickers --home DIR [--style hayao] [--runs 2] [--save OUT_DIR] [PHOTO...]

``DIR`` needs the style, ``det_500m`` and ``selfie`` installed. Each photo is drawn by one
:class:`~inference.drawer.Drawer` (as a worker draws) three ways, alternating run by run, min of
``--runs``: the plain result (720 px), the sticker (the head-and-shoulders crop at 640 px, cut,
outlined, 512 px WebP) and the cut-out (1024 px PNG). The ratios are against the plain result;
"cut s" is the segmentation, outline and encoding. ``--save`` writes the stickers on a light and
a dark background to look at (they show the shared photos: keep them out of the repository).
"""
from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

from PIL import Image

from inference.drawer import Drawer, DrawerSpec, WorkOrder
from inference.pipeline import Converted, ConvertSettings

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"
WAYS = {
    "plain": ConvertSettings(),
    "sticker": ConvertSettings(max_side=640, fmt="webp", cut="sticker"),
    "cutout": ConvertSettings(max_side=1024, fmt="png", cut="cutout"),
}


def on_backgrounds(data: bytes) -> Image.Image:
    """The sticker on a light chat background above a dark one."""
    img = Image.open(io.BytesIO(data)).convert("RGBA")
    out = Image.new("RGBA", (img.width, 2 * img.height))
    for i, colour in enumerate(((240, 240, 235, 255), (24, 33, 43, 255))):
        part = Image.new("RGBA", img.size, colour)
        part.alpha_composite(img)
        out.paste(part, (0, i * img.height))
    return out.convert("RGB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--style", default="hayao")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--save", type=Path)
    ap.add_argument("photos", nargs="*", type=Path)
    args = ap.parse_args()
    drawer = Drawer(DrawerSpec(args.home.resolve(), "openvino", None, args.style))
    print(f"engine: {drawer.load().engine}")
    print("| photo | plain s | sticker s (x plain) | cut s | sticker | KB | cut-out s (x plain) | cut-out |")
    print("|---|---|---|---|---|---|---|---|")
    for path in args.photos or sorted(PHOTOS.glob("*.jpg")):
        data = path.read_bytes()
        best = dict.fromkeys(WAYS, float("inf"))
        got: dict[str, Converted] = {}
        for _ in range(args.runs):
            for name, settings in WAYS.items():
                t0 = time.perf_counter()
                result = drawer.draw(WorkOrder("bench", data, args.style, settings))
                best[name] = min(best[name], time.perf_counter() - t0)
                assert isinstance(result, Converted), result
                got[name] = result
        st, cut = got["sticker"], got["cutout"]
        print(f"| {path.stem} | {best['plain']:.2f} | {best['sticker']:.2f} ({best['sticker'] / best['plain']:.2f}) "
              f"| {st.timings['cut_s']:.3f} | {'x'.join(map(str, st.output_size))} {st.cut} | {len(st.data) / 1024:.0f} "
              f"| {best['cutout']:.2f} ({best['cutout'] / best['plain']:.2f}) | {'x'.join(map(str, cut.output_size))} |")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            on_backgrounds(st.data).save(args.save / f"{path.stem}-sticker.png")


if __name__ == "__main__":
    main()
