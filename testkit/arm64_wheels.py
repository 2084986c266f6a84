"""Every runtime dependency has a wheel for linux/arm64: ``python -m testkit.arm64_wheels`` (CI runs it, .ci/run).

``pip download --only-binary=:all:`` for CPython 3.11 on aarch64 with the glibc of the image's base (Debian
bookworm: 2.36, so every ``manylinux_2_17`` to ``manylinux_2_36`` wheel installs there) of pyproject's
[project].dependencies and everything they need, into a throwaway folder; then one line per package: the
wheel it resolved to. A package with no such wheel fails the check with pip's own words.

torch is fetched on its own, as docker/install.sh installs it: from PyTorch's CPU index where that answers.
Where it does not (our CI), PyPI's torch of the pinned version stands in, with ``--no-deps``: for aarch64 it
is the CUDA build, which the image does not install, so the requirements only CUDA needs (``nvidia-*``,
``cuda-*``, ``triton``) are left out and the rest (sympy, networkx, ...) resolved with the others.

pip evaluates environment markers for this machine, not for the target: a requirement marked for
``platform_machine`` would be judged as on this machine (pyproject's runtime dependencies carry none).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

REPO = Path(__file__).resolve().parents[1]
PYTHON = "3.11"  # the image's Python (Dockerfile: python:3.11-slim-bookworm)
BASE = "bookworm"
GLIBC = (2, 36)  # Debian bookworm's libc6
PLATFORMS = ["manylinux2014_aarch64", *(f"manylinux_2_{minor}_aarch64" for minor in range(17, GLIBC[1] + 1))]
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"  # the Dockerfile's default TORCH_INDEX
CUDA_ONLY = re.compile(r"^(nvidia-.*|cuda-.*|triton)$")


def runtime_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """[project].dependencies: what the image installs (the test extra is not)."""
    with pyproject.open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def pip_download(dest: Path, requirements: list[str], *options: str) -> subprocess.CompletedProcess[str]:
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", *platforms,
               "--python-version", PYTHON, "--implementation", "cp", "--only-binary=:all:", "--dest", str(dest),
               *options, *requirements]
    return subprocess.run(command, capture_output=True, text=True, timeout=1800)


def pip_words(done: subprocess.CompletedProcess[str]) -> str:
    """pip's errors, without its warnings about this machine's extra indexes that are not there."""
    return "\n".join(line for line in done.stderr.strip().splitlines() if not line.startswith("WARNING: Location"))


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def wheel_requirements(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA that no extra asks for."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    found = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    return [text for text in found if "extra" not in str(Requirement(text).marker or "")]


def not_for_cuda(requirements: list[str]) -> list[str]:
    return [text for text in requirements if not CUDA_ONLY.match(canonicalize_name(Requirement(text).name))]


def report(dest: Path) -> list[tuple[str, str, str]]:
    """(package, version, wheel file) for every file in ``dest``, by name; a file that is no wheel is an error."""
    rows = []
    for path in sorted(dest.iterdir()):
        if path.suffix != ".whl":
            raise SystemExit(f"arm64-wheels: {path.name} is not a wheel")
        name, version, _, _ = parse_wheel_filename(path.name)
        rows.append((str(name), str(version), path.name))
    return sorted(rows)


def check(dest: Path, torch_index: str | None) -> tuple[str, list[tuple[str, str, str]]]:
    """Download into ``dest``; returns where torch came from and the report. SystemExit with pip's words on failure."""
    requirements = runtime_requirements()
    torch = [text for text in requirements if canonicalize_name(Requirement(text).name) == "torch"]
    rest = [text for text in requirements if text not in torch]
    source = "PyTorch's CPU index" if torch_index else "PyPI (the CUDA build; its CUDA requirements left out)"
    if torch:
        torch_dest = dest / "torch"
        torch_dest.mkdir()
        index = ["--index-url", torch_index] if torch_index else []
        done = pip_download(torch_dest, torch, "--no-deps", *index)
        if done.returncode != 0:
            raise SystemExit(f"arm64-wheels: no aarch64 wheel of {torch[0]} on {source}:\n{pip_words(done)}")
        wheel = next(torch_dest.glob("*.whl"))
        rest += not_for_cuda(wheel_requirements(wheel))
        wheel.rename(dest / wheel.name)
        torch_dest.rmdir()
    done = pip_download(dest, rest)
    if done.returncode != 0:
        raise SystemExit(f"arm64-wheels: not every runtime dependency has an aarch64 wheel:\n{pip_words(done)}")
    return source, report(dest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-index", default=os.environ.get("TORCH_INDEX", TORCH_INDEX),
                        help="where the image takes torch from (empty: PyPI); PyPI stands in where it does not answer")
    args = parser.parse_args(argv)
    torch_index = args.torch_index or None
    if torch_index and not answers(torch_index.rstrip("/") + "/torch/"):
        print(f"arm64-wheels: {torch_index} does not answer here; torch is checked on PyPI instead")
        torch_index = None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="arm64-wheels-") as folder:
        source, rows = check(Path(folder), torch_index)
    print(f"arm64-wheels: CPython {PYTHON}, linux/arm64, glibc {GLIBC[0]}.{GLIBC[1]} ({BASE}): every runtime "
          f"dependency resolves to a wheel ({len(rows)} packages, {time.monotonic() - started:.0f} s; torch from {source})")
    for name, version, wheel in rows:
        print(f"  {name} {version}: {wheel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
