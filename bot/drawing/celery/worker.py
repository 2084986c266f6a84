"""``animebot worker``: draw photos for a bot on another machine, taking them from Celery over Redis.

The worker holds no Telegram token and talks to nobody but Redis. It is a
Celery worker with a prefork pool: each pool process loads the models once
(a :class:`Drawer`, the same one the bot's own worker processes use), then
draws one order at a time, and says every few seconds in Redis that it is
alive, what it can draw and what it is drawing (bot/drawing/celery/wire.py,
``read_workers``).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from multiprocessing.synchronize import Event
from typing import Any

import redis
from celery import signals
from celery.exceptions import Ignore, Reject

from bot.drawing.celery.wire import (QUEUE, REDIS_TIMEOUT_S, TASK_NAME, BadOrder, WorkerInfo, answered_key, cancel_key,
                            make_celery, order_from_message, result_to_message, write_heartbeat)
from bot.service.config import WorkerConfig, broker_password
from bot.service.logs import setup_logging
from inference.drawer import Drawer, DrawerSpec, WorkFailed
from bot.drawing.children import die_with_parent
from inference.errors import AnimebotError
from weights.provision import provision
from weights.store import ModelStore, default_style

WORKER_BEAT_S = 2.0
WORKER_BEAT_TTL_S = 10.0  # a process not heard from for this long is gone (killed, or cut off from Redis)

log = logging.getLogger("animebot.worker")


def run_worker(cfg: WorkerConfig) -> int:
    """Install the configured models, then serve until stopped (SIGTERM: after the photos being drawn)."""
    setup_logging(broker_password(cfg.broker_url))
    # Celery's own lines go through the handler above, redacted, instead of handlers of its own.
    signals.setup_logging.connect(_keep_our_logging, weak=False)
    # It logs each result at INFO, photo bytes and all; its warnings and errors are still wanted.
    logging.getLogger("celery.app.trace").setLevel(logging.ERROR)
    store = ModelStore(cfg.home)
    provision(store, cfg.weights, cfg.baked_models)
    preload = cfg.default_style or default_style(store)
    store.require_style(preload)  # a mistyped ANIMEBOT_STYLE stops the worker here, not in every pool process
    node = f"animebot@{socket.gethostname()}-{os.getpid()}"
    app = make_celery(cfg.broker_url, cfg.job_timeout_s)
    app.conf.broker_connection_max_retries = None  # wait Redis out however long, rather than exit after 100 tries
    pool = _Pool(DrawerSpec(cfg.home, cfg.backend, cfg.threads, preload), node, cfg.broker_url, os.getpid())

    @app.task(bind=True, name=TASK_NAME)
    def draw(task: Any, *args: object, **kwargs: object) -> dict[str, object]:
        return pool.draw(task.request.id, args, kwargs)

    signals.worker_process_init.connect(pool.start_process, weak=False)
    log.info("animebot worker %s: %d process(es) x %d thread(s), %s, preloading %s", node, cfg.concurrency,
             cfg.threads, cfg.backend, preload)
    worker = app.Worker(hostname=node, pool_cls="prefork", concurrency=cfg.concurrency, queues=[QUEUE],
                        without_gossip=True, without_mingle=True, without_heartbeat=True, loglevel="INFO", quiet=True)
    worker.start()
    return 1 if pool.failed.is_set() else int(worker.exitcode or 0)


def _keep_our_logging(**_: Any) -> None:
    """Connected to Celery's ``setup_logging`` signal: with a receiver, Celery configures no logging."""


