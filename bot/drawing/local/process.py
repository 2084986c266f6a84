"""The inside of one inference worker process.

A worker loads its models once and then converts whatever arrives on its
pipe: photo bytes in, encoded anime bytes out. Decoding, resizing and
encoding happen here too, so the bot's event loop only moves bytes.
A clip's frames are reported up the pipe as they are drawn, and a cancel
can come down it between frames. It runs in a fresh (spawned) interpreter, so nothing here may rely on state
of the parent process.

The drawing itself is :class:`Drawer`, which ``animebot worker``
(bot/drawing/celery/worker.py) uses as well: a photo drawn there or here goes through
the same models and the same pipeline, so it comes out the same.
"""
from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from inference.backends import Stylizer, release_buffers
from inference.clip_settings import ClipSettings
from inference.detector import FaceDetector
from inference.engine import crop_framing, face_style_for, load_detector, load_stylizer
from inference.errors import AnimebotError
from inference.pipeline import ConvertSettings, Converted, FaceTools, convert_bytes
from weights.store import ModelStore


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to know to start; picklable, sent once at spawn."""

    home: Path
    backend: str
    threads: int
    preload: str


@dataclass(frozen=True)
class WorkOrder:
    job_id: str
    data: bytes
    style: str
    settings: ConvertSettings
    clip: ClipSettings | None = None  # set: ``data`` is a clip, drawn frame by frame into an MP4


# A clip's worker tells the bot how far it got at most this often (the status message is edited less often).
PROGRESS_EVERY_S = 1.0
CANCEL = "cancel"  # what the bot sends down a worker's pipe to stop the clip being drawn


@dataclass(frozen=True)
class WorkFailed:
    """A conversion that failed for a reason the user should be told (bad image, missing model)."""

    job_id: str
    code: str
    message: str


log = logging.getLogger("animebot.worker")

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
M_ARENA_MAX, M_MMAP_THRESHOLD = -8, -3  # from <malloc.h>


def _obey_the_parent_only() -> None:
    """Stop only when the bot says so, and never outlive it.

    A Ctrl-C in a terminal, systemd's default KillMode, ``kill -TERM -PGID``
    and ``timeout`` all signal the whole process group; the bot's graceful
    stop must decide when the photo being drawn is done, so SIGINT and
    SIGTERM are ignored here. If the bot itself dies (``kill -9``), the
    kernel kills the worker too (see :func:`die_with_parent`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = mp.parent_process()
    if parent is not None and parent.pid is not None:
        die_with_parent(parent.pid)


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux), instead of leaving it to
    finish a photo nobody will send and to write into the next run's log; exit now if the parent
    (``parent_pid``) is already gone."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before prctl took effect
        os._exit(0)


