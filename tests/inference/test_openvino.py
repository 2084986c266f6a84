"""The default backend, OpenVINO: same pictures as eager PyTorch, any size, no torch in the worker."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from inference.backends import OpenVinoStylizer, TorchStylizer
from inference.engine import DEFAULT_BACKEND, exported_onnx, load_stylizer
from inference.onnx_export import export
from inference.pipeline import resize, stylize
from testkit.bot_harness import REPO
from testkit.pictures import psnr
from weights.store import ModelStore

pytestmark = pytest.mark.slow  # every test here compiles OpenVINO models


def tiny_openvino(tiny_model: TorchStylizer, tmp_path: Path) -> OpenVinoStylizer:
    onnx = tmp_path / "tiny.onnx"
    onnx.write_bytes(export(tiny_model.module))
    return OpenVinoStylizer("tiny", onnx, threads=1)


def test_openvino_is_the_default_and_draws_hayao_as_eager_does(real_store: ModelStore, photos: list[Path]) -> None:
    assert DEFAULT_BACKEND == "openvino"
    fast = load_stylizer(real_store, "hayao")
    assert fast.backend == "openvino" and fast.multiple == 16
    eager = load_stylizer(real_store, "hayao", "eager")
    for photo in photos[:2]:
        img = resize(Image.open(photo).convert("RGB"), 300)  # sides that are not multiples of 16
        ours, ref = stylize(img, fast), stylize(img, eager)
        assert ours.size == img.size
        # bfloat16 on CPUs that have it (about 45 dB on photos), fp32 elsewhere; 38 dB is visually lossless.
        assert psnr(np.asarray(ours), np.asarray(ref)) >= 38.0, photo.name


def test_a_shape_seen_again_gives_the_same_picture(tiny_model: TorchStylizer, tmp_path: Path) -> None:
    model = tiny_openvino(tiny_model, tmp_path)
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(-1, 1, shape).astype(np.float32) for shape in ((32, 48, 3), (48, 32, 3), (16, 64, 3)))
    first = model(a)
    for other in (b, c):  # a is compiled again after two other shapes
        assert model(other).shape == other.shape
    assert np.array_equal(model(a), first)
    assert np.abs(first - tiny_model(a)).max() < 0.05  # bfloat16 rounding at most


def test_released_buffers_come_back_without_a_compile(tiny_model: TorchStylizer, tmp_path: Path) -> None:
    """A worker frees a pass's buffers between passes; the shape stays compiled, the picture the same."""
    model = tiny_openvino(tiny_model, tmp_path)
    x = np.random.default_rng(3).uniform(-1, 1, (32, 48, 3)).astype(np.float32)
    first = model(x)
    compiled = dict(model._compiled)
    model.release()
    assert np.array_equal(model(x), first)
    assert model._compiled == compiled  # the same compiled model, not a new one


def test_stylize_pads_odd_sizes_for_openvino(tiny_model: TorchStylizer, tmp_path: Path) -> None:
    model = tiny_openvino(tiny_model, tmp_path)
    img = Image.fromarray(np.random.default_rng(1).integers(0, 255, (37, 61, 3), np.uint8))
    assert stylize(img, model).size == (61, 37)


def test_a_worker_on_the_cached_export_never_imports_torch(real_store: ModelStore) -> None:
    """torch costs a worker about 190 MB; with the export cached, OpenVINO needs none of it."""
    entry, path = real_store.require("hayao")
    exported_onnx(real_store, entry, path)  # made once, as the bot's first start does
    script = (
        "import sys\nfrom pathlib import Path\nimport numpy as np\n"
        "from inference.engine import load_stylizer\n"
        "from weights.store import ModelStore\n"
        f"model = load_stylizer(ModelStore(Path({str(real_store.home)!r})), 'hayao')\n"
        "assert model(np.zeros((64, 48, 3), np.float32)).shape == (64, 48, 3)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_the_export_writes_norms_out_so_openvino_keeps_one_layout(tiny_model: TorchStylizer) -> None:
    """GroupNorm exported as reshape + InstanceNormalization cost OpenVINO a layout change around every
    norm (0.49 s against 0.30 s for Hayao at 720x544)."""
    import onnx

    graph = onnx.load_from_string(export(tiny_model.module)).graph
    ops = {node.op_type for node in graph.node}
    assert "InstanceNormalization" not in ops and "ReduceMean" in ops
