#!/bin/sh
# The image's install step: a virtualenv at $1 with CPU-only torch and animebot.
#
# TORCH_INDEX is where the CPU build of torch comes from. PyPI's torch for
# Linux is the CUDA build (several GB), on arm64 as on amd64 (torch 2.13.0's
# aarch64 wheel holds libtorch_cuda and requires CUDA 13's packages); the image
# sets the PyTorch CPU index, which pip asks for the machine's own architecture,
# so this step is the same for linux/amd64 and linux/arm64.
# Empty: take torch from pip's usual sources.
set -eu
venv="$1"
python3 -m venv "$venv"
"$venv/bin/pip" install --no-cache-dir --upgrade pip
if [ -n "${TORCH_INDEX:-}" ]; then
    "$venv/bin/pip" install --no-cache-dir --index-url "$TORCH_INDEX" torch==2.13.0
fi
"$venv/bin/pip" install --no-cache-dir .

# What nothing in a running bot or worker reads (docs/operations.md, "The image"):
# the packages' own test suites, torch's C++ test programs, and its C++ headers,
# which only compiling an extension would need (the image has no compiler).
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
find "$site" -depth -type d -name tests -exec rm -rf {} +
rm -rf "$site/torch/test" "$site/torch/include"
