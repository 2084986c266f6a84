"""The inside of one inference worker process.

A worker loads its models once and then converts whatever arrives on its
pipe: photo bytes in, encoded anime bytes out. Decoding, resizing and
encoding happen here too, so the bot's event loop only moves bytes.
It runs in a fresh (spawned) interpreter, so nothing here may rely on state
of the parent process.
"""
from __future__ import annotations

import os
import signal
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


def serve(conn: Connection, spec: WorkerSpec) -> None:
    """Worker main loop. Sends ``("ready", pid)`` or ``("failed", message)`` first."""
    # The parent owns shutdown: a Ctrl-C in the terminal reaches the whole
    # process group, and a worker that died mid-job would lose that photo.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
        except Exception as exc:  # a bug or a torch failure: report it, keep serving
            reply = WorkFailed(order.job_id, "internal", f"{exc.__class__.__name__}: {exc}")
        conn.send(reply)
