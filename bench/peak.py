"""How many FLOPs a model costs, and how many this CPU can do at most: the two halves of GFLOP/s.

FLOPs. :class:`FlopCounter` counts 2 x the multiply-accumulates of every convolution
(plain, grouped / depthwise, transposed) and MatMul of a model at the exact input shape
it is run at. Everything else (norms, activations, padding, resizing) is left out: it is
memory-bound and a few percent of the arithmetic. The shapes come from OpenVINO's
shape inference on the ONNX file reshaped to that input: ``onnx.shape_inference`` cannot
follow our exports' pad sizes, which are computed in the graph, so every convolution's
height and width stay unknown there. Hayao (AnimeGANv2) at 720x480 counts 277 GFLOP.

Peak. :func:`cpu_peak` reads ``/proc/cpuinfo`` (vendor, family, model, ``flags``, ``cpu MHz``),
``/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq`` where there is one, and the CPUs
this process may run on (``os.sched_getaffinity``); SMT siblings among them (two logical
CPUs with the same physical and core id) count once, as they share one core's FMA units.
peak = cores x clock x FLOP per cycle per core, by these rules (assumptions, not measurements):

- fp32: 2 FMA units x SIMD lanes x 2 (an FMA is 2 FLOPs).
  - Intel with ``avx512f``: 16 lanes, 64 FLOP/cycle. Some Xeon Bronze / Silver and client
    parts have one 512-bit FMA unit, half that; the flags cannot tell, so this is an upper bound.
  - AMD with ``avx512f``: Zen 4 (family 25) runs 512-bit ops on 256-bit units, so 8 lanes'
    worth per unit, 32 FLOP/cycle; Zen 5 (family 26 and later) has 512-bit units, 64 (its
    mobile parts have 256-bit ones, half that).
  - ``avx2`` and ``fma``: 8 lanes, 32 FLOP/cycle; except AMD Zen 1 / Zen+ (family 23, model
    below 0x30), which splits 256-bit ops on 128-bit units: 16.
  - ``avx`` without ``fma``: a separate 8-lane multiply and add unit, 16; SSE only: 8.
- bf16: with ``amx_bf16`` (AMX tiles, Sapphire Rapids and later), Intel's documented figure
  of 1024 bf16 FLOP/cycle/core, a rough ceiling that convolutions reach only a part of;
  with ``avx512_bf16``, the dot-product instruction (VDPBF16PS: two bf16 products per fp32
  lane) gives 2x the fp32 rule; with neither, the fp32 rule (the arithmetic is fp32).
- f16: ``amx_fp16``: AMX, 1024; ``avx512_fp16``: 2x the fp32 rule; else the fp32 rule.
- int8: ``amx_int8``: AMX, 2048 ops/cycle/core (Intel's figure); ``avx512_vnni`` or
  ``avx_vnni`` (VPDPBUSD, four 8-bit products per 32-bit lane): 4x the fp32 rule; else 2x
  (the multiply-add pair of instructions without VNNI).

The clock is ``cpuinfo_max_freq`` (the highest boost the kernel knows) where present, else the
highest ``cpu MHz`` (in a VM, often the nominal clock: boost above it can make a measured rate
exceed the printed peak), else the GHz in the model name. All-core clocks under wide vector
load are lower than the single-core boost, so the peak is an upper bound.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
AMX_BF16 = 1024  # FLOP/cycle/core: Intel's figure for AMX bf16 (Sapphire Rapids)
AMX_INT8 = 2048  # ops/cycle/core: Intel's figure for AMX int8
# Per precision: the AMX flag and its figure, the vector flags, what they give over fp32, their
# name, and the multiple of fp32 without any of them (int8 still packs two ops per fp32 lane).
_UNITS = {
    "bf16": ("amx_bf16", AMX_BF16, ("avx512_bf16",), 2, "AVX-512 BF16 dot products", 1),
    "f16": ("amx_fp16", AMX_BF16, ("avx512_fp16",), 2, "AVX-512 FP16", 1),
    "int8": ("amx_int8", AMX_INT8, ("avx512_vnni", "avx_vnni"), 4, "VNNI int8 dot products", 2),
}


def force_fp32(*models: object) -> None:
    """Have OpenVINO models compute in fp32, as on CPUs without bfloat16 units; call before their
    first shape is compiled. Other backends compute in fp32 already and are left alone."""
    from inference.backends import OpenVinoStylizer

    for model in models:
        if isinstance(model, OpenVinoStylizer):
            model._config["INFERENCE_PRECISION_HINT"] = "f32"


def precision_name(precision: str) -> str:
    """OpenVINO's and our names for one precision, as one: fp32, bf16, f16, int8."""
    p = precision.lower()
    return {"f32": "fp32", "float32": "fp32", "bf16": "bf16", "bfloat16": "bf16", "f16": "f16", "fp16": "f16",
            "float16": "f16", "i8": "int8", "u8": "int8", "int8": "int8"}.get(p, p)


