#!/bin/sh
# The image's install step: a virtualenv at $1 with CPU-only torch and animebot.
# CI runs this same script in a fresh virtualenv (.ci/docker-steps), since
# no Docker engine is available there.
#
# TORCH_INDEX is where the CPU build of torch comes from. PyPI's torch for
# Linux is the CUDA build (several GB); the image sets the PyTorch CPU index.
# Empty: take torch from pip's usual sources.
set -eu
venv="$1"
python3 -m venv "$venv"
"$venv/bin/pip" install --no-cache-dir --upgrade pip
if [ -n "${TORCH_INDEX:-}" ]; then
    "$venv/bin/pip" install --no-cache-dir --index-url "$TORCH_INDEX" torch==2.13.0
fi
"$venv/bin/pip" install --no-cache-dir .
