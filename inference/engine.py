"""Load an installed style as a ready-to-run :class:`Stylizer`.

This is the one place that knows which file format needs which loader, so
the CLI and the bot's workers load models the same way.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch

from inference.backends import OnnxStylizer, Stylizer, TorchStylizer
from inference import onnx_export
from inference.errors import ModelError
from inference.faces import FaceDetector
from inference.generator import Generator, GeneratorWidths
from inference.pipeline import FaceTools
from inference.tflite_import import load_tflite_generator
from inference.torchscript import load_or_export
from weights.hashing import file_digests
from weights.registry import ModelEntry
from weights.store import ModelStore

Backend = Literal["onnxruntime", "torchscript", "eager"]
# onnxruntime first: 1.5x the speed of TorchScript and eager on this net in one
# run of bench.speed, with outputs equal to eager's to ~82 dB (README, "Benchmarks").
BACKENDS: tuple[str, ...] = ("onnxruntime", "torchscript", "eager")
DEFAULT_BACKEND: Backend = "onnxruntime"


def build_generator(entry: ModelEntry, path: Path) -> Generator:
    """An AnimeGANv2 generator with the weights of an installed file, in eval mode."""
    if entry.format == "tflite":
        return load_tflite_generator(path)
    if entry.format == "pytorch":
        widths = GeneratorWidths.from_dict(entry.widths) if entry.widths else GeneratorWidths()
        net = Generator(widths, entry.upsample, entry.eps)  # type: ignore[arg-type]
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            net.load_state_dict(state, strict=True)
        except Exception as exc:
            raise ModelError(f"{entry.name}: the weights file does not load ({exc.__class__.__name__})") from exc
        return net.eval()
    raise ModelError(f"{entry.name}: format {entry.format!r} is not an AnimeGANv2 generator")


def load_stylizer(store: ModelStore, style: str, backend: Backend = DEFAULT_BACKEND,
                  threads: int | None = None) -> Stylizer:
    """Load ``style`` from the store on ``backend`` (ONNX styles always use onnxruntime)."""
    entry, path = store.require(style)
    if entry.kind != "style":
        raise ModelError(f"{style!r} is a {entry.kind}, not a style")
    if threads:
        torch.set_num_threads(threads)
    if entry.arch == "animeganv3":
        return OnnxStylizer(entry.name, _onnx_session(path, threads))
    if entry.format == "onnx":  # our own export, quantized (animebot quantize): NHWC, sizes of 4
        return OnnxStylizer(entry.name, _onnx_session(path, threads), multiple=4)
    net = build_generator(entry, path)
    if backend == "eager":
        return TorchStylizer(entry.name, "eager", net)
    digest = weights_digest(entry, path)
    if backend == "onnxruntime":
        return OnnxStylizer(entry.name, _exported_session(net, digest, store, threads), multiple=4)
    return TorchStylizer(entry.name, "torchscript", load_or_export(net, digest, store.cache_dir))


def weights_digest(entry: ModelEntry, path: Path) -> str:
    """What names these weights in the export caches: the published hash, else the file's sha256."""
    return entry.sha256 or entry.git_sha1 or file_digests(path)[0]


def _exported_session(net: Generator, digest: str, store: ModelStore, threads: int | None) -> object:
    """An onnxruntime session of our exported generator; a damaged cached export is redone once."""
    onnx_path = onnx_export.load_or_export(net, digest, store.cache_dir)
    try:
        return _onnx_session(onnx_path, threads)
    except ModelError:
        onnx_path.unlink(missing_ok=True)
        return _onnx_session(onnx_export.load_or_export(net, digest, store.cache_dir), threads)


FACE_STYLE = "face_paint_512_v2"  # trained on aligned 512 px faces; used for faces when installed
DETECTOR = "det_500m"


def face_style_for(store: ModelStore, style: str) -> str:
    """The style that draws faces for ``style``: the face model when installed, else ``style`` itself."""
    return FACE_STYLE if store.is_installed(store.entry(FACE_STYLE)) else style


def load_detector(store: ModelStore, threads: int | None = None) -> FaceDetector:
    """The installed face detector; ModelError says what is missing or broken."""
    return FaceDetector(store.path(store.entry(DETECTOR)), threads)


def load_face_tools(store: ModelStore, model: Stylizer, backend: Backend = DEFAULT_BACKEND,
                    threads: int | None = None) -> FaceTools:
    """The detector, and the model that draws faces for ``model``'s style (``model`` itself, not a
    second copy, when no face model is installed). ModelError or WeightsError says what is missing."""
    face_style = face_style_for(store, model.style)
    face_model = model if face_style == model.style else load_stylizer(store, face_style, backend, threads)
    return FaceTools(load_detector(store, threads), face_model)


def _onnx_session(path: Path, threads: int | None) -> object:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    # Memory patterns are planned per input shape and kept; every photo has its
    # own shape, so they only pile up: off, the 8 shared photos peak at 1141 MB
    # instead of 2123 MB, at the same speed.
    opts.enable_mem_pattern = False
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ModelError(f"{path.name}: onnxruntime cannot load this model ({exc.__class__.__name__})") from exc
