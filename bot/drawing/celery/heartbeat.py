"""A worker process's heartbeat: what it can draw and is drawing, in Redis every few seconds.

The bot reads them (bot/drawing/celery/wire.py, ``read_workers``) to know how many photos the
workers can take now and which tasks are really being drawn, process by process. Celery's own
worker heartbeats, which Flower shows, come from a worker's main process, which beats on while one
of its pool processes hangs or is killed, and say nothing of styles.

Each beat also looks whether the bot asked to stop the task being drawn (a clip whose Cancel was
pressed: a key beside the task, bot/drawing/celery/wire.py). Celery's own ``celery.contrib.abortable``
is not used for it: it stores ABORTED as the task's result, so an abort that lands just after the clip
was stored overwrites the clip, and the PROGRESS states a clip reports (bot/drawing/celery/task.py)
would overwrite an abort in turn; a key of its own has neither race.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace

import redis

from bot.drawing.celery.wire import WorkerInfo, cancel_key, write_heartbeat

WORKER_BEAT_S = 2.0
WORKER_BEAT_TTL_S = 10.0  # a process not heard from for this long is gone (killed, or cut off from Redis)

log = logging.getLogger("animebot.worker")


@dataclass
class Heartbeat:
    """This process's :class:`WorkerInfo` in Redis every WORKER_BEAT_S, and at once when it starts or
    ends a drawing. Redis being away is logged when it goes and when it is back, not every beat, and
    never stops the beat or the process."""

    client: redis.Redis
    info: WorkerInfo
    cancel_asked: str | None = None  # the task the bot asked to stop, as the last beat found
    _wake: threading.Event = field(default_factory=threading.Event)
    _down: bool = False

    def drawing(self, task_id: str | None) -> None:
        """Now drawing ``task_id`` (None: nothing); written by the heartbeat thread, so the drawing never
        waits for Redis."""
        self.info = replace(self.info, task=task_id)
        self._wake.set()

    def run(self) -> None:
        while True:
            self._beat()
            self._wake.wait(WORKER_BEAT_S)
            self._wake.clear()

    def _beat(self) -> None:
        try:
            info = replace(self.info, seen=time.time())
            write_heartbeat(self.client, info, WORKER_BEAT_TTL_S)
            if info.task is not None and self.client.exists(cancel_key(info.task)):
                self.cancel_asked = info.task  # read between frames by the drawing thread
        except Exception as exc:  # Redis away (ConnectionError, TimeoutError...), or anything else: beat on
            if not self._down:
                log.warning("heartbeat: cannot reach Redis (%s: %s); trying again every %g s", exc.__class__.__name__,
                            exc, WORKER_BEAT_S)
            self._down = True
            return
        if self._down:
            log.info("heartbeat: Redis is back")
        self._down = False
