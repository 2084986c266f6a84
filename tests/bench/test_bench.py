"""The benchmarks run end to end on a tiny configuration (no real models needed)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.load import run_load
from bench.peak import FlopCounter, cpu_peak
from testkit.models import QUICK_STYLE
from testkit.bot_harness import REPO
from weights.store import ModelStore


@pytest.mark.slow  # four backends, in a subprocess
def test_speed_bench_prints_its_table_on_a_tiny_generator() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.speed", "--tiny", "--runs", "1"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    top = next(i for i, l in enumerate(lines) if l.startswith("| variant |"))
    header = [c.strip() for c in lines[top].split("|")[1:-1]]
    table = [dict(zip(header, (c.strip() for c in l.split("|")[1:-1]))) for l in lines[top + 2:top + 7]]
    assert [r["variant"] for r in table] == ["reference", "torchscript", "onnxruntime", "openvino", "openvino-fp32"]
    assert {"precision", "GFLOP/s", "peak GFLOP/s", "% of peak"} <= set(header)
    assert all(float(r["GFLOP/s"]) > 0 and float(r["peak GFLOP/s"]) > 0 for r in table)
    assert any(l.startswith("openvino-fp32: ") and "without bfloat16 units" in l for l in lines[:top])
    assert any(l.lstrip().startswith("fp32 peak ") and "FLOP/cycle" in l for l in lines[top:])  # the rule used
    assert [l.split(":")[0].strip() for l in lines if "-core AVX2 VPS:" in l] == ["2-core AVX2 VPS", "4-core AVX2 VPS"]
    rows = json.loads(lines[-1])
    assert rows[0]["psnr_min"] == float("inf")  # the reference against itself
    assert all(r["psnr_min"] > 38 and r["peak_rss_mb"] > 0 and r["total_min_s"] > 0 for r in rows)
    fp32 = rows[-1]
    assert fp32["variant"] == "openvino-fp32" and fp32["precision"] == "fp32"
    assert fp32["gflop"] > 0 and fp32["gflops"] > 0 and fp32["peak_gflops"] > 0


def cpuinfo(vendor: str, family: int, flags: str, cores: int = 2, mhz: float = 3000.0, smt: bool = False) -> str:
    """A /proc/cpuinfo with ``cores`` cores (two logical CPUs each with ``smt``)."""
    logical = [(i // 2 if smt else i) for i in range(2 * cores if smt else cores)]
    return "\n\n".join(
        f"processor\t: {n}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 17\n"
        f"model name\t: test cpu\ncpu MHz\t\t: {mhz}\nphysical id\t: 0\ncore id\t\t: {core}\nflags\t\t: {flags}"
        for n, core in enumerate(logical)) + "\n"


AVX2 = "fpu sse sse2 avx fma avx2"


@pytest.mark.parametrize("vendor, family, flags, fp32, bf16", [
    # The 2-core AMD EPYC at 3 GHz: 192 GFLOP/s fp32 FMA limit, 384 with bf16 dot products.
    ("AuthenticAMD", 25, AVX2 + " avx512f avx512_bf16", 32, 64),
    ("AuthenticAMD", 25, AVX2, 32, 32),  # Zen 3: no bf16 units, bf16 gets the fp32 rule
    ("AuthenticAMD", 26, AVX2 + " avx512f avx512_bf16", 64, 128),  # Zen 5: 512-bit units
    ("GenuineIntel", 6, AVX2 + " avx512f avx512_bf16 amx_bf16", 64, 1024),  # AMX: Intel's figure
    ("GenuineIntel", 6, AVX2 + " avx512f", 64, 64),
    ("GenuineIntel", 6, "fpu sse sse2 avx", 16, 16),  # AVX without FMA
])
def test_the_peak_follows_the_cpus_flags(vendor: str, family: int, flags: str, fp32: int, bf16: int) -> None:
    cpu = cpu_peak(cpuinfo(vendor, family, flags), usable={0, 1})
    assert (cpu.cores, cpu.ghz, cpu.clock_source) == (2, 3.0, "cpu MHz")
    assert cpu.rule("f32")[0] == fp32 and cpu.rule("bf16")[0] == bf16
    assert cpu.gflops("f32") == pytest.approx(2 * 3.0 * fp32) and cpu.gflops("bf16") == pytest.approx(2 * 3.0 * bf16)
    assert f"{fp32} FLOP/cycle" in cpu.describe("fp32")


def test_the_peak_counts_usable_cores_once_and_prefers_the_max_clock() -> None:
    text = cpuinfo("AuthenticAMD", 25, AVX2, cores=4, smt=True)  # 8 logical CPUs on 4 cores
    cpu = cpu_peak(text, usable={0, 1, 2, 3})  # two cores' two threads each
    assert (cpu.cores, cpu.logical) == (2, 4) and cpu.notes
    cpu = cpu_peak(text, max_freq_khz=3_700_000, usable={0, 2, 4})
    assert (cpu.cores, cpu.ghz, cpu.clock_source) == (3, 3.7, "cpuinfo_max_freq")


def test_flops_are_counted_per_input_shape(tmp_path: Path) -> None:
    """A plain 3x3 conv, a depthwise one, and a matmul: 2 x multiply-accumulates each, at any shape."""
    from onnx import TensorProto, helper, numpy_helper, save

    weights = [numpy_helper.from_array(np.zeros(s, np.float32), n)
               for n, s in (("w", (8, 3, 3, 3)), ("dw", (8, 1, 3, 3)), ("m", (5, 7)))]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["a", "dw"], ["b"], pads=[1, 1, 1, 1], group=8),
         helper.make_node("Slice", ["b", "starts", "ends", "axes"], ["c"]),
         helper.make_node("MatMul", ["c", "m"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        weights + [numpy_helper.from_array(np.array([v], np.int64), n)
                   for n, v in (("starts", 0), ("ends", 5), ("axes", 3))])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    count = FlopCounter(tmp_path / "m.onnx")
    for h, w in ((16, 24), (40, 8)):
        assert count((1, 3, h, w)) == 2 * (8 * h * w * 27 + 8 * h * w * 9 + 8 * h * 7 * 5)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_burst_of_100_photos_from_20_users_is_answered_exactly_once(real_store: ModelStore) -> None:
    report = run_load(real_store.home, users=20, photos=100, bursts=2, gap_s=1.0, deadline_s=600,
                      env={"ANIMEBOT_MAX_SIDE": "256", "ANIMEBOT_STYLE": QUICK_STYLE})  # answering once is the point
    assert report["unanswered"] == 0 and report["answered_twice"] == 0, report
    assert report["kinds"].get("result", 0) > 0
    assert set(report["kinds"]) <= {"result", "partial", "busy", "per_user_limit", "rate_limited", "quota"}, report["kinds"]
    assert report["error_lines"] == []
