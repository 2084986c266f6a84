"""What a move of the Mini App's strength slider costs on the phone, against the server's own blend.

    python -m bench.webapp_preview [--sizes 720x540,720x720,1280x960] [--runs 9]

The page (bot/webapp/page/colour.js) turns the photo and the drawing into Oklab once per opened result,
then recomputes the picture on every slider move. Both are timed in headless Chromium (Debian's,
via Playwright), median of ``--runs``, on random pictures of each size, against numpy's blend of
the same pictures in this process (inference/colour.py, what Keep draws with): the ratio says how
far the phone's instant preview is from the server's maths on the same CPU. A phone is slower than
this machine; the ratio, not the milliseconds, is what carries over.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import time

import numpy as np

from inference.colour import blend
from testkit.browser import colour_page

TIMING = """([w, h, runs]) => {
  const n = w * h, rgba = () => { const a = new Uint8ClampedArray(4 * n);
    for (let i = 0; i < a.length; i++) a[i] = (i * 2654435761 >>> 13) & 255; return a; };
  const photo = rgba(), drawing = rgba().reverse(), out = new Uint8ClampedArray(4 * n);
  const median = (f) => { const t = []; for (let r = 0; r < runs; r++) { const s = performance.now(); f();
    t.push(performance.now() - s); } t.sort((a, b) => a - b); return t[t.length >> 1]; };
  let p, d;
  const prepare = median(() => { p = oklab(photo); d = oklab(drawing); });
  const move = median(() => mix(p, d, 0.6, out));
  return [prepare, move];
}"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="720x540,720x720,1280x960")
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        page = colour_page(browser)
        print(f"Chromium {browser.version}, {args.runs} runs, median")
        print("| picture | page: Oklab once, ms | page: a slider move, ms | numpy blend, ms | move / numpy |")
        print("|---|---|---|---|---|")
        rng = np.random.default_rng(0)
        for size in args.sizes.split(","):
            w, h = (int(v) for v in size.split("x"))
            prepare, move = page.evaluate(TIMING, [w, h, args.runs])
            photo, drawing = (rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(2))
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                blend(photo, drawing, 0.6)
                times.append((time.perf_counter() - start) * 1000)
            server = statistics.median(times)
            print(f"| {w}x{h} | {prepare:.0f} | {move:.0f} | {server:.0f} | {move / server:.2f} |")
        browser.close()


if __name__ == "__main__":
    main()
