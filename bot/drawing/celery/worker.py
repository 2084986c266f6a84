"""``animebot worker``: draw photos for a bot on another machine, taking them from Celery over Redis.

The worker holds no Telegram token and talks to nobody but Redis. It is a
Celery worker with a prefork pool: each pool process loads the models once
(a :class:`Drawer`, the same one the bot's own worker processes use), then
draws one order at a time (the task, bot/drawing/celery/task.py), and says
every few seconds in Redis that it is alive, what it can draw and what it is
drawing (bot/drawing/celery/heartbeat.py). Its configuration is the bot's
(bot/drawing/celery/app.py).
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import os
import secrets
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event
from typing import Any

import redis
from celery import signals

from storage.errors import AnimebotError
from bot.drawing.celery import task
from bot.drawing.celery.app import QUEUE, REDIS_TIMEOUT_S, for_worker
from bot.drawing.celery.heartbeat import Heartbeat
from bot.drawing.celery.wire import WorkerInfo
from bot.drawing.children import die_with_parent
from bot.service.config import WorkerConfig, broker_password
from bot.service.logs import setup_logging
from inference.drawer import Drawer, DrawerSpec
from weights.provision import provision
from weights.store import ModelStore, WeightsError, default_style

log = logging.getLogger("animebot.worker")
MODELS_POLL_S = 2.0  # how often a worker waiting for the bot's models looks again


def run_worker(cfg: WorkerConfig) -> int:
    """Install the configured models, then serve until stopped (SIGTERM: after the photos being drawn)."""
    setup_logging(broker_password(cfg.broker_url))
    # Celery's own lines go through the handler above, redacted, instead of handlers of its own.
    signals.setup_logging.connect(_keep_our_logging, weak=False)
    # It logs each result at INFO, photo bytes and all; its warnings and errors are still wanted.
    logging.getLogger("celery.app.trace").setLevel(logging.ERROR)
    store = ModelStore(cfg.home)
    store.models_dir.mkdir(parents=True, exist_ok=True)
    # Read-only models are another's to install (Compose's workers share the bot's): nothing to
    # provision here, and the worker waits for them if they are not there yet.
    shared = not os.access(store.models_dir, os.W_OK)
    if not shared:
        provision(store, cfg.weights, cfg.baked_models)
    preload = _preload_style(cfg, store, shared)
    if preload is None:
        return 0  # stopped while waiting for the models
    # Host and pid alone can repeat: containers on the host's network share its hostname, and
    # each has its own pid 1. A short random part keeps two such workers apart in Celery's mingle,
    # in `celery inspect` and in our heartbeats.
    node = f"animebot@{socket.gethostname()}-{secrets.token_hex(3)}-{os.getpid()}"
    app = for_worker(cfg.broker_url, cfg.job_timeout_s, cfg.concurrency)
    starter = _ProcessStart(DrawerSpec(cfg.home, cfg.backend, cfg.threads, preload), node, cfg.broker_url,
                            os.getpid())
    signals.worker_process_init.connect(starter, weak=False)
    signals.task_postrun.connect(task.drop_unwanted, weak=False)
    log.info("animebot worker %s: %d process(es) x %d thread(s), %s, preloading %s", node, cfg.concurrency,
             cfg.threads, cfg.backend, preload)
    # Celery's heartbeats, gossip and mingle stay on, as Celery's tools expect; the bot itself
    # goes by our heartbeats, which carry what a process can draw and is drawing.
    worker = app.Worker(hostname=node, queues=[QUEUE], loglevel="INFO", quiet=True)
    worker.start()
    return 1 if starter.failed.is_set() else int(worker.exitcode or 0)


def _preload_style(cfg: WorkerConfig, store: ModelStore, shared: bool) -> str | None:
    """The style each pool process loads first; a mistyped ANIMEBOT_STYLE stops the worker here, not in every
    pool process. ``shared`` models are another's to install, perhaps right now: wait for them, saying so
    once; None if SIGTERM comes first."""
    stop = threading.Event()
    waiting = False
    while True:
        try:
            preload = cfg.default_style or default_style(store)
            store.require_style(preload)
            return preload
        except WeightsError as exc:
            if not shared:
                raise
            if not waiting:
                log.info("waiting for the models in %s, which are read-only here: %s", store.models_dir, exc.message)
                signal.signal(signal.SIGTERM, lambda *_: stop.set())
                waiting = True
        if stop.wait(MODELS_POLL_S):
            return None


def _keep_our_logging(**_: Any) -> None:
    """Connected to Celery's ``setup_logging`` signal: with a receiver, Celery configures no logging."""


@dataclass
class _ProcessStart:
    """Celery's ``worker_process_init``, in each new pool process: load the models, say so, start the
    heartbeat, and serve the task (bot/drawing/celery/task.py) with them."""

    spec: DrawerSpec
    node: str
    broker_url: str
    main_pid: int
    # Set by a pool process whose models do not load, so that the worker exits with an error.
    failed: Event = field(default_factory=lambda: mp.get_context("fork").Event())

    def __call__(self, **_: Any) -> None:
        """Celery asks the kernel to kill pool processes with the main one too; :func:`die_with_parent`
        also covers a main process that died before that."""
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
        heartbeat = Heartbeat(client, WorkerInfo(self.node, os.getpid(), loaded.styles, loaded.engine, loaded.faces,
                                                 None, time.time()))
        threading.Thread(target=heartbeat.run, name="animebot-heartbeat", daemon=True).start()
        task.serve(task.Drawing(drawer, heartbeat))
