"""Model time of pruned Hayao widths against the full net, on the default backend.

    python -m bench.lite_speed --home DIR [--widths 0.75,0.6] [--rounds 3]

Speed depends on the widths, not on training, so each width is pruned here
and timed untrained. Every net runs the same four 720 px shapes, alternating
net by net so drift hits them alike; each shape is compiled before it is
timed, and the best of ``--rounds`` counts.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from inference.backends import OpenVinoStylizer
from inference.engine import build_animeganv2
from inference.onnx_export import export
from inference.prune import parameter_count, prune
from weights.store import ModelStore

SHAPES = ((720, 480), (720, 544), (544, 720), (720, 720))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, required=True, help="data dir with hayao installed")
    ap.add_argument("--widths", default="0.75,0.6")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    entry, path = ModelStore(args.home.resolve()).require("hayao")
    full = build_animeganv2(entry, path)
    nets = {1.0: full} | {w: prune(full, w) for w in map(float, args.widths.split(","))}
    tmp = Path(tempfile.mkdtemp())
    models = {}
    for width, net in nets.items():
        (tmp / f"{width}.onnx").write_bytes(export(net))
        models[width] = OpenVinoStylizer(f"hayao@{width}", tmp / f"{width}.onnx", threads=2)
    rng = np.random.default_rng(0)
    images = [rng.uniform(-1, 1, (h, w, 3)).astype(np.float32) for h, w in SHAPES]
    best = {(w, i): float("inf") for w in models for i in range(len(images))}
    for _ in range(args.rounds):
        for i, x in enumerate(images):
            for width, model in models.items():
                model(x)  # compiled, so only the drawing is timed
                t0 = time.perf_counter()
                model(x)
                best[(width, i)] = min(best[(width, i)], time.perf_counter() - t0)
    total = {w: sum(best[(w, i)] for i in range(len(images))) for w in models}
    print(f"OpenVINO ({models[1.0].precision}), 2 threads, {len(SHAPES)} shapes at 720 px, best of {args.rounds}")
    print("| width | parameters | model s | speed vs Hayao |\n|---|---|---|---|")
    for width, net in nets.items():
        print(f"| {width} | {parameter_count(net):,} | {total[width]:.2f} | {total[1.0] / total[width]:.2f}x |")


if __name__ == "__main__":
    main()
