"""The drawing contract: a :class:`WorkOrder` in, a :class:`~inference.pipeline.Converted` or a
:class:`WorkFailed` out, drawn by a :class:`Drawer`.

Every place that draws goes through the same Drawer: the bot's own worker
processes (bot/drawing/local/), ``animebot worker`` over Celery
(bot/drawing/celery/) and ``animebot convert``. So a photo drawn by any of
them goes through the same models, the same face pass and the same
pipeline, and comes out the same.
"""
from __future__ import annotations

import ctypes
import logging
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NoReturn

from storage.errors import AnimebotError
from inference.backends import Stylizer, release_buffers
from inference.clip_settings import ClipSettings
from inference.detector import FaceDetector
from inference.engine import Backend, face_tools_for, load_detector, load_segmenter, load_stylizer, load_upscaler
from inference import scratch
from inference.pipeline import ConvertSettings, Converted, FaceTools, convert_bytes
from inference.segmentation import Segmenter
from inference.upscale import Upscaler, upscale_file
from weights.store import ModelStore

log = logging.getLogger("animebot.worker")

M_ARENA_MAX, M_MMAP_THRESHOLD = -8, -3  # from <malloc.h>


@dataclass(frozen=True)
class DrawerSpec:
    """What a Drawer needs to load its models; picklable, sent once to a spawned worker."""

    home: Path
    backend: Backend
    threads: int | None  # None: the engine's own choice (all cores)
    preload: str  # the style loaded at start, so the first photo does not wait for a compile


# What a worker is asked to do with an order's bytes: draw them in the style, or double a drawing's file by
# Real-CUGAN (HD). A new operation is a name here and a case of :meth:`Drawer.draw`, which the type checker
# makes handle every name; the kind that asks for it says so (bot/flow/kinds/), and docs/architecture.md says the rest.
Operation = Literal["draw", "double"]


@dataclass(frozen=True)
class WorkOrder:
    """One piece of work: the photo's (or clip's, or drawing's) bytes, its style, and what to do with them."""

    job_id: str
    data: bytes
    style: str
    settings: ConvertSettings
    clip: ClipSettings | None = None  # set: ``data`` is a clip, drawn frame by frame into an MP4
    operation: Operation = "draw"


@dataclass(frozen=True)
class WorkFailed:
    """A drawing that failed for a reason the user should be told (bad image, missing model)."""

    job_id: str
    code: str
    message: str
    values: dict[str, int | float] = field(default_factory=dict)  # the message's numbers, for other languages


@dataclass(frozen=True)
class Loaded:
    """What a :class:`Drawer` can do once loaded, for its ready line and for whoever sends it work."""

    engine: str  # e.g. "openvino bf16": OpenVINO says whether this CPU computes in bfloat16
    faces: str  # "on", or "off: why"
    styles: tuple[str, ...]  # every installed style; others are loaded on first use


def _guarded(job_id: str, work: Callable[[], Converted]) -> Converted | WorkFailed:
    """``work()``'s result, or a WorkFailed: an AnimebotError with its sentence for the user; a bug
    or a runtime failure as "internal", its traceback in the log, the process still serving."""
    try:
        return work()
    except AnimebotError as exc:
        return WorkFailed(job_id, exc.code, exc.message, exc.values)
    except Exception as exc:
        log.exception("job %s: unexpected failure in the worker", job_id)
        return WorkFailed(job_id, "internal", f"{exc.__class__.__name__}: {exc}")


def _no_such_operation(operation: NoReturn) -> NoReturn:
    """The last case of :meth:`Drawer.draw`'s match (typing's ``assert_never``, which Python 3.10 lacks): the
    type checker refuses an :data:`Operation` that no case handles."""
    raise AssertionError(f"no worker operation {operation!r}")


