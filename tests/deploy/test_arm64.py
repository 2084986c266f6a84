"""linux/arm64 (issue 58, part 6): the image has no x86-only step, and the wheel check CI runs
(testkit/arm64_wheels.py, from .ci/run) asks pip for what the image's base can install. The check itself
downloads from PyPI, so CI runs it once, not here."""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from testkit import arm64_wheels
from testkit.bot_harness import REPO

INSTALL_FILES = ("Dockerfile", "docker/install.sh")


@pytest.mark.parametrize("name", INSTALL_FILES)
def test_the_image_names_no_one_architecture(name: str) -> None:
    """No step picks an architecture; comments may say why none needs to."""
    steps = "\n".join(line for line in (REPO / name).read_text().splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"x86[_-]64|amd64|aarch64|arm64|i[36]86", steps, re.IGNORECASE), name


def test_the_check_targets_the_images_base() -> None:
    bases = set(re.findall(r"^FROM (\S+)", (REPO / "Dockerfile").read_text(), re.MULTILINE))
    assert bases == {f"python:{arm64_wheels.PYTHON}-slim-{arm64_wheels.BASE}"}
    # Bookworm's glibc is 2.36: pip takes every manylinux wheel up to it (OpenVINO's aarch64 wheel is 2_35).
    assert arm64_wheels.GLIBC == (2, 36)
    assert arm64_wheels.PLATFORMS[0] == "manylinux2014_aarch64"
    assert {"manylinux_2_17_aarch64", "manylinux_2_28_aarch64", "manylinux_2_35_aarch64",
            "manylinux_2_36_aarch64"} <= set(arm64_wheels.PLATFORMS)
    assert "manylinux_2_37_aarch64" not in arm64_wheels.PLATFORMS
    assert "TORCH_INDEX=https://download.pytorch.org/whl/cpu" in (REPO / "Dockerfile").read_text()
    assert arm64_wheels.TORCH_INDEX == "https://download.pytorch.org/whl/cpu"


def test_the_runtime_dependencies_are_checked_not_the_tests() -> None:
    requirements = arm64_wheels.runtime_requirements()
    assert "torch==2.13.0" in requirements
    assert not any(text.startswith(("pytest", "insightface", "mypy")) for text in requirements)


def test_ci_runs_the_check() -> None:
    assert "\n.venv/bin/python -m testkit.arm64_wheels\n" in (REPO / ".ci" / "run").read_text()


def test_torchs_cuda_requirements_are_left_out(tmp_path: Path) -> None:
    wheel = tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("torch-2.13.0.dist-info/METADATA", "\n".join([
            "Metadata-Version: 2.4", "Name: torch", "Version: 2.13.0",
            "Requires-Dist: sympy>=1.13.3",
            'Requires-Dist: cuda-toolkit[cublas]==13.0.3; platform_system == "Linux"',
            'Requires-Dist: nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"',
            'Requires-Dist: triton==3.7.1; platform_system == "Linux" and python_version < "3.15"',
            'Requires-Dist: optree>=0.13.0; extra == "optree"',
        ]))
    found = arm64_wheels.wheel_requirements(wheel)
    assert len(found) == 4  # the extra's is not one
    assert arm64_wheels.not_for_cuda(found) == ["sympy>=1.13.3"]


def test_only_wheels_pass(tmp_path: Path) -> None:
    (tmp_path / "numpy-2.4.6-cp311-cp311-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl").touch()
    assert arm64_wheels.report(tmp_path) == [
        ("numpy", "2.4.6", "numpy-2.4.6-cp311-cp311-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl")]
    (tmp_path / "tflite-2.18.0.tar.gz").touch()
    with pytest.raises(SystemExit, match="not a wheel"):
        arm64_wheels.report(tmp_path)
