"""Runners that apply one style model to one padded image.

Every backend takes and returns float32 HWC arrays in [-1, 1], so the image
pipeline never needs to know whether PyTorch, onnxruntime or OpenVINO does
the work. Nothing here imports torch at module level: a worker that runs an
ONNX model never loads it (about 190 MB of RSS). How an onnxruntime session is
opened (:func:`onnx_session`) is here too, for the segmentation net as for the
styles: the engine loads styles and imports the segmentation module, so that
module cannot reach into the engine for it.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from inference.errors import ModelError

if TYPE_CHECKING:
    import torch


class Stylizer(Protocol):
    """A loaded style model: ``multiple`` is the size both sides must divide by, and
    ``min_side`` the least each side may be (AnimeGANv3 nets were made for 256 or more)."""

    style: str
    backend: str
    multiple: int
    min_side: int

    def __call__(self, x: np.ndarray) -> np.ndarray: ...


def release_buffers(model: Stylizer) -> None:
    """Free the buffers ``model`` keeps between inferences, where its backend keeps any (OpenVINO:
    hundreds of MB at 720 px); the model stays loaded and compiled."""
    release = getattr(model, "release", None)
    if release is not None:
        release()


@dataclass
class TorchStylizer:
    """An AnimeGANv2 generator, eager or TorchScript (NCHW inside)."""

    style: str
    backend: str
    module: torch.nn.Module | torch.jit.ScriptModule
    multiple: int = 4
    min_side: int = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            t = torch.from_numpy(x).permute(2, 0, 1).unsqueeze(0)
            return self.module(t)[0].permute(1, 2, 0).numpy()


@dataclass
class OnnxStylizer:
    """An ONNX model through onnxruntime; AnimeGANv3 exports take NHWC directly.

    Some published AnimeGANv3 files were cast to float16, inputs and outputs
    included; they get float16 in and give float32 back, like the rest.
    """

    style: str
    session: object  # onnxruntime.InferenceSession
    multiple: int = 16
    min_side: int = 0
    backend: str = "onnxruntime"

    def __call__(self, x: np.ndarray) -> np.ndarray:
        feed = self.session.get_inputs()[0]  # type: ignore[attr-defined]
        dtype = np.float16 if feed.type == "tensor(float16)" else np.float32
        y = self.session.run(None, {feed.name: x[None].astype(dtype, copy=False)})[0][0]  # type: ignore[attr-defined]
        return y.astype(np.float32, copy=False)


def onnx_session(path: Path, threads: int | None) -> object:
    """An onnxruntime session on the CPU, for a style or the segmentation model; one that cannot be
    loaded is a ModelError."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    # Memory patterns are planned per input shape and kept; every photo has its
    # own shape, so they only pile up: off, peak memory is about halved at the
    # same speed (measured on the shared photos).
    opts.enable_mem_pattern = False
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ModelError(f"{path.name}: onnxruntime cannot load this model ({exc.__class__.__name__})") from exc


