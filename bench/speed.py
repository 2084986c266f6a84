"""Speed and quality of each backend against the reference, in one run.

    python -m bench.speed --home DIR [--runs 2] [--big 4] [--tiny]

The reference is the unpruned generator in eager fp32 PyTorch with plain
Pillow decoding (full size) and Lanczos resizing, at the same output size.
Every variant converts the shared photos and the same photos upscaled to
12 MP JPEGs (as phones send them), whole image only, at 720 px. For each
it prints, summed over the photos: min and median end-to-end and
model-only seconds, the ratio to the reference, PSNR, SSIM and a hue /
colour error against the reference output, the model file's size, and
the peak RSS of a fresh process converting every photo once.

Beside each variant's model seconds it prints the precision the model
computes in, the GFLOP/s it achieved (the convolutions' and matmuls' FLOPs at
the exact padded shapes it ran at, summed over the photos, over the summed min
model seconds) and this CPU's peak at that precision, read from its flags and
clock (bench/peak.py says how, and what it assumes); then which rule gave each
peak, and what to expect on ordinary AVX2 VPSs. ``openvino-fp32`` is the
default pipeline with fp32 forced: what CPUs without bfloat16 units get (on a
CPU without them it equals ``openvino``, which already computes in fp32).
``--tiny`` runs the whole bench on a tiny random generator and two small
synthetic photos, to check that it works without the real models. When the
data dir has ``hayao-int8`` (``animebot quantize``), it is measured too.
"""
from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

from bench.memory import peak_rss_mb
from bench.peak import CpuPeak, FlopCounter, cpu_peak, force_fp32, precision_name
from inference.backends import OpenVinoStylizer, Stylizer, TorchStylizer
from inference.colour import srgb_to_oklab
from inference.engine import build_generator, exported_onnx, load_stylizer
from inference.generator import Generator, GeneratorWidths
from inference.imageio import encode
from inference.pipeline import ConvertSettings, convert_bytes, fit_size, stylize
from weights.store import ModelStore

PHOTOS = Path(__file__).resolve().parents[2] / "shared" / "photos"
MAX_SIDE = 720
VARIANTS = ("reference", "torchscript", "onnxruntime", "openvino", "openvino-fp32")
FP32 = "openvino-fp32"  # the default pipeline as CPUs without bfloat16 units run it
INT8 = "hayao-int8"  # measured when installed
# "What to expect": a generic AVX2 VPS core (2 FMA units x 8 lanes x 2 FLOP per cycle, at 2.5 GHz).
VPS_GHZ, VPS_FLOP_PER_CYCLE, VPS_CORES = 2.5, 32, (2, 4)
EXPECT_SHAPE = (1, 480, 720, 3)  # a 3:2 photo at 720 px, the whole-image pass


@dataclass
class Sample:
    total: list[float]
    model: list[float]
    output: np.ndarray
    shapes: list[tuple[int, ...]]  # what the model was run at, once per call


class ShapeLog:
    """``model`` as the pipeline sees it (other attributes pass through), noting each input's shape."""

    def __init__(self, model: Stylizer) -> None:
        self.model = model
        self.shapes: list[tuple[int, ...]] = []

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.shapes.append((1, *x.shape))
        return self.model(x)

    def __getattr__(self, name: str) -> object:
        return getattr(self.model, name)


def photo_set(big: int, tiny: bool) -> dict[str, bytes]:
    """name -> JPEG bytes: the shared photos, and ``big`` of them upscaled to ~12 MP."""
    if tiny:
        y, x = np.mgrid[0:300, 0:400]
        img = Image.fromarray(np.stack([x % 256, y % 256, (x + y) % 256], 2).astype(np.uint8))
        return {"synthetic": _jpeg(img), "synthetic@12MP": _jpeg(img.resize((4000, 3000)))}
    photos = {p.stem: p.read_bytes() for p in sorted(PHOTOS.glob("*.jpg"))}
    for stem in list(photos)[:big]:
        img = Image.open(io.BytesIO(photos[stem])).convert("RGB")
        scale = (12e6 / (img.width * img.height)) ** 0.5
        photos[f"{stem}@12MP"] = _jpeg(img.resize((round(img.width * scale), round(img.height * scale)),
                                                  Image.Resampling.LANCZOS))
    return photos


