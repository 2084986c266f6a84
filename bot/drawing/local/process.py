"""The inside of one of the bot's own worker processes, and the messages on its pipe.

A worker loads its models once (a :class:`~inference.drawer.Drawer`) and then
draws whatever arrives on its pipe: photo bytes in, encoded anime bytes out.
Decoding, resizing and encoding happen here too, so the bot's event loop only
moves bytes. A clip's frames are reported up the pipe as they are drawn, and
a cancel can come down it between frames. It runs in a fresh (spawned)
interpreter, so nothing here may rely on state of the parent process.

Every message is one of the dataclasses below (or a WorkOrder down, a
Converted or WorkFailed up), so both ends match on types, not on tuples.
"""
from __future__ import annotations

import logging
import os
import signal
import time
import multiprocessing as mp
from dataclasses import dataclass
from multiprocessing.connection import Connection

from storage.errors import AnimebotError
from bot.drawing.children import die_with_parent
from inference.drawer import Drawer, DrawerSpec, Loaded, WorkFailed, WorkOrder
from inference.pipeline import Converted

# A clip's worker tells the bot how far it got at most this often (the status message is edited less often).
PROGRESS_EVERY_S = 1.0


@dataclass(frozen=True)
class Ready:
    """Up, once: the worker loaded its models and takes orders."""

    pid: int
    loaded: Loaded


@dataclass(frozen=True)
class LoadFailed:
    """Up, once, instead of Ready: the preload style did not load; the worker exits."""

    message: str


@dataclass(frozen=True)
class Progress:
    """Up, while a clip is drawn: ``done`` of ``total`` frames."""

    done: int
    total: int


@dataclass(frozen=True)
class Cancel:
    """Down: stop the clip being drawn (read between frames; ignored when it comes too late)."""


@dataclass(frozen=True)
class Stop:
    """Down: finish, the bot is stopping."""


Down = WorkOrder | Cancel | Stop
Up = Ready | LoadFailed | Progress | Converted | WorkFailed

log = logging.getLogger("animebot.worker")


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


def worker_main(conn: Connection, spec: DrawerSpec) -> None:
    """Worker main loop: sends :class:`Ready` (or :class:`LoadFailed`) first, then answers each
    :class:`WorkOrder` with its drawing, until :class:`Stop` or the bot is gone."""
    _obey_the_parent_only()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    drawer = Drawer(spec)
    try:
        loaded = drawer.load()
    except AnimebotError as exc:
        conn.send(LoadFailed(exc.message))
        return
    conn.send(Ready(os.getpid(), loaded))
    while True:
        try:
            message: Down = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone
        if isinstance(message, Stop):
            return
        if isinstance(message, Cancel):  # came after its clip was done: nothing to stop
            continue
        try:
            conn.send(drawer.draw(message, _Progress(conn), lambda: _cancel_asked(conn)))
        except OSError:  # the bot is gone (BrokenPipeError): nobody to answer
            return


class _Progress:
    """Sends :class:`Progress` up the pipe, at most every PROGRESS_EVERY_S and at the end."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sent_at = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.sent_at >= PROGRESS_EVERY_S or done == total:
            self.sent_at = now
            self.conn.send(Progress(done, total))


def _cancel_asked(conn: Connection) -> bool:
    """Whether the bot sent Cancel while a clip is drawn (nothing else comes down the pipe then)."""
    return conn.poll() and isinstance(conn.recv(), Cancel)