@dataclass
class CpuPeak:
    vendor: str
    model_name: str
    family: int
    model: int
    flags: frozenset[str] = field(repr=False)
    ghz: float
    clock_source: str
    cores: int
    logical: int
    notes: list[str] = field(default_factory=list)

    def fp32_rule(self) -> tuple[int, str]:
        """fp32 FLOP per cycle per core, and the rule that gave it."""
        f, amd, intel = self.flags, self.vendor == "AuthenticAMD", self.vendor == "GenuineIntel"
        if "avx512f" in f and amd and self.family >= 26:
            return 64, "AMD Zen 5 AVX-512: 2 FMA units x 16 lanes x 2"
        if "avx512f" in f and amd:
            return 32, "AMD Zen 4 AVX-512 on 256-bit units: 2 FMA units x 8 lanes x 2"
        if "avx512f" in f and intel:
            return 64, "Intel AVX-512: 2 FMA units x 16 lanes x 2 (upper bound: some parts have 1)"
        if "avx512f" in f:
            return 64, "AVX-512 (vendor unknown): 2 FMA units x 16 lanes x 2"
        if "avx2" in f and "fma" in f and amd and self.family == 23 and self.model < 0x30:
            return 16, "AMD Zen 1 AVX2 on 128-bit units: 2 FMA units x 4 lanes x 2"
        if "avx2" in f and "fma" in f:
            return 32, "AVX2: 2 FMA units x 8 lanes x 2"
        if "avx" in f:
            return 16, "AVX without FMA: 8-lane multiply + 8-lane add"
        return 8, "SSE: 4-lane multiply + 4-lane add"

    def rule(self, precision: str) -> tuple[int, str]:
        """FLOP (int8: ops) per cycle per core at ``precision``, and the rule that gave it."""
        p, f = precision_name(precision), self.flags
        fp32, why = self.fp32_rule()
        if p not in _UNITS:
            return fp32, why
        amx_flag, amx, vector_flags, times, name, without = _UNITS[p]
        if amx_flag in f:
            return amx, f"{amx_flag}: Intel's figure, {amx} per cycle (rough ceiling)"
        if any(flag in f for flag in vector_flags):
            return times * fp32, f"{name}: {times}x fp32 ({why})"
        return without * fp32, f"no {p} units: {without}x the fp32 rule ({why})"

    def gflops(self, precision: str) -> float:
        return self.cores * self.ghz * self.rule(precision)[0]

    def describe(self, precision: str) -> str:
        """One line: the peak at ``precision`` and how it was reckoned."""
        per_cycle, why = self.rule(precision)
        return (f"{precision_name(precision)} peak {self.gflops(precision):.0f} GFLOP/s = {self.cores} cores x "
                f"{self.ghz:.2f} GHz ({self.clock_source}) x {per_cycle} FLOP/cycle [{why}]")


