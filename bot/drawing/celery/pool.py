"""The scaled-out pool: photos drawn by ``animebot worker`` processes, through Celery over Redis.

The broker is transport, not storage. The queue stays in the bot (the fair
queue of :class:`~bot.drawing.pool.Pool`, backed by the journal), and a photo goes
to the broker only when a worker process is free to take it, so Redis holds
at most one photo per worker process and a Redis that loses everything
loses nothing the bot cannot send again.

How the bot knows what happens on the workers:

* every worker process writes a heartbeat to Redis every 2 s (its styles,
  its engine, the task it is drawing), which says how many photos the
  cluster can take now and which tasks are really being drawn;
* results are read by polling their keys in the result backend, one MGET
  for all photos in flight, rather than by Celery's pub/sub result consumer,
  which would buffer every finished photo on a connection nobody reads.

A task that vanishes (its worker killed, Redis restarted empty, its result
expired) is sent again under the same task id: the journal's job is the
idempotency key, so whatever is delivered twice is answered once.

Every blocking Redis or Celery call runs on one thread of its own, so the
event loop never waits on the network, and the number of threads and
connections does not grow with the number of users.

It is over 300 lines because the dispatch, the result polling and the resend
decision share the in-flight table and must be read together.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis
from celery.backends.redis import RedisBackend
from kombu.exceptions import KombuError

from bot.drawing.celery.wire import (RESULT_EXPIRES_S, QUEUE, REDIS_TIMEOUT_S, TASK_NAME, BadMessage, WorkerInfo,
                                     answered_key, cancel_key, make_celery, order_summary, order_to_message,
                                     read_workers, result_from_message, task_id_for)
from bot.drawing.fairqueue import Ticket
from bot.drawing.pool import CLIP_TIMEOUT_FACTOR, Pool, WorkerLost, WorkerView, fail
from inference.drawer import WorkFailed
from inference.errors import AnimebotError

log = logging.getLogger("animebot.pool")

POLL_S = 0.025  # how often results are looked for while photos are in flight (one MGET for all)
WORKERS_EVERY_S = 1.0  # how often the heartbeats are read
BEAT_STALE_S = 6.0  # a worker process whose heartbeat has not changed for this long is gone (it beats every 2 s)
LOST_AFTER_S = 6.0  # a task no live worker has claimed for this long is sent again
SENT_GRACE_S = 20.0  # a task sent to a free worker starts within this, or it was lost on the way
# A photo whose worker died while drawing it this many times is given up, with an apology (it may be what
# kills them). Sends again for any other reason (Redis lost it, a worker failed it while Redis was away)
# are not counted: the broker's trouble must not cost a photo.
MAX_CRASHES = 3
BROKER_ERRORS = (redis.RedisError, KombuError, OSError)
MISSING_MODEL = ("unknown_style", "not_installed", "weights", "bad_model")  # a worker's answer when it lacks the style


class PolledRedisBackend(RedisBackend):
    """Celery's Redis result backend, minus the pub/sub subscription made at every send: the bot polls
    the result keys instead (see the module docstring)."""

    def on_task_call(self, producer: Any, task_id: str) -> None:
        pass


@dataclass(eq=False)
class _InFlight:
    task: Ticket
    task_id: str
    sent_at: float
    seen_at: float  # the last time a live worker's heartbeat named this task (or when it was sent)
    crashes: int = 0  # times its worker died while drawing it
    claimed: bool = False  # a worker's heartbeat has named it


class CeleryPool(Pool):
    """Sends photos to Celery as worker processes have room, and collects their results."""

    def __init__(self, broker_url: str, queue_size: int, timeout_s: float) -> None:
        super().__init__(queue_size, timeout_s)
        self._app = make_celery(broker_url, timeout_s)
        self._app.conf.result_backend = f"{PolledRedisBackend.__module__}.{PolledRedisBackend.__name__}+{broker_url}"
        self._redis = redis.Redis.from_url(broker_url, socket_timeout=REDIS_TIMEOUT_S,
                                           socket_connect_timeout=REDIS_TIMEOUT_S)
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="broker")
        self._in_flight: dict[str, _InFlight] = {}
        self._workers: list[WorkerInfo] = []  # the live ones
        self._beats: dict[tuple[str, int], tuple[float, float]] = {}  # process -> (its last beat, when we saw it change)
        self._down_since: float | None = None  # the broker is unreachable since (wall clock)
        self._room = asyncio.Event()
        self._answered: list[str] = []  # tasks ended since the last look: their results go, their markers come
        self._loops: list[asyncio.Task[None]] = []

    # --- Pool -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Look for workers once (the bot starts even if none is up yet, or Redis is down: photos wait)."""
        await self._look_for_workers()
        ok, how = self.healthy()
        (log.info if ok else log.warning)("Celery pool: %s", how)
        self._loops = [asyncio.create_task(self._dispatch(), name="celery-dispatch"),
                       asyncio.create_task(self._watch(), name="celery-watch")]

    async def close(self) -> None:
        self.pause()
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._drop_waiting()
        for flight in self._in_flight.values():  # their jobs stay open in the journal
            flight.task.result.cancel()
        self._in_flight.clear()
        self._io.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self._redis.close)

    @property
    def size(self) -> int:
        return len(self._workers)

    @property
    def running(self) -> int:
        return len(self._in_flight)

    def healthy(self) -> tuple[bool, str]:
        if self._down_since is not None:
            return False, f"the broker is unreachable since {time.strftime('%H:%M:%S', time.gmtime(self._down_since))} UTC"
        if not self._workers:
            return False, "no worker process online"
        nodes = len({w.name for w in self._workers})
        return True, f"{len(self._workers)} drawing process(es) in {nodes} animebot worker(s), via Celery"

    def workers(self) -> list[WorkerView]:
        return [WorkerView(f"{w.name} (pid {w.pid})", w.styles, w.engine, w.task is not None) for w in self._workers]

    # --- sending ------------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        """Send the next photo in fair order whenever a worker process is free."""
        while True:
            while self._room_on_workers() <= 0:
                self._room.clear()
                await self._room.wait()
            task = await self._next_ticket()
            if task is None:
                return  # paused for a stop
            flight = _InFlight(task, task_id_for(task.job_id, task.key), time.monotonic(), time.monotonic())
            if task.order.clip is not None:
                task.stop = self._stopper(flight.task_id)
            if await self._send(flight):
                task.take(at=flight.sent_at)  # the send counts as drawing time: it is the broker's cost
                self._in_flight[flight.task_id] = flight
            else:
                self.queue.put_back(task)
                await asyncio.sleep(1.0)

    def _room_on_workers(self) -> int:
        """Photos the live worker processes can take now. One drawing what the bot no longer waits for
        (a photo whose job was stopped, an order of another bot on the same broker) has no room:
        a photo sent to it would wait in Redis while its status said "Drawing…"."""
        elsewhere = sum(1 for w in self._workers if w.task is not None and w.task not in self._in_flight)
        return len(self._workers) - elsewhere - len(self._in_flight)

    async def _send(self, flight: _InFlight) -> bool:
        """Send the order; its "answered" marker from an earlier run of the bot goes first (a restart
        between reading a result and storing it sends that drawing again, and it must be drawn)."""
        order = flight.task.order
        message = order_to_message(order)
        limit = self._limit(flight)

        def send() -> None:
            self._redis.delete(answered_key(flight.task_id))
            self._app.send_task(TASK_NAME, args=[message], task_id=flight.task_id, queue=QUEUE, time_limit=limit,
                                soft_time_limit=limit - min(5.0, limit / 10), argsrepr=order_summary(order),
                                kwargsrepr="{}")
        try:
            await asyncio.get_running_loop().run_in_executor(self._io, send)
        except Exception as exc:  # kombu and Celery wrap a lost Redis in several types, RuntimeError among them
            self._broker_down(exc)
            return False
        return True

    # --- watching ------------------------------------------------------------------------------

    async def _watch(self) -> None:
        """Collect results, follow the heartbeats, and send again what vanished."""
        last_look = 0.0
        while True:
            try:
                if time.monotonic() - last_look >= WORKERS_EVERY_S:
                    await self._look_for_workers()
                    last_look = time.monotonic()
                if self._in_flight:
                    await self._collect()
                if self._down_since is not None:
                    log.info("the broker is reachable again; %d photo(s) in flight, %d waiting",
                             len(self._in_flight), self.waiting)
                    self._down_since = None
                    for flight in self._in_flight.values():  # nothing could be seen meanwhile: start afresh
                        flight.sent_at = flight.seen_at = time.monotonic()
            except BROKER_ERRORS as exc:
                self._broker_down(exc)
                await asyncio.sleep(1.0)
            except Exception:  # a bug: keep its traceback, and keep watching, or every photo would hang
                log.exception("Celery pool: watching the workers failed; going on")
                await asyncio.sleep(1.0)
            await asyncio.sleep(POLL_S)

    async def _look_for_workers(self) -> None:
        """Read the heartbeats. A process counts as live while its beat keeps changing, as timed by our own
        clock: a killed worker is seen in seconds, not when its key expires, and the machines' clocks
        need not agree."""
        found = await asyncio.get_running_loop().run_in_executor(self._io, read_workers, self._redis)
        now = time.monotonic()
        beats = {}
        for w in found:
            last, changed = self._beats.get((w.name, w.pid), (None, now))
            beats[w.name, w.pid] = (w.seen, now if w.seen != last else changed)
        self._beats = beats
        self._workers = [w for w in found if now - beats[w.name, w.pid][1] < BEAT_STALE_S]
        self._room.set()
        claimed = {w.task: w for w in self._workers if w.task}
        for flight in self._in_flight.values():
            if (worker := claimed.get(flight.task_id)) is not None:
                flight.seen_at, flight.claimed = now, True
                flight.task.progress = worker.progress or flight.task.progress

    def _stopper(self, task_id: str) -> Callable[[], None]:
        """How to stop a clip on a worker: a key in Redis that its heartbeat reads, and its drawing
        between frames (set on the broker's thread, like every Redis call)."""
        def stop() -> None:
            asking = asyncio.get_running_loop().run_in_executor(
                self._io, lambda: self._redis.set(cancel_key(task_id), "1", ex=int(self.timeout_s * CLIP_TIMEOUT_FACTOR)))
            asking.add_done_callback(said)

        def said(asking: asyncio.Future[Any]) -> None:
            if not asking.cancelled() and asking.exception() is not None:
                log.warning("task %s: cannot ask its worker to stop (%s); it will finish", task_id, asking.exception())
        return stop

    async def _collect(self) -> None:
        flights = list(self._in_flight.values())
        backend = self._app.backend
        keys = [backend.get_key_for_task(f.task_id) for f in flights]
        raw = await asyncio.get_running_loop().run_in_executor(self._io, self._redis.mget, keys)
        now = time.monotonic()
        idle = any(w.task is None for w in self._workers)
        for flight, value in zip(flights, raw):
            if self._in_flight.get(flight.task_id) is not flight:
                continue
            try:
                meta: dict[str, Any] = backend.decode_result(value) if value is not None else {"status": "PENDING"}
                state = meta["status"]
            except Exception as exc:  # not msgpack (a pickle, say), or not Celery's: never acted on
                log.warning("job %s: unreadable result for task %s (%s); sending it again", flight.task.job_id,
                            flight.task_id, exc.__class__.__name__)
                await self._resend(flight, "its result was unreadable")
                continue
            if state == "SUCCESS":
                self._finish(flight, meta["result"])
            elif state == "FAILURE":
                await self._failed(flight, meta.get("result"))
            elif flight.task.result.done():  # its job was stopped
                self._forget(flight)
            elif now - flight.sent_at > self._limit(flight) + LOST_AFTER_S:
                log.warning("job %s: no result after %.0f s; giving it up", flight.task.job_id, now - flight.sent_at)
                self._end(flight, WorkerLost("the worker timed out"))
            elif flight.claimed and now - flight.seen_at > LOST_AFTER_S:
                await self._resend(flight)
            elif not flight.claimed and now - flight.seen_at > SENT_GRACE_S and idle:
                await self._resend(flight)  # a worker is free, yet none took it: it was lost on the way
        if self._answered:
            await asyncio.get_running_loop().run_in_executor(self._io, self._mark_answered, self._answered)
            self._answered = []

    def _mark_answered(self, task_ids: list[str]) -> None:
        """Drop the results of tasks the bot is done with, and leave a marker in their place for as long
        as Redis keeps results: a copy of the order that comes back from a dead worker is then skipped."""
        backend = self._app.backend
        with self._redis.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.delete(backend.get_key_for_task(task_id))
                pipe.set(answered_key(task_id), "1", ex=RESULT_EXPIRES_S)
            pipe.execute()

    def _limit(self, flight: _InFlight) -> float:
        """How long its worker may take: the job timeout, a clip's several times over."""
        return self.timeout_s * (CLIP_TIMEOUT_FACTOR if flight.task.order.clip is not None else 1)

    async def _failed(self, flight: _InFlight, error: object) -> None:
        """Celery failed the task: past its time limit (given up), or for a reason of the worker's
        (its result could not be stored while Redis was away...): sent again."""
        kind = error.get("exc_type") if isinstance(error, dict) else None
        if kind in ("TimeLimitExceeded", "SoftTimeLimitExceeded"):
            log.warning("job %s: task %s passed the time limit on its worker", flight.task.job_id, flight.task_id)
            self._end(flight, WorkerLost("the worker timed out"))
        else:
            await self._resend(flight, f"the worker failed it: {kind}: "
                                       f"{error.get('exc_message') if isinstance(error, dict) else error}")

    async def _resend(self, flight: _InFlight, why: str = "") -> None:
        """The task vanished (its worker died, or the broker lost it) or failed: send it again, or give up.
        Any result under its id goes first, so that only the new attempt's can be read."""
        crashed = not why and flight.claimed
        why = why or ("its worker stopped answering" if flight.claimed else "no worker took it")
        if crashed:
            flight.crashes += 1
            if flight.crashes >= MAX_CRASHES:
                log.warning("job %s: task %s lost its worker %d times; giving it up", flight.task.job_id,
                            flight.task_id, flight.crashes)
                self._end(flight, WorkerLost("the worker crashed"))
                return
        log.warning("job %s: task %s vanished (%s); sending it again", flight.task.job_id, flight.task_id, why)
        key = self._app.backend.get_key_for_task(flight.task_id)
        await asyncio.get_running_loop().run_in_executor(self._io, self._redis.delete, key)
        if await self._send(flight):
            flight.sent_at = flight.seen_at = time.monotonic()
            flight.claimed = False

    def _finish(self, flight: _InFlight, message: object) -> None:
        try:
            reply = result_from_message(message)
        except BadMessage as exc:
            log.warning("job %s: unreadable result from a worker: %s", flight.task.job_id, exc.message)
            self._end(flight, WorkerLost("the worker sent an unreadable result"))
            return
        if isinstance(reply, WorkFailed):
            if reply.code in MISSING_MODEL:  # the bot has the style, this worker does not
                log.warning("job %s: a worker cannot draw %s: %s", flight.task.job_id, flight.task.order.style,
                            reply.message)
                reply = WorkFailed(reply.job_id, "style_unavailable", reply.message)
            self._end(flight, AnimebotError(reply.message, code=reply.code))
            return
        self._forget(flight)
        if not flight.task.result.done():
            flight.task.result.set_result(reply)

    def _end(self, flight: _InFlight, exc: Exception) -> None:
        self._forget(flight)
        fail(flight.task, exc)

    def _forget(self, flight: _InFlight) -> None:
        """The bot is done with this task, answered or not: its room is free, and no worker should draw it."""
        del self._in_flight[flight.task_id]
        self._answered.append(flight.task_id)
        self._room.set()

    def _broker_down(self, exc: BaseException) -> None:
        """One line when the broker goes away (not one per retry); photos keep waiting in the queue."""
        if self._down_since is None:
            self._down_since = time.time()
            self._workers = []
            log.error("the broker is unreachable (%s: %s); photos wait in the queue until it is back",
                      exc.__class__.__name__, exc)