def _jpeg(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=92)
    return buf.getvalue()


def reference_convert(data: bytes, model: Stylizer) -> tuple[bytes, float]:
    """The reference pipeline: full decode, Lanczos, the model, JPEG q92."""
    img = ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB")
    img = img.resize(fit_size(img.width, img.height, MAX_SIDE), Image.Resampling.LANCZOS)
    t0 = time.perf_counter()
    anime = stylize(img, model)
    model_s = time.perf_counter() - t0
    return encode(anime, "jpg", 92), model_s


def load_variant(name: str, home: Path | None) -> Stylizer:
    model = _load_variant(name, home)
    if name == FP32:
        force_fp32(model)
    return model


def _load_variant(name: str, home: Path | None) -> Stylizer:
    if home is None:  # --tiny
        if name == "onnxruntime":
            import onnxruntime as ort

            from inference.backends import OnnxStylizer

            return OnnxStylizer("tiny", ort.InferenceSession(str(tiny_onnx()), providers=["CPUExecutionProvider"]), 4)
        if name.startswith("openvino"):
            return OpenVinoStylizer("tiny", tiny_onnx())
        return TorchStylizer("tiny", "eager", tiny_net())
    store = ModelStore(home)
    if name == "reference":
        entry, path = store.require("hayao")
        return TorchStylizer("hayao", "eager", build_generator(entry, path))
    if name == INT8:
        return load_stylizer(store, INT8)
    return load_stylizer(store, "hayao", "openvino" if name == FP32 else name)  # type: ignore[arg-type]


TINY_WIDTHS = GeneratorWidths(a=(4, 8, 8), b=(8, 8), c_in=8, res=8, hidden=(8, 8, 8, 8), c_out=8, d=(8, 8), e=(8, 8, 4))
_TINY_ONNX: list[Path] = []


def tiny_net() -> Generator:
    """The tiny random generator of ``--tiny``: the same weights every time (seed 0)."""
    import torch

    torch.manual_seed(0)
    return Generator(TINY_WIDTHS).eval()


def tiny_onnx() -> Path:
    """:func:`tiny_net` exported to ONNX, once per process."""
    if not _TINY_ONNX:
        import tempfile

        from inference.onnx_export import export

        path = Path(tempfile.mkdtemp()) / "tiny.onnx"
        path.write_bytes(export(tiny_net()))
        _TINY_ONNX.append(path)
    return _TINY_ONNX[0]