def cpu_peak(cpuinfo: str | None = None, max_freq_khz: int | None = None, usable: set[int] | None = None) -> CpuPeak:
    """This machine's :class:`CpuPeak`; the arguments stand in for /proc and /sys in tests."""
    if cpuinfo is None:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        if max_freq_khz is None and MAX_FREQ.exists():
            try:
                max_freq_khz = int(MAX_FREQ.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    blocks = [dict(_fields(b)) for b in cpuinfo.split("\n\n") if b.strip()]
    blocks = [b for b in blocks if "processor" in b] or blocks or [{}]
    if usable is None:
        usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(len(blocks)))
    mine = [b for b in blocks if _int(b.get("processor"), -1) in usable] or blocks[:max(1, len(usable))]
    first = mine[0]
    notes = []
    if all("core id" in b and "physical id" in b for b in mine):
        cores = len({(b["physical id"], b["core id"]) for b in mine})
        if cores < len(mine):
            notes.append(f"{len(mine)} logical CPUs on {cores} cores (SMT threads share a core's FMA units)")
    else:
        cores = len(usable) or 1
    mhz = [float(b["cpu MHz"]) for b in mine if _is_float(b.get("cpu MHz"))]
    named = re.search(r"@\s*([\d.]+)\s*GHz", first.get("model name", ""))
    if max_freq_khz:
        ghz, source = max_freq_khz / 1e6, "cpuinfo_max_freq"
    elif mhz:
        ghz, source = max(mhz) / 1e3, "cpu MHz"
    elif named:
        ghz, source = float(named.group(1)), "model name"
    else:
        ghz, source = 2.5, "unknown, 2.5 GHz assumed"
    return CpuPeak(vendor=first.get("vendor_id", "?"), model_name=first.get("model name", "?"),
                   family=_int(first.get("cpu family"), 0), model=_int(first.get("model"), 0),
                   flags=frozenset(first.get("flags", "").split()), ghz=ghz, clock_source=source,
                   cores=cores, logical=len(mine), notes=notes)


def _fields(block: str) -> list[tuple[str, str]]:
    return [(k.strip(), v.strip()) for k, sep, v in (line.partition(":") for line in block.splitlines()) if sep]


def _int(text: str | None, default: int) -> int:
    try:
        return int(text, 0) if text is not None else default
    except ValueError:
        return default


def _is_float(text: str | None) -> bool:
    try:
        float(text)  # type: ignore[arg-type]
        return True
    except (TypeError, ValueError):
        return False


# Per op type: which input's shape gives the work per weight, and how many leading weight dims to skip.
#   Convolution        W [Cout, Cin, k...]             MACs = |out| x Cin x k...
#   GroupConvolution   W [G, Cout/G, Cin/G, k...]      MACs = |out| x Cin/G x k...
#   ConvolutionBackpropData       W [Cin, Cout, k...]          MACs = |in| x Cout x k...
#   GroupConvolutionBackpropData  W [G, Cin/G, Cout/G, k...]   MACs = |in| x Cout/G x k...
_CONVS = {"Convolution": ("out", 1), "GroupConvolution": ("out", 2),
          "ConvolutionBackpropData": ("in", 1), "GroupConvolutionBackpropData": ("in", 2)}


class FlopCounter:
    """FLOPs (2 x multiply-accumulates) of an ONNX model's convolutions and matmuls, per input shape."""

    def __init__(self, onnx: Path) -> None:
        import openvino as ov

        self._model = ov.Core().read_model(str(onnx))
        self._seen: dict[tuple[int, ...], float] = {}

    def __call__(self, shape: tuple[int, ...]) -> float:
        shape = tuple(int(n) for n in shape)
        if shape not in self._seen:
            self._seen[shape] = self._count(shape)
        return self._seen[shape]

    def _count(self, shape: tuple[int, ...]) -> float:
        model = self._model.clone()
        model.reshape({model.input(0): list(shape)})
        macs = 0
        for op in model.get_ordered_ops():
            kind = op.get_type_name()
            if kind in _CONVS:
                side, skip = _CONVS[kind]
                weights = list(op.input(1).get_shape())
                work = op.output(0).get_shape() if side == "out" else op.input(0).get_shape()
                macs += math.prod(work) * math.prod(weights[skip:])
            elif kind == "MatMul":
                a = list(op.input(0).get_shape())
                k = a[-2] if op.get_attributes().get("transpose_a") and len(a) > 1 else a[-1]
                macs += math.prod(op.output(0).get_shape()) * k
        return 2.0 * macs
