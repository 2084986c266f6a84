"""The inside of one inference worker process.

A worker loads its models once and then converts whatever arrives on its
pipe: photo bytes in, encoded anime bytes out. Decoding, resizing and
encoding happen here too, so the bot's event loop only moves bytes.
It runs in a fresh (spawned) interpreter, so nothing here may rely on state
of the parent process.
"""
from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import signal
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from inference.backends import Stylizer
from inference.errors import AnimebotError
from inference.pipeline import ConvertSettings, Converted


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


@dataclass(frozen=True)
class WorkFailed:
    """A conversion that failed for a reason the user should be told (bad image, missing model)."""

    job_id: str
    code: str
    message: str


log = logging.getLogger("animebot.worker")

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _obey_the_parent_only() -> None:
    """Stop only when the bot says so, and never outlive it.

    A Ctrl-C in a terminal, systemd's default KillMode, ``kill -TERM -PGID``
    and ``timeout`` all signal the whole process group; the bot's graceful
    stop must decide when the photo being drawn is done, so SIGINT and
    SIGTERM are ignored here. If the bot itself dies (``kill -9``), the
    kernel kills the worker too (Linux), instead of leaving it to finish a
    photo nobody will send and to write into the next run's log.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    parent = mp.parent_process()
    if parent is not None and os.getppid() != parent.pid:  # it died before prctl took effect
        os._exit(0)


def serve(conn: Connection, spec: WorkerSpec) -> None:
    """Worker main loop. Sends ``("ready", pid)`` or ``("failed", message)`` first."""
    _obey_the_parent_only()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from inference.engine import face_style_for, load_detector, load_stylizer
    from inference.faces import FaceDetector
    from inference.pipeline import FaceTools, convert_bytes
    from weights.store import ModelStore

    store = ModelStore(spec.home)
    models: dict[str, Stylizer] = {}
    detector: FaceDetector | None = None
    face_problem = ""

    def model(style: str) -> Stylizer:
        if style not in models:
            models[style] = load_stylizer(store, style, spec.backend, spec.threads)  # type: ignore[arg-type]
        return models[style]

    def faces(style: str) -> FaceTools | None:
        """The face pass for ``style``; None (the whole-image pass only) if its models do not load.

        One detector serves every style, and face models come from the same
        cache as styles, so nothing is loaded twice."""
        nonlocal detector, face_problem
        if face_problem:
            return None
        face_style = face_style_for(store, style)
        if face_style == style:
            face_model = model(style)  # a style that does not load fails its order, not the face pass
        try:
            detector = detector or load_detector(store, spec.threads)
            if face_style != style:
                face_model = model(face_style)
        except AnimebotError as exc:
            face_problem = exc.message
            return None
        return FaceTools(detector, face_model)

    try:
        first = model(spec.preload)
    except AnimebotError as exc:
        conn.send(("failed", exc.message))
        return
    faces(spec.preload)
    # OpenVINO says whether this CPU computes in bfloat16; the operator's log should too.
    engine = f"{first.backend} {getattr(first, 'precision', 'f32')}"
    conn.send(("ready", os.getpid(), f"off: {face_problem}" if face_problem else "on", engine))
    while True:
        try:
            order: WorkOrder | None = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if order is None:
            return
        reply: Converted | WorkFailed
        try:
            tools = faces(order.style) if order.settings.faces else None
            reply = convert_bytes(order.data, model(order.style), order.settings, tools)
        except AnimebotError as exc:
            reply = WorkFailed(order.job_id, exc.code, exc.message)
        except Exception as exc:  # a bug or a runtime failure: keep its traceback, keep serving
            log.exception("job %s: unexpected failure in the worker", order.job_id)
            reply = WorkFailed(order.job_id, "internal", f"{exc.__class__.__name__}: {exc}")
        try:
            conn.send(reply)
        except OSError:  # the bot is gone (BrokenPipeError): nobody to answer
            return