@dataclass
class _Pool:
    """What the worker's main process gives each pool process; after the fork, that process's own
    Drawer and heartbeat."""

    spec: DrawerSpec
    node: str
    broker_url: str
    main_pid: int
    # Set by a pool process whose models do not load, so that the worker exits with an error.
    failed: Event = field(default_factory=lambda: mp.get_context("fork").Event())
    drawer: Drawer | None = None
    heartbeat: _Heartbeat | None = None

    def start_process(self, **_: Any) -> None:
        """Celery's ``worker_process_init``, in each new pool process: load, say so, start the heartbeat.

        Celery asks the kernel to kill pool processes with the main one too;
        :func:`die_with_parent` also covers a main process that died before that."""
        die_with_parent(self.main_pid)
        drawer = Drawer(self.spec)
        try:
            loaded = drawer.load()
        except AnimebotError as exc:
            log.error("animebot worker cannot draw (%s); stopping", exc.message)
            self.failed.set()
            os.kill(self.main_pid, signal.SIGTERM)  # a warm shutdown, orders not yet taken stay queued for others
            return
        log.info("animebot worker ready: pid %d, styles %s, engine %s, face pass %s", os.getpid(),
                 ",".join(loaded.styles), loaded.engine, loaded.faces)
        client = redis.Redis.from_url(self.broker_url, socket_timeout=REDIS_TIMEOUT_S,
                                      socket_connect_timeout=REDIS_TIMEOUT_S)
        self.heartbeat = _Heartbeat(client, WorkerInfo(self.node, os.getpid(), loaded.styles, loaded.engine,
                                                       loaded.faces, None, time.time()))
        threading.Thread(target=self.heartbeat.run, name="animebot-heartbeat", daemon=True).start()
        self.drawer = drawer

    def draw(self, task_id: str, args: tuple[object, ...], kwargs: dict[str, object]) -> dict[str, object]:
        """The task ``task_id``: one order in, one result out. Anything but exactly one order is refused
        unread: rejected, not requeued, never drawn."""
        try:
            if len(args) != 1 or kwargs:
                raise BadOrder(f"a task carries one order, not {len(args)} argument(s) and {len(kwargs)} keyword(s)")
            order = order_from_message(args[0])
        except BadOrder as exc:
            log.warning("task %s refused: %s", task_id, exc.message)
            raise Reject(exc.message, requeue=False) from None
        if self.drawer is None or self.heartbeat is None:  # the models did not load: back to the queue
            raise Reject("this worker is stopping", requeue=True)
        if self.heartbeat.answered(task_id):
            log.info("task %s (job %s): already answered; not drawn again", task_id, order.job_id)
            raise Ignore()  # acknowledged, and no result stored for it
        started = time.perf_counter()
        beat = self.heartbeat
        beat.drawing(task_id)
        try:
            reply = self.drawer.draw(order, beat.progress, lambda: beat.cancel_asked == task_id)
        finally:
            beat.drawing(None)
        if isinstance(reply, WorkFailed):
            log.info("task %s (job %s) failed: %s: %s", task_id, order.job_id, reply.code, reply.message)
        else:
            log.info("task %s (job %s): %s drawn in %.2f s", task_id, order.job_id, order.style,
                     time.perf_counter() - started)
        return result_to_message(reply)


@dataclass
class _Heartbeat:
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
        self.info = replace(self.info, task=task_id, progress=None)
        self._wake.set()

    def answered(self, task_id: str) -> bool:
        """Whether the bot is done with ``task_id`` already (an order redelivered from a dead worker after
        the bot sent it again and answered). Redis away: not known, so the order is drawn."""
        try:
            return bool(self.client.exists(answered_key(task_id)))
        except redis.RedisError:
            return False

    def progress(self, done: int, total: int) -> None:
        """A clip's frames so far: sent with the next beat (the bot edits its status less often still)."""
        self.info = replace(self.info, progress=(done, total))

    def run(self) -> None:
        while True:
            self._beat()
            self._wake.wait(WORKER_BEAT_S)
            self._wake.clear()

    def _beat(self) -> None:
        try:
            info = replace(self.info, seen=time.time())
            write_heartbeat(self.client, info, WORKER_BEAT_TTL_S)
            if info.progress is not None and info.task is not None and self.client.exists(cancel_key(info.task)):
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
