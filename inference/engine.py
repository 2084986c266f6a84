"""Load an installed style as a ready-to-run :class:`Stylizer`.

This is the one place that knows which file format needs which loader, so
the CLI and the bot's workers load models the same way. Torch is imported
only for the torch backends and to make an ONNX export the cache lacks.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from inference import onnx_export
from inference.backends import OnnxStylizer, OpenVinoStylizer, Stylizer, TorchStylizer, onnx_session
from inference.errors import ModelError
from inference.detector import FaceDetector
from inference.faces import FACE_MODEL_CROP, Framing
from inference.pipeline import FaceTools
from weights.hashing import file_digests, key_for
from weights.registry import ModelEntry
from weights.store import ModelStore

if TYPE_CHECKING:
    from torch import nn

    from inference.upscale import Upscaler

    from inference.segmentation import Segmenter

    from inference.generator import Generator

T = TypeVar("T")
Backend = Literal["openvino", "onnxruntime", "torchscript", "eager"]
# OpenVINO first: in bench.speed it is the fastest backend by far, at no
# visible cost against the reference (docs/benchmarks.md has the numbers).
BACKENDS: tuple[str, ...] = ("openvino", "onnxruntime", "torchscript", "eager")
DEFAULT_BACKEND: Backend = "openvino"


def build_generator(entry: ModelEntry, path: Path) -> nn.Module:
    """The PyTorch net with the weights of an installed file, in eval mode: an AnimeGANv2
    generator, or the White-box cartoon generator with its guided filter."""
    if entry.arch == "whitebox":
        from inference.whitebox import load_whitebox_generator

        return load_whitebox_generator(path)
    return build_animeganv2(entry, path)


def build_animeganv2(entry: ModelEntry, path: Path) -> Generator:
    """An AnimeGANv2 generator (the kind we can prune and quantize) from a TFLite or PyTorch file."""
    import torch

    from inference.generator import Generator, GeneratorWidths

    if entry.format == "tflite":
        from inference.tflite_import import load_tflite_generator

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
    """Load ``style`` from the store on ``backend``.

    ONNX styles run on OpenVINO when that is the backend, else on onnxruntime."""
    entry, path = store.require(style)
    if entry.kind != "style":
        raise ModelError(f"{style!r} is a {entry.kind}, not a style")
    # AnimeGANv3 files say their own rule (16 for tiny Cute, 8 or 32 for the
    # others); our exports of rebuilt nets need sides of 4.
    multiple = entry.multiple or (16 if entry.arch == "animeganv3" else 4)
    if entry.format == "onnx":
        if backend == "openvino":
            return _openvino(store, entry, path, threads)
        return OnnxStylizer(entry.name, onnx_session(path, threads), multiple, entry.min_side)
    if backend == "openvino":
        return _from_export(store, entry, path, lambda onnx: _openvino(store, entry, onnx, threads))
    if backend == "onnxruntime":
        session = _from_export(store, entry, path, lambda onnx: onnx_session(onnx, threads))
        return OnnxStylizer(entry.name, session, multiple, entry.min_side)
    import torch

    from inference.torchscript import load_or_export

    if threads:
        torch.set_num_threads(threads)
    net = build_generator(entry, path)
    if backend == "eager":
        return TorchStylizer(entry.name, "eager", net, multiple, entry.min_side)
    ident = {**_export_ident(entry, path), "torch": torch.__version__, "torchscript": 2}
    scripted = load_or_export(net, key_for(ident), store.cache_dir)
    return TorchStylizer(entry.name, "torchscript", scripted, multiple, entry.min_side)


def weights_digest(entry: ModelEntry, path: Path) -> str:
    """What names these weights in the export caches: the published hash, else the file's sha256."""
    return entry.sha256 or entry.git_sha1 or file_digests(path)[0]


def exported_onnx(store: ModelStore, entry: ModelEntry, path: Path) -> Path:
    """Our ONNX export of an AnimeGANv2 style, made on first use and cached.

    Its name comes from the registry entry, not the built net, so a worker
    finds the file without importing torch."""
    ident = {**_export_ident(entry, path), "export": 5}
    return onnx_export.load_or_export(lambda: build_generator(entry, path), key_for(ident), store.cache_dir)


def _export_ident(entry: ModelEntry, path: Path) -> dict[str, object]:
    """Everything about an entry that changes the net :func:`build_generator` makes."""
    ident: dict[str, object] = {"weights": weights_digest(entry, path), "format": entry.format,
                                "widths": entry.widths, "upsample": entry.upsample, "eps": entry.eps}
    if entry.arch != "animeganv2":  # keeps the keys of existing caches
        ident["arch"] = entry.arch
    return ident


