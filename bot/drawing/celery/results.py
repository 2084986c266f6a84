"""Results as Celery's Redis backend pushes them: the bot is told when a photo is drawn, it does not ask.

A worker stores a task's result with one SET and one PUBLISH on the result's key (Celery's Redis
backend does both), and Celery's result consumer, subscribed to that key since the bot sent the
task (``send_task`` subscribes before it publishes, so no result comes too early for it), reads
it off a pub/sub connection. That is what ``AsyncResult.get()`` waits on; the bot cannot block in
``get()`` once per photo, so one thread of its own drains the consumer for every photo in flight and
hands each result to the event loop. This replaced a poll of every task's key every 25 ms
(bot/drawing/celery/pool.py), whose wait was most of what the broker added to a photo.

What the push alone would miss, and who covers it:

* a result stored before the bot sent the task (a bot restarted between a result and its answer):
  the pool reads a task's stored result once, just after sending it;
* a result stored while the pub/sub connection was down: Celery's consumer reads the stored results
  of every task it follows when it reconnects; after an outage longer than its retries, this thread
  makes it reconnect again, once a second, until Redis answers;
* a pushed result that cannot be decoded (a pickle planted in Redis): its message does not say
  whose it was in a form worth trusting, so the pool reads every task in flight once (``read_all``).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import redis
from celery import Celery
from celery.backends.redis import RedisBackend, ResultConsumer  # type: ignore[attr-defined]  # not in celery-types
from celery.result import AsyncResult
from celery.states import READY_STATES
from kombu.exceptions import ContentDisallowed, DecodeError, KombuError

from bot.drawing.celery.resend import UNREADABLE
from bot.drawing.celery.wire import PROGRESS

log = logging.getLogger("animebot.pool")

# What the thread does with a result: (task id, Celery state, the result or the exception stored).
Deliver = Callable[[str, str, Any], None]
DRAIN_S = 1.0  # the longest the thread waits on the connection before it looks whether it should stop
CONNECTION_ERRORS = (redis.RedisError, KombuError, OSError)


class _Consumer(ResultConsumer):
    """Celery's Redis result consumer, handing every result to one callback.

    Celery's own keeps a result nobody waits on with ``get()`` in a buffer, for a ``get()`` that may
    come later; the bot never calls it, so that buffer would grow by a drawing per photo."""

    deliver: Deliver | None = None

    def on_state_change(self, meta: dict[str, Any], message: Any) -> None:
        if self.deliver is not None:
            self.deliver(meta["task_id"], meta["status"], meta.get("result"))
        if meta["status"] in READY_STATES:
            self.cancel_for(meta["task_id"])  # a task sent again is followed again by its send

    def reconnect(self) -> None:
        """One try at a new pub/sub connection, following every task again and reading what each stored."""
        self._reconnect_pubsub()


class PushedRedisBackend(RedisBackend):
    """Celery's Redis result backend with the consumer above: the bot's (bot/drawing/celery/app.py).

    Celery stops following a task when the last ``AsyncResult`` of it is garbage-collected, which
    suits a caller that keeps one to ``get()``; the bot keeps none (it sends by name, and reads with
    throwaway ones), so here a task is followed from its send until its result comes
    (:class:`_Consumer`) or the bot is done with it (:meth:`unfollow`)."""

    ResultConsumer = _Consumer
    result_consumer: _Consumer  # made by Celery's AsyncBackendMixin from the class above

    def on_result_fulfilled(self, result: Any) -> None:
        pass

    def unfollow(self, task_id: str) -> None:
        self.result_consumer.cancel_for(task_id)


class Results:
    """What the pool knows of its tasks' results between its looks: those pushed since the last, and
    whether a read of every stored one is due. The thread that drains the consumer of ``backend`` (the
    very object the bot sends tasks with, since sending is what follows a task) hands each result to the
    event loop, where those of tasks ``wanted`` (in flight) are kept until taken, and :attr:`news` is set.
    A clip's PROGRESS state is no result: it goes to ``progressed`` as it comes."""

    def __init__(self, backend: PushedRedisBackend, wanted: Callable[[str], bool],
                 progressed: Callable[[str, object], None]) -> None:
        self.backend = backend
        self._progressed = progressed
        self.news = asyncio.Event()
        # A pushed result could not be decoded, Redis is back, or a read failed: read every task's.
        self.read_all = False
        self._wanted = wanted
        self._pushed: dict[str, tuple[str, Any]] = {}
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        consumer: _Consumer = self.backend.result_consumer
        consumer.deliver = self._told
        threading.Thread(target=self._drain, args=(consumer,), name="celery-results", daemon=True).start()

    def stop(self) -> None:
        """Stop draining (within DRAIN_S) and close the connection; the thread is a daemon, never waited for."""
        self._stop.set()

    def push(self, task_id: str | None, state: str, value: Any) -> None:
        """A result for ``task_id`` (None: one that could not be decoded), on the event loop."""
        if task_id is None:
            self.read_all = True
        elif state == PROGRESS:
            if self._wanted(task_id):
                self._progressed(task_id, value)
            return
        elif self._wanted(task_id):
            self._pushed[task_id] = (state, value)
        else:
            return  # another bot's, or one this bot is done with
        self.news.set()

    def take(self, task_id: str, otherwise: tuple[str, Any]) -> tuple[str, Any]:
        return self._pushed.pop(task_id, otherwise)

    def drop(self, task_id: str) -> None:
        self._pushed.pop(task_id, None)

    def read(self, app: Celery, task_ids: list[str]) -> list[tuple[str, Any]]:
        """Each task's stored state and, once ready, its value (a blocking read). A stored result that
        cannot be decoded (not msgpack, or not Celery's) is UNREADABLE, never acted on."""
        looks: list[tuple[str, Any]] = []
        for task_id in task_ids:
            result: AsyncResult[Any] = AsyncResult(task_id, app=app)
            try:
                state = result.state  # one read; a ready task's is kept, so its value costs no second
                looks.append((state, result.result if state in READY_STATES else None))
            except Exception as exc:
                # kombu's decoding errors are KombuErrors too, but say nothing of the broker: a pickle, not
                # msgpack at all, or msgpack but not a result of Celery's.
                if isinstance(exc, CONNECTION_ERRORS) and not isinstance(exc, (ContentDisallowed, DecodeError)):
                    raise
                log.warning("task %s: its stored result is unreadable (%s)", task_id, exc.__class__.__name__)
                looks.append((UNREADABLE, None))
        return looks

    def _told(self, task_id: str | None, state: str, value: Any) -> None:
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop closed: the bot is stopping
            self._loop.call_soon_threadsafe(self.push, task_id, state, value)

    def _drain(self, consumer: _Consumer) -> None:
        broken = False
        while not self._stop.is_set():
            try:
                if broken:
                    consumer.reconnect()
                    broken = False
                consumer.drain_events(timeout=DRAIN_S)
            except (ContentDisallowed, DecodeError) as exc:
                log.warning("a result pushed by Redis is unreadable (%s); reading every task in flight",
                            exc.__class__.__name__)
                self._told(None, "", None)
            except CONNECTION_ERRORS:  # the pool's own look at Redis says so in the log, once
                broken = True
                self._stop.wait(1.0)
            except Exception:  # a bug, or a result not Celery's: keep its traceback, look, and keep draining
                log.exception("reading the results pushed by Redis failed; reading every task in flight")
                self._told(None, "", None)
                self._stop.wait(1.0)
        with contextlib.suppress(*CONNECTION_ERRORS):
            consumer.stop()