class OpenVinoStylizer:
    """An ONNX model (NHWC) compiled by OpenVINO for each image shape it meets.

    Static shapes, not one dynamic model: on 2 cores the dynamic model ran 15%
    slower and peaked at 827 MB over the bench photos against 563 MB, while
    compiling a shape costs about 0.3 s. Only the latest shape stays compiled:
    even with its buffers released, a compiled shape keeps 15-25 MB, and a
    shape met again loads from OpenVINO's model cache in 0.08 s, mostly
    while the next photo decodes (a face model meets one shape only). Sides
    are padded to multiples of 16, where OpenVINO's kernels are fastest per
    pixel (720x1088 took 0.87 s, 720x1080 0.95 s), and which makes fewer shapes.
    On a CPU with bfloat16 units (AMX, AVX-512 BF16) OpenVINO computes in
    bfloat16 by default, 4x faster than its fp32 and 53 dB from it at 720x544
    (docs/benchmarks.md); elsewhere it computes in fp32. ``precision`` says which.
    A float16 file's inputs and outputs are converted inside the compiled
    model, so callers pass and get float32 as with any other.
    """

    backend = "openvino"
    keep = 1

    def __init__(self, style: str, path: Path, threads: int | None = None, multiple: int = 16,
                 min_side: int = 0, cache_dir: Path | None = None) -> None:
        import openvino as ov

        self.style = style
        self.multiple = max(16, multiple)  # both are powers of two: 16 keeps the fast kernels
        self.min_side = min_side
        self._core = ov.Core()
        self._model = _float32_io(self._core.read_model(str(path)))
        self._config = openvino_config(threads, cache_dir)
        self.precision: str = self._core.get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
        self._compiled: OrderedDict[tuple[int, ...], tuple[object, object]] = OrderedDict()
        self._batches = True  # until the graph refuses one
        self._lock = threading.Lock()  # prepare() compiles from another thread

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.many(x[None])[0]

    def many(self, x: np.ndarray) -> np.ndarray:
        with self._lock:
            return self._many(x)

    def _many(self, x: np.ndarray) -> np.ndarray:
        """A batch (NHWC) in one inference, where the graph takes one; else one image at a time.

        Our exports of AnimeGANv2 take any batch. The AnimeGANv3 files do not:
        their attention block reshapes with a batch of 1 written into the graph.
        """
        if len(x) > 1 and not self._batches:
            return np.stack([self._many(one[None])[0] for one in x])
        try:
            request = self._request(x.shape)
        except RuntimeError:  # the graph's shapes refuse this batch
            if len(x) == 1:
                raise
            self._batches = False
            return self._many(x)
        request.infer({0: np.ascontiguousarray(x)})  # type: ignore[attr-defined]
        return request.get_output_tensor(0).data.copy()  # type: ignore[attr-defined]

    def release(self) -> None:
        """Free every compiled shape's intermediate buffers (hundreds of MB at 720 px), keeping the
        shapes compiled: the next inference allocates them again, which costs about 0.04 s, where
        loading a shape from OpenVINO's model cache cost 0.1 s and a slow first inference."""
        with self._lock:
            for compiled, _ in self._compiled.values():
                compiled.release_memory()  # type: ignore[attr-defined]

    def prepare(self, shape: tuple[int, ...]) -> None:
        """Compile ``shape`` now (from another thread, while the photo decodes), so the drawing
        finds it ready. A shape that fails here fails again, with its error, when it is drawn."""
        with self._lock:
            try:
                self._request(shape)
            except Exception:  # reported by the call that needs it
                pass

    def _request(self, shape: tuple[int, ...]) -> object:
        """The infer request compiled for ``shape``, made now if it is not among the latest."""
        if shape in self._compiled:
            self._compiled.move_to_end(shape)
            return self._compiled[shape][1]
        model = self._model.clone()  # type: ignore[attr-defined]
        model.reshape({model.input(0): list(shape)})
        while len(self._compiled) >= self.keep:
            self._compiled.popitem(last=False)  # frees its buffers before the next one is made
        compiled = self._core.compile_model(model, "CPU", self._config)
        self._compiled[shape] = (compiled, compiled.create_infer_request())
        return self._compiled[shape][1]


def openvino_config(threads: int | None, cache_dir: Path | None) -> dict[str, object]:
    """How every model here is compiled for the CPU: for one image at a time, on ``threads``
    threads, and kept in OpenVINO's model cache under ``cache_dir``, so a restart loads a
    compiled shape instead of compiling it again."""
    config: dict[str, object] = {"PERFORMANCE_HINT": "LATENCY"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    if cache_dir is not None:
        config["CACHE_DIR"] = str(cache_dir)
    return config


def _float32_io(model: object) -> object:
    """``model`` with float32 image tensors at its edges, whatever its own input and output types."""
    import openvino as ov

    ppp = ov.preprocess.PrePostProcessor(model)
    changed = False
    if model.input(0).get_element_type() != ov.Type.f32:  # type: ignore[attr-defined]
        ppp.input(0).tensor().set_element_type(ov.Type.f32)
        changed = True
    if model.output(0).get_element_type() != ov.Type.f32:  # type: ignore[attr-defined]
        ppp.output(0).tensor().set_element_type(ov.Type.f32)
        changed = True
    return ppp.build() if changed else model
