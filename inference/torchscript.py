"""TorchScript export of a generator, cached on disk by what determines it.

Tracing, freezing and optimising takes seconds; a worker that restarts
should not pay it again. The cache key covers the weights' hash, the layer
widths, the upsampling grid and the torch version, so a changed input never
reuses a stale artifact.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

import torch

from inference.generator import Generator


def cache_key(weights_digest: str, net: Generator) -> str:
    ident = {
        "weights": weights_digest,
        "widths": net.widths.to_dict(),
        "upsample": net.upsample,
        "eps": net.block_a[0][2].eps,
        "torch": torch.__version__,
        "format": 1,
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:24]


def export(net: Generator) -> torch.jit.ScriptModule:
    """Trace, freeze and optimise a generator for inference on any input size."""
    net = net.eval()
    example = torch.zeros(1, 3, 64, 64)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(net, example)
        frozen = torch.jit.freeze(traced)
        return torch.jit.optimize_for_inference(frozen)


def load_or_export(net: Generator, weights_digest: str, cache_dir: Path) -> torch.jit.ScriptModule:
    """The cached TorchScript module for ``net``, exporting and saving it on first use."""
    path = cache_dir / "torchscript" / f"{cache_key(weights_digest, net)}.pt"
    if path.is_file():
        try:
            return torch.jit.load(str(path), map_location="cpu")
        except Exception:
            path.unlink(missing_ok=True)  # a damaged cache entry is rebuilt, not fatal
    module = export(net)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".partial-", suffix=".pt", dir=path.parent)
    os.close(fd)
    try:
        torch.jit.save(module, tmp)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return module