def _openvino(store: ModelStore, entry: ModelEntry, path: Path, threads: int | None) -> OpenVinoStylizer:
    try:
        return OpenVinoStylizer(entry.name, path, threads, entry.multiple or 16, entry.min_side,
                                _openvino_cache(store))
    except Exception as exc:
        raise ModelError(f"{path.name}: OpenVINO cannot load this model ({exc.__class__.__name__})") from exc


def _openvino_cache(store: ModelStore) -> Path:
    """Where OpenVINO keeps the shapes it compiled, for styles and the detector alike."""
    return store.cache_dir / "openvino"


def _from_export(store: ModelStore, entry: ModelEntry, path: Path, load: Callable[[Path], T]) -> T:
    """``load`` applied to our cached export; a damaged export is made again, once."""
    onnx_path = exported_onnx(store, entry, path)
    try:
        return load(onnx_path)
    except ModelError:
        onnx_path.unlink(missing_ok=True)
        return load(exported_onnx(store, entry, path))


DETECTOR = "det_500m"
SEGMENTER = "selfie"
UPSCALER = "realcugan_up2x"


def load_upscaler(store: ModelStore, backend: Backend = DEFAULT_BACKEND, threads: int | None = None) -> Upscaler:
    """HD: the installed Real-CUGAN, rebuilt from its ncnn files into a cached ONNX graph. It runs on
    OpenVINO whatever ``backend`` is, but onnxruntime (the check): it has no PyTorch form for the
    torch backends. WeightsError says how to install it, ModelError what is wrong with it."""
    from inference.upscale import from_ncnn

    entry, weights = store.require(UPSCALER)
    param = store.path(store.entry(entry.parts[0]))
    return from_ncnn(param, weights, weights_digest(entry, weights), store.cache_dir,
                "onnxruntime" if backend == "onnxruntime" else "openvino", threads)


def face_style_for(store: ModelStore, style: str) -> str:
    """The style that draws faces for ``style``: the first installed of its registry
    ``face_styles`` (``jp_face`` for the scene styles), else ``style`` itself."""
    wanted = store.entry(style).face_styles
    return next((name for name in wanted if store.is_installed(store.entry(name))), style)


def load_detector(store: ModelStore, threads: int | None = None) -> FaceDetector:
    """The installed face detector; ModelError says what is missing or broken."""
    return FaceDetector(store.path(store.entry(DETECTOR)), threads, cache_dir=_openvino_cache(store))


def load_segmenter(store: ModelStore, threads: int | None = None) -> Segmenter:
    """The installed person segmentation, from its cached ONNX export (made on first use, with torch);
    WeightsError or ModelError says what is missing or broken."""
    from inference.segmentation import Segmenter, exported

    entry, path = store.require(SEGMENTER)
    return Segmenter(exported(path, weights_digest(entry, path), store.cache_dir), threads)


def face_tools_for(store: ModelStore, style: str, model_for: Callable[[str], Stylizer],
                   detector_for: Callable[[], FaceDetector]) -> FaceTools | None:
    """The face pass for ``style``: the detector, and the model that draws its faces (the first
    installed of its ``face_styles``, else the style itself); None for a style with no face pass
    (sketch). This is the one place that decides it: the models come from ``model_for`` and the
    detector from ``detector_for``, so a :class:`~inference.drawer.Drawer` hands in its loaded
    ones and nothing is loaded twice. ModelError or WeightsError says what is missing."""
    if not store.entry(style).face_pass:
        return None
    face_style = face_style_for(store, style)
    face_model = model_for(face_style)
    return FaceTools(detector_for(), face_model, crop_framing(store.entry(face_style)))


def load_face_tools(store: ModelStore, model: Stylizer, backend: Backend = DEFAULT_BACKEND,
                    threads: int | None = None) -> FaceTools | None:
    """:func:`face_tools_for` ``model``'s style, for a caller that holds one loaded model (tests,
    bench): ``model`` itself draws the faces, not a second copy, when no face model is installed."""
    return face_tools_for(store, model.style,
                          lambda name: model if name == model.style else load_stylizer(store, name, backend, threads),
                          lambda: load_detector(store, threads))


def crop_framing(entry: ModelEntry) -> Framing:
    """How ``entry`` is given face crops: a face model one tight crop with the face as big as at
    its training size, a scene style any of faces.CROP_SIZES."""
    return Framing((FACE_MODEL_CROP,), entry.train_size) if entry.look == "face" else Framing()