def flop_counter(name: str, home: Path | None) -> FlopCounter | None:
    """Counts the FLOPs of the net ``name`` runs, from its ONNX file (None where there is none)."""
    try:
        if home is None:
            return FlopCounter(tiny_onnx())
        store = ModelStore(home)
        if name == INT8:
            path = store.path(store.entry(INT8))
            return FlopCounter(path) if path.suffix == ".onnx" else None
        entry, path = store.require("hayao")
        return FlopCounter(exported_onnx(store, entry, path))
    except Exception as exc:  # a bench that cannot count still times
        print(f"no FLOP count for {name}: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return None


def precision_of(name: str, model: Stylizer) -> str:
    """What ``model`` computes in: OpenVINO's choice for the shape it compiled last, else fp32."""
    if not isinstance(model, OpenVinoStylizer):
        return "int8" if name == INT8 else "fp32"
    compiled = list(model._compiled.values())
    try:
        chosen = compiled[-1][0].get_property("INFERENCE_PRECISION_HINT")  # type: ignore[attr-defined]
        precision = precision_name(getattr(chosen, "get_type_name", lambda: str(chosen))())
    except (IndexError, RuntimeError):
        precision = precision_name(model.precision)
    return "int8" if name == INT8 else precision


def run_once(name: str, model: Stylizer, data: bytes) -> tuple[float, float, np.ndarray, list[tuple[int, ...]]]:
    log = ShapeLog(model)
    logged: Stylizer = log  # type: ignore[assignment]
    t0 = time.perf_counter()
    if name == "reference":
        out, model_s = reference_convert(data, logged)
    else:
        result = convert_bytes(data, logged, ConvertSettings(max_side=MAX_SIDE, faces=False))
        out, model_s = result.data, result.timings["model_s"]
    total = time.perf_counter() - t0
    return total, model_s, np.asarray(Image.open(io.BytesIO(out)).convert("RGB")), log.shapes


def quality(ref: np.ndarray, out: np.ndarray) -> dict[str, float]:
    """PSNR, SSIM (grey, 8x8 windows), mean Oklab dE x100, and hue error where colour matters."""
    a, b = ref.astype(np.float64), out.astype(np.float64)
    mse = np.mean((a - b) ** 2)
    psnr = float("inf") if mse == 0 else 10 * np.log10(255**2 / mse)
    la, lb = srgb_to_oklab(ref), srgb_to_oklab(out)
    de = float(np.linalg.norm(la - lb, axis=-1).mean() * 100)
    ca, cb = np.hypot(la[..., 1], la[..., 2]), np.hypot(lb[..., 1], lb[..., 2])
    coloured = (ca > 0.05) & (cb > 0.05)  # hue means nothing on greys
    dh = np.abs((np.arctan2(lb[..., 2], lb[..., 1]) - np.arctan2(la[..., 2], la[..., 1]) + np.pi) % (2 * np.pi) - np.pi)
    hue = float(np.degrees(dh[coloured]).mean()) if coloured.any() else 0.0
    return {"psnr": psnr, "ssim": _ssim(a.mean(2), b.mean(2)), "de": de, "hue_deg": hue}


def _ssim(x: np.ndarray, y: np.ndarray, win: int = 8) -> float:
    h, w = (x.shape[0] // win) * win, (x.shape[1] // win) * win
    bx = x[:h, :w].reshape(h // win, win, w // win, win).transpose(0, 2, 1, 3).reshape(-1, win * win)
    by = y[:h, :w].reshape(h // win, win, w // win, win).transpose(0, 2, 1, 3).reshape(-1, win * win)
    mx, my = bx.mean(1), by.mean(1)
    vx, vy = bx.var(1), by.var(1)
    cov = ((bx - mx[:, None]) * (by - my[:, None])).mean(1)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    return float((((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))).mean())


def child_peak_rss_mb(name: str, home: Path | None, big: int, tiny: bool) -> float:
    """Peak RSS of a fresh process that loads ``name`` and converts every photo once."""
    cmd = [sys.executable, "-m", "bench.speed", "--rss-child", name, "--big", str(big)]
    cmd += ["--tiny"] if tiny else ["--home", str(home)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def model_file_mb(name: str, home: Path | None) -> float:
    if home is None:
        return float("nan")
    store = ModelStore(home)
    if name == INT8:
        return store.path(store.entry(INT8)).stat().st_size / 2**20
    entry, path = store.require("hayao")
    if name in ("onnxruntime", "openvino", FP32):
        return exported_onnx(store, entry, path).stat().st_size / 2**20
    files = {"reference": [path], "torchscript": sorted((store.cache_dir / "torchscript").glob("*.pt"))}[name]
    return files[-1].stat().st_size / 2**20 if files else float("nan")


def _installed(store: ModelStore, name: str) -> bool:
    return any(e.name == name for e in store.entries) and store.is_installed(store.entry(name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--home", type=Path, help="data dir with hayao installed")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--big", type=int, default=4, help="how many photos to also convert as 12 MP JPEGs")
    ap.add_argument("--tiny", action="store_true", help="a tiny random generator and synthetic photos")
    ap.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.tiny and args.home is None:
        ap.error("--home is required (or --tiny)")
    home = None if args.tiny else args.home.resolve()
    photos = photo_set(args.big, args.tiny)

    if args.rss_child:
        model = load_variant(args.rss_child, home)
        for data in photos.values():
            run_once(args.rss_child, model, data)
        print(peak_rss_mb())
        return

    variants = VARIANTS + ((INT8,) if home is not None and _installed(ModelStore(home), INT8) else ())
    models = {name: load_variant(name, home) for name in variants}
    samples: dict[tuple[str, str], Sample] = {}
    for _ in range(args.runs):  # variants alternate photo by photo, so drift hits them alike
        for photo, data in photos.items():
            for name, model in models.items():
                total, model_s, out, shapes = run_once(name, model, data)
                s = samples.setdefault((name, photo), Sample([], [], out, shapes))
                s.total.append(total)
                s.model.append(model_s)

    def summed(name: str, field: str, pick) -> float:  # type: ignore[no-untyped-def]
        return sum(pick(getattr(samples[(name, p)], field)) for p in photos)

    cpu = cpu_peak()
    counters = {name: flop_counter(name, home) for name in variants}

    def gflop(name: str) -> float:
        count = counters[name]
        return float("nan") if count is None else sum(count(x) for p in photos for x in samples[(name, p)].shapes) / 1e9

    rows = []
    for name in variants:
        q = [quality(samples[("reference", p)].output, samples[(name, p)].output) for p in photos]
        big = [p for p in photos if p.endswith("@12MP")]
        precision = precision_of(name, models[name])
        rows.append({
            "variant": name, "precision": precision, "gflop": gflop(name),
            "gflops": gflop(name) / summed(name, "model", min), "peak_gflops": cpu.gflops(precision),
            "total_min_s": summed(name, "total", min), "total_median_s": summed(name, "total", statistics.median),
            "model_min_s": summed(name, "model", min), "model_median_s": summed(name, "model", statistics.median),
            "big_total_min_s": sum(min(samples[(name, p)].total) for p in big),
            "psnr_min": min(x["psnr"] for x in q), "ssim_min": min(x["ssim"] for x in q),
            "de_max": max(x["de"] for x in q), "hue_deg_max": max(x["hue_deg"] for x in q),
            "model_mb": model_file_mb(name, home), "peak_rss_mb": child_peak_rss_mb(name, home, args.big, args.tiny),
        })
    ref = rows[0]
    by_name = {r["variant"]: r for r in rows}
    default, forced = by_name["openvino"]["precision"], by_name[FP32]["precision"]
    print(f"{len(photos)} photos ({sum(p.endswith('@12MP') for p in photos)} of them 12 MP), {args.runs} runs, "
          f"{MAX_SIDE} px; OpenVINO computes in {default} on this CPU")
    same = ""
    if default == forced:
        bf16_units = bool({"avx512_bf16", "amx_bf16"} & cpu.flags)
        same = (" (the same as openvino here: OpenVINO chose fp32 anyway)" if bf16_units else
                " (the same as openvino here: this CPU has no bfloat16 units)")
    print(f"{FP32}: the default pipeline with fp32 forced, what CPUs without bfloat16 units get; "
          f"OpenVINO computes it in {forced}{same}")
    print("| variant | end to end s (min / median) | x ref | 12 MP end to end s | x ref | model s (min / median) "
          "| x ref | precision | GFLOP/s | peak GFLOP/s | % of peak | PSNR dB (worst) | SSIM (worst) | dE (worst) "
          "| hue err deg (worst) | file MB | peak RSS MB |")
    print("|---" * 17 + "|")
    for r in rows:
        print(f"| {r['variant']} | {r['total_min_s']:.2f} / {r['total_median_s']:.2f} | "
              f"{ref['total_min_s'] / r['total_min_s']:.2f} | {r['big_total_min_s']:.2f} | "
              f"{ref['big_total_min_s'] / max(r['big_total_min_s'], 1e-9):.2f} | "
              f"{r['model_min_s']:.2f} / {r['model_median_s']:.2f} | {ref['model_min_s'] / r['model_min_s']:.2f} | "
              f"{r['precision']} | {_num(r['gflops'])} | {r['peak_gflops']:.0f} | "
              f"{_num(100 * r['gflops'] / r['peak_gflops'])} | "
              f"{r['psnr_min']:.1f} | {r['ssim_min']:.4f} | {r['de_max']:.2f} | {r['hue_deg_max']:.2f} | "
              f"{r['model_mb']:.1f} | {r['peak_rss_mb']:.0f} |")
    print(f"GFLOP/s: 2 x the multiply-accumulates of the convolutions and matmuls at the padded shapes each "
          f"variant ran at ({_num(by_name[FP32]['gflop'])} GFLOP over the photos), over the summed min model "
          f"seconds. CPU: {cpu.model_name} ({cpu.vendor}, family {cpu.family}), {cpu.cores} usable cores.")
    for precision in dict.fromkeys(r["precision"] for r in rows):
        print(f"  {cpu.describe(precision)}")
    for note in cpu.notes:
        print(f"  {note}")
    for line in what_to_expect(cpu, by_name[FP32], counters[FP32], samples, photos, home is None):
        print(line)
    print(json.dumps(rows, default=float))


def _num(x: float) -> str:
    return "?" if x != x else f"{x:.0f}"


def what_to_expect(cpu: CpuPeak, fp32: dict, counter: FlopCounter | None, samples: dict[tuple[str, str], Sample],
                   photos: dict[str, bytes], tiny: bool) -> list[str]:
    """Photos per minute on 2- and 4-core AVX2 VPSs, scaled from the fp32 rate measured here."""
    if counter is None or fp32["gflops"] != fp32["gflops"]:
        return ["What to expect: no FLOP count, so no estimate."]
    net = "the tiny random net" if tiny else "Hayao"
    flop = counter(EXPECT_SHAPE) / 1e9
    here = cpu.gflops("fp32")
    per_core = VPS_GHZ * VPS_FLOP_PER_CYCLE
    small = [p for p in photos if not p.endswith("@12MP")] or list(photos)
    overhead = statistics.mean(min(samples[(FP32, p)].total) - min(samples[(FP32, p)].model) for p in small)
    lines = [f"What to expect on an AVX2 VPS (no bfloat16 units, so fp32): {net}, whole image at "
             f"{EXPECT_SHAPE[2]}x{EXPECT_SHAPE[1]} ({flop:.1f} GFLOP), one photo at a time:"]
    for cores in VPS_CORES:
        rate = fp32["gflops"] * cores * per_core / here
        model_s = flop / rate
        lines.append(f"  {cores}-core AVX2 VPS: about {rate:.0f} GFLOP/s, {model_s:.2f} s a photo: "
                     f"{60 / model_s:.0f} photos/min drawing only, {60 / (model_s + overhead):.0f} end to end")
    lines.append(f"  Assumed: a VPS core peaks at {VPS_GHZ} GHz x {VPS_FLOP_PER_CYCLE} fp32 FLOP/cycle (AVX2: 2 FMA "
                 f"units x 8 lanes x 2) = {per_core:.0f} GFLOP/s and reaches the share of its peak that {FP32} reached "
                 f"here ({100 * fp32['gflops'] / here:.0f}%: {fp32['gflops']:.0f} of {here:.0f} GFLOP/s); cores scale "
                 f"linearly; a vCPU is a whole core (one that is an SMT thread gives about half). End to end adds "
                 f"the {overhead:.2f} s per {MAX_SIDE} px photo that the rest of the pipeline (decoding, resizing, "
                 f"loading the compiled shape, encoding) took here.")
    return lines


if __name__ == "__main__":
    main()
