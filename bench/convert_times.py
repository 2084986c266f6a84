"""Time ``convert`` on every shared photo, eager PyTorch against TorchScript.

Run: ``.venv/bin/python -m bench.convert_times [--runs 3] [--max-side 720]``.
Each backend runs in its own child process so that its peak RSS is its own;
photos alternate between backends within the same run so machine noise hits
both alike. Prints a table and the TorchScript/eager ratio per photo.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"


def _child(backend: str, runs: int, max_side: int, home: str) -> None:
    from inference.engine import load_stylizer
    from inference.pipeline import ConvertSettings, convert_bytes
    from weights.store import ModelStore

    model = load_stylizer(ModelStore(Path(home)), "hayao", backend)  # type: ignore[arg-type]
    settings = ConvertSettings(max_side=max_side)
    rows = {}
    for photo in sorted(PHOTOS.glob("*.jpg")):
        data = photo.read_bytes()
        convert_bytes(data, model, settings)  # warm-up
        totals, models = [], []
        for _ in range(runs):
            t = time.perf_counter()
            r = convert_bytes(data, model, settings)
            totals.append(time.perf_counter() - t)
            models.append(r.timings["model_s"])
        rows[photo.name] = {"size": r.output_size, "total": min(totals), "median": statistics.median(totals),
                            "model": min(models)}
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": rows, "peak_rss_mb": rss_mb}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-side", type=int, default=720)
    ap.add_argument("--home", default="data", help="ANIMEBOT_HOME with hayao installed")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.runs, args.max_side, args.home)
        return
    results = {}
    for backend in ("eager", "torchscript"):
        cmd = [sys.executable, "-m", "bench.convert_times", "--child", backend, "--runs", str(args.runs),
               "--max-side", str(args.max_side), "--home", args.home]
        results[backend] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    eager, ts = results["eager"]["rows"], results["torchscript"]["rows"]
    print(f"{'photo':<24} {'output':>9} {'eager min/med s':>16} {'script min/med s':>17} {'script/eager':>12}")
    for name in eager:
        e, s = eager[name], ts[name]
        size = "x".join(map(str, e["size"]))
        print(f"{name:<24} {size:>9} {e['total']:>7.2f}/{e['median']:<7.2f} {s['total']:>8.2f}/{s['median']:<7.2f}"
              f" {s['total'] / e['total']:>12.2f}")
    te = sum(r["total"] for r in eager.values())
    tt = sum(r["total"] for r in ts.values())
    print(f"{'all photos':<24} {'':>9} {te:>16.2f} {tt:>17.2f} {tt / te:>12.2f}")
    for b in ("eager", "torchscript"):
        print(f"peak RSS {b}: {results[b]['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