def return_freed_memory() -> None:
    """Have glibc give large freed blocks back to the system at once, in this process.

    A worker frees hundreds of MB between passes (the whole image's buffers
    before the face pass). By default glibc raises its mmap threshold to the
    largest block freed so far and keeps later blocks of that size in
    per-thread arenas, so the freed memory stayed counted in the worker's RSS
    and the next pass came on top of it: 20-30 MB more peak per photo with
    faces (docs/benchmarks.md, "Memory"). Blocks of 1 MB or more are now mapped and
    unmapped, and OpenVINO's threads share two arenas.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, 1 << 20)
        libc.mallopt(M_ARENA_MAX, 2)


@dataclass(frozen=True)
class Loaded:
    """What a :class:`Drawer` can do once loaded, for its ready line and for whoever sends it work."""

    engine: str  # e.g. "openvino bf16": OpenVINO says whether this CPU computes in bfloat16
    faces: str  # "on", or "off: why"
    styles: tuple[str, ...]  # every installed style; others are loaded on first use


class Drawer:
    """One process's models, loaded on first use, and the pipeline that draws with them.

    At most ``MODELS_KEPT`` styles stay loaded, the latest used: a scene
    style, the face style that draws its faces, and one more. With seven
    styles installed, "all styles" would otherwise leave every one of them
    compiled in every worker; loading one again costs a read of a 2-3 MB
    file and a compile, far less than the memory kept.
    """

    MODELS_KEPT = 3

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.store = ModelStore(spec.home)
        self._models: OrderedDict[str, Stylizer] = OrderedDict()
        self._detector: FaceDetector | None = None
        self._face_problem = ""

    def load(self) -> Loaded:
        """Load the preload style and the face pass; an AnimebotError if the style does not load."""
        return_freed_memory()
        first = self._model(self.spec.preload)
        self._faces(self.spec.preload)
        return Loaded(engine=f"{first.backend} {getattr(first, 'precision', 'f32')}",
                      faces=f"off: {self._face_problem}" if self._face_problem else "on",
                      styles=tuple(e.name for e in self.store.installed("style")))

    def draw(self, order: WorkOrder, progress: Callable[[int, int], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> Converted | WorkFailed:
        """The drawing, or why not: a style not installed here or a bad photo is a WorkFailed with
        the sentence to pass on; so is a bug, whose traceback goes to the log. A clip reports each
        frame to ``progress(done, total)`` and stops when ``cancelled()`` says so."""
        try:
            if order.clip is not None:
                from inference.clips import convert_clip  # PyAV (15 MB) with the first clip only

                model = self._model(order.style)
                self._release_others(model, None)
                return convert_clip(order.data, model, order.clip, progress, cancelled).as_converted()
            tools = self._faces(order.style) if order.settings.faces else None
            model = self._model(order.style)
            self._release_others(model, tools)
            return convert_bytes(order.data, model, order.settings, tools)
        except AnimebotError as exc:
            return WorkFailed(order.job_id, exc.code, exc.message)
        except Exception as exc:  # a bug or a runtime failure: keep its traceback, keep serving
            log.exception("job %s: unexpected failure in the worker", order.job_id)
            return WorkFailed(order.job_id, "internal", f"{exc.__class__.__name__}: {exc}")

    def _release_others(self, model: Stylizer, tools: FaceTools | None) -> None:
        """Free the buffers of every kept style but the two about to draw: a user trying each
        style in turn would otherwise leave each one's last pass allocated (796 MB measured
        after all seven, against 420 for one style)."""
        drawing = (model, tools.model if tools else model)
        for other in self._models.values():
            if not any(other is d for d in drawing):
                release_buffers(other)

    def _model(self, style: str) -> Stylizer:
        if style in self._models:
            self._models.move_to_end(style)
            return self._models[style]
        self.store.require_style(style)  # a name that is no style says what is installed instead
        while len(self._models) >= self.MODELS_KEPT:
            self._models.popitem(last=False)
        model = load_stylizer(self.store, style, self.spec.backend, self.spec.threads)  # type: ignore[arg-type]
        self._models[style] = model
        return model

    def _faces(self, style: str) -> FaceTools | None:
        """The face pass for ``style``; None (the whole-image pass only) if its models do not load.

        One detector serves every style, and face models come from the same
        cache as styles, so nothing is loaded twice."""
        if self._face_problem or not self.store.require_style(style)[0].face_pass:
            return None
        face_style = face_style_for(self.store, style)
        if face_style == style:
            face_model = self._model(style)  # a style that does not load fails its order, not the face pass
        try:
            self._detector = self._detector or load_detector(self.store, self.spec.threads)
            if face_style != style:
                face_model = self._model(face_style)
        except AnimebotError as exc:
            self._face_problem = exc.message
            return None
        return FaceTools(self._detector, face_model, crop_framing(self.store.entry(face_style)))


def worker_main(conn: Connection, spec: WorkerSpec) -> None:
    """Worker main loop. Sends ``("ready", pid, Loaded)`` or ``("failed", message)`` first."""
    _obey_the_parent_only()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    drawer = Drawer(spec)
    try:
        loaded = drawer.load()
    except AnimebotError as exc:
        conn.send(("failed", exc.message))
        return
    conn.send(("ready", os.getpid(), loaded))
    while True:
        try:
            order: WorkOrder | None = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if order is None:
            return
        if order == CANCEL:  # came after its clip was done: nothing to stop
            continue
        try:
            conn.send(drawer.draw(order, _Progress(conn), lambda: _cancel_asked(conn)))
        except OSError:  # the bot is gone (BrokenPipeError): nobody to answer
            return


class _Progress:
    """Sends ``("progress", done, total)`` up the pipe, at most every PROGRESS_EVERY_S and at the end."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sent_at = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.sent_at >= PROGRESS_EVERY_S or done == total:
            self.sent_at = now
            self.conn.send(("progress", done, total))


def _cancel_asked(conn: Connection) -> bool:
    """Whether the bot sent CANCEL while a clip is drawn (nothing else comes down the pipe then)."""
    return conn.poll() and conn.recv() == CANCEL
