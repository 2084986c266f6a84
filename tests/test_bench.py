"""The benchmarks run end to end on a tiny configuration (no real models needed)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.load import run_load
from tests.conftest import REPO
from weights.store import ModelStore


def test_speed_bench_prints_its_table_on_a_tiny_generator() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.speed", "--tiny", "--runs", "1"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[1].startswith("| variant |") and [l.split("|")[1].strip() for l in lines[3:7]] == [
        "reference", "torchscript", "onnxruntime", "openvino"]
    rows = json.loads(lines[-1])
    assert rows[0]["psnr_min"] == float("inf")  # the reference against itself
    assert all(r["psnr_min"] > 38 and r["peak_rss_mb"] > 0 and r["total_min_s"] > 0 for r in rows)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_burst_of_100_photos_from_20_users_is_answered_exactly_once(real_store: ModelStore) -> None:
    report = run_load(real_store.home, users=20, photos=100, bursts=2, gap_s=1.0, deadline_s=600,
                      env={"ANIMEBOT_MAX_SIDE": "256"})
    assert report["unanswered"] == 0 and report["answered_twice"] == 0, report
    assert report["kinds"].get("result", 0) > 0
    assert set(report["kinds"]) <= {"result", "partial", "busy", "per_user_limit", "rate_limited", "quota"}, report["kinds"]
    assert report["error_lines"] == []