def return_freed_memory() -> None:
    """Have glibc give large freed blocks back to the system at once, in this process.

    A drawing frees hundreds of MB between passes (the whole image's buffers
    before the face pass). By default glibc raises its mmap threshold to the
    largest block freed so far and keeps later blocks of that size in
    per-thread arenas, so the freed memory stayed counted in the process's RSS
    and the next pass came on top of it: 20-30 MB more peak per photo with
    faces (docs/benchmarks.md, "Memory"). Blocks of 1 MB or more are now mapped
    and unmapped, and OpenVINO's threads share two arenas.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, 1 << 20)
        libc.mallopt(M_ARENA_MAX, 2)


class Drawer:
    """One process's models, loaded on first use, and the pipeline that draws with them.

    At most ``MODELS_KEPT`` styles stay loaded, the latest used: a scene
    style, the face style that draws its faces, and one more. With seven
    styles installed, "all styles" would otherwise leave every one of them
    compiled in every worker; loading one again costs a read of a 2-3 MB
    file and a compile, far less than the memory kept.
    """

    MODELS_KEPT = 3

    def __init__(self, spec: DrawerSpec) -> None:
        self.spec = spec
        self.store = ModelStore(spec.home)
        self._models: OrderedDict[str, Stylizer] = OrderedDict()
        self._detector: FaceDetector | None = None
        self._segmenter: Segmenter | None = None
        self._upscaler: Upscaler | None = None  # HD, loaded with the first doubling
        self.face_problem = ""  # why the face pass is off, once it failed to load: it is not tried again

    def load(self) -> Loaded:
        """Load the preload style and the face pass; an AnimebotError if the style does not load.
        First, clear the clips that drawing processes killed mid-clip left behind (inference/scratch.py)."""
        scratch.sweep()
        return_freed_memory()
        first = self.model(self.spec.preload)
        self.face_tools(self.spec.preload)
        return Loaded(engine=f"{first.backend} {getattr(first, 'precision', 'f32')}",
                      faces=f"off: {self.face_problem}" if self.face_problem else "on",
                      styles=tuple(e.name for e in self.store.installed("style")))

    def draw(self, order: WorkOrder, progress: Callable[[int, int], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> Converted | WorkFailed:
        """The drawing, or why not: a style not installed here or a bad photo is a WorkFailed with
        the sentence to pass on; so is a bug, whose traceback goes to the log. A clip reports each
        frame to ``progress(done, total)`` and stops when ``cancelled()`` says so. An order of another
        operation (a doubling) goes to its method."""
        match order.operation:
            case "draw":
                return _guarded(order.job_id, lambda: self._drawing(order, progress, cancelled))
            case "double":
                return self.hd(order.job_id, order.data, order.settings.fmt, order.settings.jpeg_quality)
            case unknown:
                _no_such_operation(unknown)

    def _drawing(self, order: WorkOrder, progress: Callable[[int, int], None] | None,
                 cancelled: Callable[[], bool] | None) -> Converted:
        """The photo or clip of ``order`` drawn in its style (raising what :func:`_guarded` turns into a WorkFailed)."""
        if order.clip is not None:
            from inference.clips import convert_clip  # PyAV (15 MB) with the first clip only

            model = self.model(order.style)
            self._release_others(model, None)
            cutter = self._cutter(order.settings) if order.clip.cut else None
            finder = self._finder(order.settings, None)
            return convert_clip(order.data, model, order.clip, progress, cancelled, cutter, finder).as_converted()
        tools = self.face_tools(order.style) if order.settings.faces else None
        model = self.model(order.style)
        self._release_others(model, tools)
        return convert_bytes(order.data, model, order.settings, tools, self._finder(order.settings, tools),
                             self._cutter(order.settings))

    def hd(self, job_id: str, data: bytes, fmt: str = "jpg", quality: int = 92) -> Converted | WorkFailed:
        """A result's file (``data``, as the user has it) doubled by Real-CUGAN, as a ``fmt`` file; or
        why not, as :meth:`draw` says it (HD not installed here, bytes that are no picture). The
        upscaler is loaded on first use and kept; every style's buffers are freed first, so the
        process peaks at HD's tile, not at both."""
        def doubling() -> Converted:
            self._upscaler = self._upscaler or load_upscaler(self.store, self.spec.backend, self.spec.threads)
            for model in self._models.values():
                release_buffers(model)
            return upscale_file(data, self._upscaler, fmt, quality)

        return _guarded(job_id, doubling)

    def model(self, style: str) -> Stylizer:
        """``style``'s model, loaded now unless it is one of the latest used; AnimebotError if it
        is not installed or does not load."""
        if style in self._models:
            self._models.move_to_end(style)
            return self._models[style]
        self.store.require_style(style)  # a name that is no style says what is installed instead
        while len(self._models) >= self.MODELS_KEPT:
            self._models.popitem(last=False)
        model = load_stylizer(self.store, style, self.spec.backend, self.spec.threads)
        self._models[style] = model
        return model

    def face_tools(self, style: str) -> FaceTools | None:
        """The face pass for ``style``; None (the whole-image pass only) if it has none, or if its
        models do not load (:attr:`face_problem` then says why).

        One detector serves every style, and face models come from the same
        cache as styles, so nothing is loaded twice. A style that does not
        load itself fails its order, not the face pass."""
        if self.face_problem or not self.store.require_style(style)[0].face_pass:
            return None
        self.model(style)
        try:
            return face_tools_for(self.store, style, self.model, self._the_detector)
        except AnimebotError as exc:
            self.face_problem = exc.message
            return None

    def _finder(self, settings: ConvertSettings, tools: FaceTools | None) -> FaceDetector | None:
        """The detector an avatar or sticker is cut by (a sticker's crop, and whether it has a person to
        cut out): the face pass's, or for a style with no face pass (sketch) or a clip the one detector;
        None when neither is asked for, or no detector is installed (the avatar is then the photo's
        centre, the sticker the whole photo, its mask alone saying whether it is a person)."""
        if not (settings.avatar or settings.cut):
            return None
        if tools is not None:
            return tools.detector
        try:
            return self._the_detector()
        except AnimebotError:
            return None

    def _cutter(self, settings: ConvertSettings) -> Segmenter | None:
        """The person segmentation a sticker is cut by; None when no cut is asked for, or the model is
        not installed here (the cut is then an oval, and the result says so). Looked for at each
        sticker, so a model installed while the bot runs is used from the next one."""
        if not settings.cut:
            return None
        if self._segmenter is None:
            try:
                self._segmenter = load_segmenter(self.store, self.spec.threads)
            except AnimebotError:
                return None
        return self._segmenter

    def _the_detector(self) -> FaceDetector:
        self._detector = self._detector or load_detector(self.store, self.spec.threads)
        return self._detector

    def _release_others(self, model: Stylizer, tools: FaceTools | None) -> None:
        """Free the buffers of every kept style but the two about to draw: a user trying each
        style in turn would otherwise leave each one's last pass allocated (796 MB measured
        after all seven, against 420 for one style)."""
        drawing = (model, tools.model if tools else model)
        for other in self._models.values():
            if not any(other is d for d in drawing):
                release_buffers(other)
